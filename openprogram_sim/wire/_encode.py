"""Encoding one scripted turn as one API's response: resolving it to a :class:`Plan`
(ids, raw stop reason, chunked pieces) and handing it to that API's encoder."""

from __future__ import annotations

import copy
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from openprogram.types import Usage
from openprogram_sim.errors import WireEncodeError
from openprogram_sim.models import ErrorMode, Turn, TurnLike, TurnToolCall
from openprogram_sim.wire._anthropic import encode_anthropic
from openprogram_sim.wire._bedrock import encode_bedrock
from openprogram_sim.wire._errors import error_response
from openprogram_sim.wire._gemini import encode_gemini
from openprogram_sim.wire._openai_chat import encode_openai_chat
from openprogram_sim.wire._openai_responses import encode_openai_responses
from openprogram_sim.wire._plan import Plan, PlannedCall, WireResponse, pieces

__all__ = ["APIS", "ENCODERS", "ErrorMode", "TurnLike", "as_carried", "encode", "served_call_ids"]

ENCODERS: dict[str, Callable[..., WireResponse]] = {
    "openai-chat": encode_openai_chat,
    "openai-responses": encode_openai_responses,
    "anthropic": encode_anthropic,
    "gemini": encode_gemini,
    "bedrock": encode_bedrock,
}
"""Each API's encoder: ``encode_<api>(plan, stream=...) -> WireResponse`` (pure: the same
plan always gives the same bytes)."""

APIS: tuple[str, ...] = tuple(ENCODERS)
"""``openai-chat``, ``openai-responses``, ``anthropic``, ``gemini``, ``bedrock``."""


_ID_STYLE = {
    "openai-chat": "call_wire{seq}_{i}",
    "openai-responses": "call_wire{seq}_{i}",
    "anthropic": "toolu_wire{seq}_{i}",
    "bedrock": "tooluse_wire{seq}_{i}",
}


def served_call_ids(api: str, turn: Turn, seq: int) -> list[str | None]:
    """The ids ``turn``'s tool calls are served with as response ``seq`` on ``api``: the
    turn's own, else the API's style (``None`` on Gemini, which sends none)."""
    style = _ID_STYLE.get(api)
    return [
        c.id if c.id is not None or style is None else style.format(seq=seq, i=i)
        for i, c in enumerate(turn.tool_calls)
    ]


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
    key = (api, id(turn), stream, model, chunk_size, error_status, error_mode)
    with _LOCK:  # servers in several threads share the templates
        kept = _TEMPLATES.get(key)
        if kept is not None:
            _TEMPLATES.move_to_end(key)
    if kept is not None and kept[0] is turn and kept[1] == turn:
        template = kept[2]
        if template is not None:
            return _stamped(template, seq)
    options = dict(
        stream=stream, model=model, chunk_size=chunk_size,
        error_status=error_status, error_mode=error_mode,
    )  # fmt: skip
    response = _encode(api, turn, seq=seq, **options)
    if kept is None or kept[0] is not turn or kept[1] != turn:
        entry = (turn, copy.deepcopy(turn), _template(api, turn, options))
        with _LOCK:
            _TEMPLATES[key] = entry
            if len(_TEMPLATES) > _KEPT_TEMPLATES:
                _TEMPLATES.popitem(last=False)
    return response


def _encode(api: str, turn: Turn, *, seq: int, **options: Any) -> WireResponse:
    plan = _plan(api, turn, seq=seq, **options)
    if plan.error is not None and not plan.in_stream_error:
        return error_response(api, options["error_status"], plan.error)
    return ENCODERS[api](plan, stream=options["stream"])


# A turn is encoded once per (API, options) as a template: the response with a marker
# where the request's number goes (ids like ``chatcmpl-wire7``), stamped with each
# request's number (a bytes replace per chunk). A template is kept only when stamping it
# gives exactly what encoding does (checked once, against a number of another length):
# never for Bedrock's binary frames, whose lengths and checksums depend on the number, nor
# for a turn whose text holds the marker. The turn is kept with a copy of it, so a turn
# changed in place is encoded again.
_MARK = 9_081_726_354
_CHECK = 37
_KEPT_TEMPLATES = 512
"""Templates kept (least recently used dropped first): per turn of a script, API and
model its clients name."""
_TEMPLATES: OrderedDict[tuple[Any, ...], tuple[Turn, Turn, _Template | None]] = OrderedDict()
_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class _Template:
    """A response with each chunk split where the request's number goes."""

    status: int
    headers: dict[str, str]
    parts: list[list[bytes]]


def _template(api: str, turn: Turn, options: dict[str, Any]) -> _Template | None:
    """``turn``'s response split at :data:`_MARK` (where the request's number goes), or
    ``None`` when stamping it would not give what encoding gives."""
    marked = _encode(api, turn, seq=_MARK, **options)
    mark = str(_MARK).encode()
    template = _Template(
        marked.status, marked.headers, [chunk.split(mark) for chunk in marked.chunks]
    )
    if _stamped(template, _CHECK) != _encode(api, turn, seq=_CHECK, **options):
        return None
    return template


def _stamped(template: _Template, seq: int) -> WireResponse:
    number = str(seq).encode()
    return WireResponse(
        template.status,
        dict(template.headers),
        [parts[0] if len(parts) == 1 else number.join(parts) for parts in template.parts],
    )


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
