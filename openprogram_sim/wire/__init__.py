"""Scripted turns as the exact HTTP responses each real provider API would send.

The wire simulator's core: :func:`encode` turns one scripted
:class:`~openprogram_sim.models.Turn` into the response that OpenAI Chat Completions,
OpenAI Responses, Anthropic Messages, Gemini ``generateContent`` or Bedrock Converse would
answer with, streaming (SSE, or AWS event-stream frames for Bedrock) or as one JSON body.
The real adapters then parse it exactly as they parse the real service, so a loop run
through an adapter can be compared with the same run through the scripted model.

:class:`ScriptedWire` serves a list of turns, in call order, to whichever adapter calls
it, as an ``httpx2.MockTransport`` handler::

    wire = ScriptedWire([
        {"tool_calls": [{"search": {"q": "tides"}}]},
        {"text": "Tides follow the moon."},
    ])
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="test", client=wire.client())
    Runtime(provider=provider).exec("Research tides.", tools=[search])
    wire.requests[1].body["messages"]  # what the adapter sent on the second call
    wire.assert_consumed()

A turn's ``wire:`` faults (:class:`WireFault`), ``latency`` and ``fault: raise`` / ``hang``
are played by ScriptedWire as the loopback server (:func:`serve`) plays them, through the
same code: the same statuses, headers and bytes, real waits, a cut connection as
``httpx2.RemoteProtocolError``, a hang as a read that lasts until the client's timeout.

The loopback server (:func:`serve`) also builds a trace of each named session from what its
client sent and what it was served (``server.session(NAME).trace()``, a
:class:`SessionTrace` in the loop's event shapes), checks it with a :class:`SessionCheck`
(a scenario's ``expect.trajectory`` and ``expect.properties``), and checks the client's side
of the protocol: the invariants :data:`CLIENT_CHECKS`, turned off with :class:`ClientChecks`.

Everything here is a pure function of its inputs (``turn -> WireResponse`` with status,
headers and body chunks), so a loopback HTTP server can serve the same bytes.

What each scripted turn becomes:

* **text / thinking** stream in ``chunk_size`` pieces (24 characters, as
  :class:`~openprogram_sim.models.ScriptedModel` does). Thinking is ``reasoning_content``
  on OpenAI Chat (the field compatible servers use; the official API sends none), a
  ``reasoning`` item's summary on Responses, a signed ``thinking`` block on Anthropic,
  ``thought: true`` parts on Gemini and ``reasoningContent`` on Bedrock.
* **tool calls** keep their name and arguments. Streaming APIs that stream arguments get
  them as partial JSON text in ``chunk_size`` pieces; Gemini sends each call whole. A
  call's ``id`` is the turn's, else one in the API's own style made from ``seq`` (e.g.
  ``toolu_wire3_0``); Gemini sends no id unless the turn names one, like the real API.
  Arguments given as a string (malformed JSON, a list) go verbatim on wires that carry
  text (OpenAI Chat and Responses, streaming Anthropic and Bedrock); wires that carry a
  JSON object (Gemini, non-streaming Anthropic and Bedrock) raise :class:`WireEncodeError`.
* **stop reasons** become the provider's raw value: ``stop`` / ``length`` / ``toolUse`` →
  ``stop`` / ``length`` / ``tool_calls`` (Chat), ``completed`` / ``incomplete``
  (``max_output_tokens``) / ``completed`` (Responses), ``end_turn`` / ``max_tokens`` /
  ``tool_use`` (Anthropic, Bedrock), ``STOP`` / ``MAX_TOKENS`` / ``STOP`` (Gemini).
  Responses and Gemini have no tool-use value (the adapter infers it from the calls), so
  ``stop`` with tool calls, or ``toolUse`` without, cannot be encoded there.
* **usage** is written in each API's own fields so the adapter reads back the same
  :class:`~openprogram.types.Usage`, except counts the API has no field for: cache writes
  on OpenAI and Gemini, reasoning on Anthropic and Bedrock (see :func:`as_carried`).
* **error** stops are the provider's real failure: while streaming a turn that has
  content, an in-stream error after that content (Chat ``data: {"error": ...}``,
  Responses ``response.failed``, Anthropic ``event: error``, Gemini ``data: {"error":
  ...}``, Bedrock an exception frame); otherwise the HTTP error (``error_status``, default
  500; e.g. 429, 503, or 529 ``overloaded_error`` for Anthropic) with the provider's error
  body. ``error_mode`` picks one explicitly. The message is the turn's ``error`` text.
* **aborted** is not encodable: it is a state the *client* reaches by cancelling, and no
  response makes an adapter report it. :func:`encode` raises :class:`WireEncodeError`; to
  test cancellation, abort the run while the wire is serving.
* **fault** ``truncate`` ends the stream before its terminal event (a non-streamed body
  is cut in half); ``raise`` and ``hang`` are provider-side Python behaviours with no
  response to encode (:class:`WireEncodeError`). ``latency`` is ignored. (ScriptedWire and
  the server deliver all three over a connection: see above.)
"""

import typing as _typing

from openprogram_sim.errors import WireEncodeError
from openprogram_sim.models import WireFault
from openprogram_sim.wire._client_checks import CLIENT_CHECKS, ClientChecks
from openprogram_sim.wire._encode import APIS, as_carried, encode
from openprogram_sim.wire._errors import error_response
from openprogram_sim.wire._plan import WireResponse
from openprogram_sim.wire._requests import read_request
from openprogram_sim.wire._routing import route
from openprogram_sim.wire._scripted import (
    CREDENTIAL_HEADERS,
    ScriptedWire,
    WireRequest,
    mask_headers,
    mask_url,
    to_httpx,
)
from openprogram_sim.wire._session import RequestCheck, SessionCheck, SessionReport, TraceCheck
from openprogram_sim.wire._trace import SessionTrace

if _typing.TYPE_CHECKING:  # loaded on first use (see __getattr__)
    from openprogram_sim.wire._server import ServeReport, WireServer, serve

__all__ = [
    "APIS",
    "CLIENT_CHECKS",
    "CREDENTIAL_HEADERS",
    "ClientChecks",
    "RequestCheck",
    "ScriptedWire",
    "ServeReport",
    "SessionCheck",
    "SessionReport",
    "SessionTrace",
    "TraceCheck",
    "WireEncodeError",
    "WireFault",
    "WireRequest",
    "WireResponse",
    "WireServer",
    "as_carried",
    "encode",
    "error_response",
    "mask_headers",
    "mask_url",
    "read_request",
    "route",
    "serve",
    "to_httpx",
]

for _cls in (
    ClientChecks, ScriptedWire, SessionCheck, SessionReport, SessionTrace, WireRequest,
    WireResponse,
):  # fmt: skip
    _cls.__module__ = __name__
del _cls

_SERVER_NAMES = ("ServeReport", "WireServer", "serve")


def __getattr__(name: str) -> object:
    # The server (uvicorn, starlette) loads on first use, not with the encoders.
    if name in _SERVER_NAMES:
        from openprogram_sim.wire import _server

        value = getattr(_server, name)
        if isinstance(value, type):
            value.__module__ = __name__
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
