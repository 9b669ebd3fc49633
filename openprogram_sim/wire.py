"""Scripted turns as the exact HTTP responses each real provider API would send.

The wire simulator's core: :func:`encode` turns one scripted
:class:`~openprogram_sim.scripted.Turn` into the response that OpenAI Chat Completions,
OpenAI Responses, Anthropic Messages, Gemini ``generateContent`` or Bedrock Converse would
answer with, streaming (SSE, or AWS event-stream frames for Bedrock) or as one JSON body.
The real adapters then parse it exactly as they parse the real service, so a loop run
through an adapter can be compared with the same run through the scripted model.

:class:`ScriptedWire` serves a list of turns, in call order, to whichever adapter calls
it, as an ``httpx.MockTransport`` handler::

    wire = ScriptedWire([
        {"tool_calls": [{"search": {"q": "tides"}}]},
        {"text": "Tides follow the moon."},
    ])
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="test", client=wire.client())
    Runtime(provider=provider).exec("Research tides.", tools=[search])
    wire.requests[1].body["messages"]  # what the adapter sent on the second call
    wire.assert_consumed()

Everything here is a pure function of its inputs (``turn -> WireResponse`` with status,
headers and body chunks), so a loopback HTTP server can serve the same bytes.

What each scripted turn becomes:

* **text / thinking** stream in ``chunk_size`` pieces (24 characters, as
  :class:`~openprogram_sim.scripted.ScriptedModel` does). Thinking is ``reasoning_content``
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
  response to encode (:class:`WireEncodeError`). ``latency`` is ignored.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

import httpx

from openprogram.types import Usage
from openprogram_sim._wire_encoders import (
    ENCODERS,
    ERROR_CATALOG,
    Plan,
    PlannedCall,
    WireEncodeError,
    WireResponse,
    error_response,
    pieces,
)
from openprogram_sim.scripted import Turn, TurnToolCall

__all__ = [
    "APIS",
    "ERROR_CATALOG",
    "ScriptedWire",
    "WireEncodeError",
    "WireRequest",
    "WireResponse",
    "as_carried",
    "encode",
    "error_response",
    "route",
    "to_httpx",
]

APIS: tuple[str, ...] = tuple(ENCODERS)
"""``openai-chat``, ``openai-responses``, ``anthropic``, ``gemini``, ``bedrock``."""

ErrorMode = Literal["auto", "http", "stream"]
TurnLike = Turn | Mapping[str, Any] | str

_ID_STYLE = {
    "openai-chat": "call_wire{seq}_{i}",
    "openai-responses": "call_wire{seq}_{i}",
    "anthropic": "toolu_wire{seq}_{i}",
    "bedrock": "tooluse_wire{seq}_{i}",
}


def _check_api(api: str) -> None:
    if api not in ENCODERS:
        raise ValueError(f"unknown api {api!r}; use one of: {', '.join(APIS)}")


def _object_or_none(call: TurnToolCall) -> Any:
    if isinstance(call.arguments, Mapping):
        return dict(call.arguments)
    if not call.json_text.strip():
        return {}  # every parser reads empty arguments text as {}
    try:
        value = json.loads(call.json_text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _plan(
    api: str,
    turn: Turn,
    *,
    stream: bool,
    model: str,
    seq: int,
    chunk_size: int,
    error_status: int,
    error_mode: ErrorMode,
) -> Plan:
    if turn.stop_reason == "aborted":
        raise WireEncodeError(
            "stop_reason 'aborted' cannot be encoded as a response: it is what the client "
            "reports when it cancels the call, and no server response produces it. To test "
            "cancellation, abort the run (Runtime.abort) while the wire is serving."
        )
    if turn.fault in ("raise", "hang"):
        raise WireEncodeError(
            f"fault {turn.fault!r} is a scripted-provider behaviour with no HTTP response to "
            "encode; use fault 'truncate' (a stream that ends early) or an error stop"
        )
    if error_mode == "stream" and not stream:
        raise ValueError("error_mode='stream' needs stream=True (a JSON body has no stream)")
    style = _ID_STYLE.get(api)
    calls = [
        PlannedCall(
            id=c.id if c.id is not None or style is None else style.format(seq=seq, i=i),
            name=c.name,
            text=c.json_text,
            value=_object_or_none(c),
            pieces=list(pieces(c.json_text, chunk_size)),
        )
        for i, c in enumerate(turn.tool_calls)
    ]
    stop = turn.stop_reason
    if stop not in ("stop", "length", "toolUse"):
        stop = "toolUse" if calls else "stop"
    inferred = api in ("openai-responses", "gemini") and turn.stop_reason in ("stop", "toolUse")
    if inferred and (stop == "toolUse") != bool(calls):
        raise WireEncodeError(
            f"{api} has no tool-use stop value (the adapter infers toolUse from the "
            f"calls), so stop_reason {stop!r} "
            f"{'without' if stop == 'toolUse' else 'with'} tool calls cannot be encoded"
        )
    error = None
    in_stream = False
    if turn.stop_reason == "error":
        error = turn.error or "scripted error"
        has_content = bool(turn.text or turn.thinking or turn.tool_calls)
        in_stream = error_mode == "stream" or (error_mode == "auto" and stream and has_content)
    return Plan(
        seq=seq,
        model=model,
        thinking=list(pieces(turn.thinking or "", chunk_size)),
        text=list(pieces(turn.text or "", chunk_size)),
        calls=calls,
        stop=stop,
        usage=turn.usage or Usage(),
        error=error,
        error_status=error_status,
        in_stream_error=in_stream,
        truncate=turn.fault == "truncate",
    )


def encode(
    api: str,
    turn: TurnLike,
    *,
    stream: bool = True,
    model: str = "scripted",
    seq: int = 1,
    chunk_size: int = 24,
    error_status: int = 500,
    error_mode: ErrorMode = "auto",
) -> WireResponse:
    """The response ``api`` sends for ``turn`` (a :class:`Turn`, a dict or a string).

    Args:
        api: one of :data:`APIS`.
        stream: the streaming endpoint's answer (SSE / event stream), else one JSON body.
        model: the model name written into the response.
        seq: the response's number (from 1); makes ids like ``msg_wire3`` unique per call.
        chunk_size: characters per streamed text / thinking / arguments piece.
        error_status: the HTTP status (and so the error type) of an ``error`` stop.
        error_mode: ``auto`` (in-stream after the content when streaming a turn that has
            content, else HTTP), ``http`` or ``stream``.

    Raises:
        WireEncodeError: the turn cannot be expressed on this wire (see the module doc).
    """
    _check_api(api)
    turn = Turn.coerce(turn)
    plan = _plan(
        api,
        turn,
        stream=stream,
        model=model,
        seq=seq,
        chunk_size=chunk_size,
        error_status=error_status,
        error_mode=error_mode,
    )
    if plan.error is not None and not plan.in_stream_error:
        return error_response(api, error_status, plan.error)
    return ENCODERS[api](plan, stream=stream)


def as_carried(
    api: str, turn: TurnLike, *, stream: bool = True, error_mode: ErrorMode = "auto"
) -> Turn:
    """``turn`` as an adapter reads it back from :func:`encode` with the same arguments.

    Usage counts the API has no field for are 0 (``cache_write`` on OpenAI and Gemini,
    ``reasoning`` on Anthropic and Bedrock), an error stop has zero usage, and an error sent
    as an HTTP status carries no content. Ids and error texts are not adjusted (an adapter
    prefixes its own label and the status to the provider's message).
    """
    _check_api(api)
    turn = Turn.coerce(turn)
    usage = turn.usage or Usage()
    if api.startswith("openai") or api == "gemini":
        usage = replace(usage, cache_write=0)
    if api in ("anthropic", "bedrock"):
        usage = replace(usage, reasoning=0)
    if turn.stop_reason != "error":
        return replace(turn, usage=usage)
    has_content = bool(turn.text or turn.thinking or turn.tool_calls)
    in_stream = error_mode == "stream" or (error_mode == "auto" and stream and has_content)
    if in_stream:
        return replace(turn, usage=Usage())
    return Turn(stop_reason="error", error=turn.error, usage=Usage())


# --------------------------------------------------------------------------- routing


def route(path: str, body: Any) -> tuple[str, bool] | None:
    """Which API (and whether streaming) a request is for, from its path and JSON body:
    ``/chat/completions``, ``/responses``, ``/messages`` (``"stream": true`` in the body),
    ``/models/{m}:generateContent`` / ``:streamGenerateContent``,
    ``/model/{id}/converse`` / ``/converse-stream``. ``None`` for anything else."""
    path = unquote(urlsplit(path).path).rstrip("/")
    wants_stream = isinstance(body, dict) and body.get("stream") is True
    if path.endswith("/chat/completions"):
        return "openai-chat", wants_stream
    if path.endswith("/responses"):
        return "openai-responses", wants_stream
    if path.endswith("/messages"):
        return "anthropic", wants_stream
    if path.endswith(":streamGenerateContent"):
        return "gemini", True
    if path.endswith(":generateContent"):
        return "gemini", False
    if path.endswith("/converse-stream"):
        return "bedrock", True
    if path.endswith("/converse"):
        return "bedrock", False
    return None


def _model_of(api: str, path: str, body: Any) -> str:
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return str(body["model"])
    path = unquote(urlsplit(path).path)
    if api == "gemini":
        return path.rpartition("/models/")[2].partition(":")[0] or "scripted"
    if api == "bedrock":
        return path.rpartition("/model/")[2].rpartition("/")[0] or "scripted"
    return "scripted"


# --------------------------------------------------------------------------- serving


@dataclass(slots=True)
class WireRequest:
    """One request the wire received."""

    index: int
    """Call number, from 1."""
    api: str | None
    """The API the path names (``None``: no API matched)."""
    stream: bool
    method: str
    url: str
    headers: dict[str, str]
    body: Any
    """The parsed JSON body (``None`` when it was not JSON)."""
    raw: bytes = field(repr=False, default=b"")


class _Chunks(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body delivered chunk by chunk, to sync and async clients alike."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


def to_httpx(response: WireResponse, request: httpx.Request | None = None) -> httpx.Response:
    """``response`` as an ``httpx.Response`` whose body arrives in its chunks."""
    return httpx.Response(
        response.status,
        headers=response.headers,
        stream=_Chunks(list(response.chunks)),
        request=request,
    )


class ScriptedWire:
    """Serves ``turns`` in call order to whichever adapter calls, in its own wire format.

    Use :meth:`handler` (or the object itself) as an ``httpx.MockTransport`` handler, or
    :meth:`client` for a ready ``httpx.AsyncClient``. The API and streaming mode come from
    each request (:func:`route`), so one script can serve any adapter. A list item may be
    a ready :class:`WireResponse`, served as is (for hand-made faults).

    Every request is recorded in :attr:`requests` (with its parsed body). A request beyond
    the script, to an unknown path, or for a turn that cannot be encoded is answered with
    HTTP 500 (404 for an unknown path) in the API's error shape, saying what happened, and
    recorded in :attr:`errors`; :meth:`assert_consumed` raises on any of them and on turns
    never requested.
    """

    def __init__(
        self,
        turns: Iterable[TurnLike | WireResponse] = (),
        *,
        chunk_size: int = 24,
        error_status: int = 500,
        error_mode: ErrorMode = "auto",
    ) -> None:
        self.turns: list[Turn | WireResponse] = [
            t if isinstance(t, WireResponse) else Turn.coerce(t) for t in turns
        ]
        self.chunk_size = chunk_size
        self.error_status = error_status
        self.error_mode: ErrorMode = error_mode
        self.requests: list[WireRequest] = []
        self.errors: list[str] = []
        self._served = 0
        self._lock = threading.Lock()

    # -- transport glue ------------------------------------------------------------------

    def handler(self, request: httpx.Request) -> httpx.Response:
        """The ``httpx.MockTransport`` handler."""
        response = self.respond(
            request.method, str(request.url), request.content, dict(request.headers)
        )
        return to_httpx(response, request)

    __call__ = handler

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` whose every request this wire answers."""
        return httpx.AsyncClient(transport=self.transport, **kwargs)

    # -- the core (transport-independent) ------------------------------------------------

    def respond(
        self, method: str, url: str, content: bytes, headers: Mapping[str, str] | None = None
    ) -> WireResponse:
        """Record one request and return the response for it."""
        try:
            body: Any = json.loads(content) if content else None
        except ValueError:
            body = None
        path = urlsplit(url).path
        target = route(url, body)
        api, stream = target if target is not None else (None, False)
        with self._lock:
            index = len(self.requests) + 1
            self.requests.append(
                WireRequest(index, api, stream, method, url, dict(headers or {}), body, content)
            )
            if api is None:
                return self._fail(
                    None,
                    404,
                    f"ScriptedWire: request #{index} ({method} {path}) matches no provider API "
                    "path (/chat/completions, /responses, /messages, :generateContent, "
                    ":streamGenerateContent, /converse, /converse-stream)",
                )
            if self._served >= len(self.turns):
                return self._fail(
                    api,
                    500,
                    f"ScriptedWire: request #{index} ({api}, {method} {path}) has no scripted "
                    f"turn; the script has {len(self.turns)}. Add a turn, or lower "
                    "max_iterations.",
                )
            self._served += 1
            item = self.turns[self._served - 1]
        if isinstance(item, WireResponse):
            return item
        try:
            return encode(
                api,
                item,
                stream=stream,
                model=_model_of(api, url, body),
                seq=index,
                chunk_size=self.chunk_size,
                error_status=self.error_status,
                error_mode=self.error_mode,
            )
        except WireEncodeError as exc:
            with self._lock:
                return self._fail(
                    api, 500, f"ScriptedWire: turn #{self._served} cannot be encoded: {exc}"
                )

    def _fail(self, api: str | None, status: int, message: str) -> WireResponse:
        self.errors.append(message)
        if api is None:
            body = json.dumps({"error": {"message": message, "type": "scripted_wire"}})
            return WireResponse(status, {"content-type": "application/json"}, [body.encode()])
        return error_response(api, status, message)

    # -- checks --------------------------------------------------------------------------

    @property
    def calls(self) -> int:
        return len(self.requests)

    @property
    def unconsumed(self) -> list[Turn | WireResponse]:
        """Turns never served."""
        return self.turns[self._served :]

    def assert_consumed(self) -> None:
        """Raise ``AssertionError`` if a request failed here or a turn was never served."""
        problems = list(self.errors)
        if self.unconsumed:
            problems.append(
                f"{len(self.unconsumed)} of {len(self.turns)} scripted turns were never "
                f"requested (the wire was called {self.calls} times)"
            )
        if problems:
            raise AssertionError("ScriptedWire: " + "; ".join(problems))
