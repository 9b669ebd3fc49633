"""The cassette file: a vcrpy cassette (``version: 1``, ``interactions`` of ``request`` and
``response``) whose bodies are written to be read and reviewed.

vcrpy keeps each body as one string; this serializer (registered with vcrpy like any other,
:data:`SERIALIZER`) writes it by what it is, and reads it back to exactly what vcrpy keeps
in memory:

* a JSON body is stored parsed, ``body: {json: {...}}`` (keys in their order), and replayed
  as that JSON (equal as JSON; whitespace is not kept);
* a streamed body (``text/event-stream``, AWS ``vnd.amazon.eventstream``) is stored as the
  list of its pieces, ``body: {stream: [...]}``: one piece per SSE event (``text:``) or
  event-stream frame (``frame: {headers, payload}``), cut again wherever a network chunk
  began inside one. A piece that starts a chunk says ``after:``, the seconds since the
  chunk before it arrived (the first: since the headers), so a replay can keep the
  chunk boundaries, and the timing when asked. SSE with CRLF line ends is stored with LF
  and ``line_ends: crlf``. Pieces concatenate to the exact bytes received;
* anything else is ``body: {string: ...}``: text, or bytes (YAML ``!!binary``).

``response.latency`` is the seconds until the headers arrived. In memory these extras
ride on the response dict under ``"openprogram"`` (``chunks``: ``[offset, after]`` pairs,
``latency``), which vcrpy carries without reading.
"""

from __future__ import annotations

import json
import re
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import yaml

from openprogram.providers.eventstream import (
    EventStreamDecoder,
    EventStreamError,
    encode_message,
)
from openprogram_sim.errors import CassetteFormatError

__all__ = [
    "EVENT_STREAM",
    "EXTRA",
    "SERIALIZER",
    "Serializer",
    "body_kind",
    "dump_yaml",
    "split_events",
]

EXTRA = "openprogram"
"""The key our extras (chunk boundaries, timing) travel under in vcrpy's response dict."""
EVENT_STREAM = "application/vnd.amazon.eventstream"
_ANCHOR = re.compile(r"(?:^|[\s\[{,:-])&[^\s]", re.MULTILINE)
_SSE_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_TIME_DIGITS = 4


# --------------------------------------------------------------------------- YAML


class _Dumper(yaml.CSafeDumper if hasattr(yaml, "CSafeDumper") else yaml.SafeDumper):  # type: ignore[misc]
    """Multi-line text as literal blocks; no anchors (a cassette never shares a node)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


class _Flow(dict):  # type: ignore[type-arg]
    """A mapping written on one line (an event-stream frame's headers)."""


def _flow(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.MappingNode:
    return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(_Flow, _flow)
_Loader = yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=10**9)


_LOADED: OrderedDict[str, dict[str, Any]] = OrderedDict()
_CACHED_FILES = 8
_LOCK = threading.Lock()


def _load(text: str) -> dict[str, Any]:
    """vcrpy's cassette dict for a file's text. The last few texts read are kept, so a
    cassette replayed again in the same process (parametrized tests, a benchmark) is not
    parsed again; each caller gets its own copy (:func:`_fresh`)."""
    with _LOCK:
        data = _LOADED.get(text)
        if data is not None:
            _LOADED.move_to_end(text)
    if data is None:
        data = from_readable(_parse_yaml(text))
        with _LOCK:
            _LOADED[text] = data
            while len(_LOADED) > _CACHED_FILES:
                _LOADED.popitem(last=False)
    return _fresh(data)


def _fresh(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of vcrpy's cassette dict sharing only immutable parts (bodies are bytes)."""
    out: dict[str, Any] = {"version": data["version"], "interactions": []}
    for interaction in data["interactions"]:
        request, response = interaction["request"], interaction["response"]
        extra = response[EXTRA]
        out["interactions"].append(
            {
                "request": {
                    **request,
                    "headers": {k: list(v) for k, v in request["headers"].items()},
                },
                "response": {
                    "status": dict(response["status"]),
                    "headers": {k: list(v) for k, v in response["headers"].items()},
                    "body": {"string": response["body"]["string"]},
                    EXTRA: {**extra, "chunks": [list(c) for c in extra["chunks"]]},
                },
            }
        )
    if "metadata" in data:
        out["metadata"] = json.loads(json.dumps(data["metadata"]))
    return out


def _parse_yaml(text: str) -> Any:
    if _ANCHOR.search(text) and any(
        isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=_Loader)
    ):
        raise CassetteFormatError("YAML aliases (*name) are not allowed in a cassette")
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise CassetteFormatError(f"not valid YAML: {exc}") from None


# --------------------------------------------------------------------------- bodies


def body_kind(headers: dict[str, Any]) -> str:
    """``sse``, ``eventstream``, ``json`` or ``other`` from the content type."""
    ctype = ""
    for name, value in headers.items():
        if name.lower() == "content-type":
            ctype = str(value[0] if isinstance(value, list) else value).lower()
    if "text/event-stream" in ctype:
        return "sse"
    if EVENT_STREAM in ctype:
        return "eventstream"
    if "json" in ctype:
        return "json"
    return "other"


def _as_bytes(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    return bytes(body)


def _json_form(raw: bytes) -> Any:
    """``{"json": parsed}``, or None when ``raw`` is not JSON text."""
    try:
        return {"json": json.loads(raw.decode("utf-8"))}
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def _plain_form(raw: bytes) -> dict[str, Any]:
    try:
        return {"string": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"string": raw}


def _json_bytes(value: Any, *, ascii_only: bool = False) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")


def split_events(kind: str, body: bytes) -> list[int]:
    """Where each SSE event or event-stream frame of ``body`` ends (byte offsets; the last
    is ``len(body)`` even when the body ends inside one)."""
    ends: list[int] = []
    if kind == "sse":
        ends = [m.end() for m in _SSE_END.finditer(body)]
    elif kind == "eventstream":
        pos = 0
        while pos + 12 <= len(body):
            (total,) = struct.unpack_from(">I", body, pos)
            if total < 16 or pos + total > len(body):
                break
            pos += total
            ends.append(pos)
    if not ends or ends[-1] != len(body):
        ends.append(len(body))
    return ends


def _cuts(body: bytes, kind: str, chunks: list[list[float]]) -> list[tuple[int, int, float | None]]:
    """The body's pieces, ``(start, end, after)``: cut at every event end and chunk start;
    ``after`` is set where a chunk starts."""
    starts = {int(offset): float(after) for offset, after in chunks}
    points = sorted({0, *split_events(kind, body), *starts} - {len(body)})
    points = [p for p in points if 0 <= p < len(body)]
    return [
        (start, end, starts.get(start))
        for start, end in zip(points, [*points[1:], len(body)], strict=True)
    ]


def _frame_form(raw: bytes) -> dict[str, Any] | None:
    """A whole event-stream frame as ``{headers, payload}``, when it encodes back to the
    same bytes."""
    try:
        messages = EventStreamDecoder().feed(raw)
    except EventStreamError:
        return None
    if len(messages) != 1:
        return None
    message = messages[0]
    try:
        payload = message.payload.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if encode_message(message.headers, message.payload) != raw:
        return None  # header types our encoder does not write back the same
    return {"frame": {"headers": _Flow(message.headers), "payload": payload}}


def _stream_form(raw: bytes, kind: str, extra: dict[str, Any]) -> dict[str, Any]:
    chunks = extra.get("chunks") or [[0, 0.0]]
    pieces: list[dict[str, Any]] = []
    crlf = kind == "sse" and _crlf_only(raw, chunks)
    for start, end, after in _cuts(raw, kind, chunks):
        piece: dict[str, Any] = {} if after is None else {"after": round(after, _TIME_DIGITS)}
        part = raw[start:end]
        form = _frame_form(part) if kind == "eventstream" else None
        if form is None and kind == "eventstream":
            form = {"bytes": part}  # part of a frame: its bytes
        elif form is None:
            try:
                text = part.decode("utf-8")
            except UnicodeDecodeError:
                form = {"bytes": part}
            else:
                form = {"text": text.replace("\r\n", "\n") if crlf else text}
        piece.update(form)
        pieces.append(piece)
    out: dict[str, Any] = {"stream": pieces}
    if crlf:
        out["line_ends"] = "crlf"
    return out


def _crlf_only(raw: bytes, chunks: list[list[float]]) -> bool:
    """Every line end of ``raw`` is CRLF and no chunk starts between a CR and its LF."""
    if (
        b"\r\n" not in raw
        or raw.replace(b"\r\n", b"").count(b"\n")
        or raw.count(b"\r") != raw.count(b"\r\n")
    ):
        return False
    return all(
        not (0 < int(o) < len(raw) and raw[int(o) - 1 : int(o) + 1] == b"\r\n") for o, _ in chunks
    )


def _piece_bytes(piece: dict[str, Any], crlf: bool, where: str) -> bytes:
    if "text" in piece:
        text = str(piece["text"])
        return (text.replace("\n", "\r\n") if crlf else text).encode("utf-8")
    if "frame" in piece:
        frame = piece["frame"]
        if not isinstance(frame, dict) or not isinstance(frame.get("headers"), dict):
            raise CassetteFormatError(f"{where}.frame: give headers: {{...}} and payload: ...")
        return encode_message(frame["headers"], str(frame.get("payload", "")).encode("utf-8"))
    if "bytes" in piece:
        return _as_bytes(piece["bytes"])
    raise CassetteFormatError(f"{where}: a stream piece is text:, frame: or bytes:")


def encode_body(raw: Any, headers: dict[str, Any], extra: dict[str, Any] | None) -> Any:
    """A body as stored (``None`` for no body)."""
    data = _as_bytes(raw)
    if raw is None or (not data and not extra):
        return None
    kind = body_kind(headers)
    if kind in ("sse", "eventstream"):
        return _stream_form(data, kind, extra or {})
    form = _json_form(data) if kind == "json" or data[:1] in (b"{", b"[") else None
    return form if form is not None else _plain_form(data)


def decode_body(
    stored: Any, where: str, *, ascii_only: bool = False
) -> tuple[bytes | None, list[list[float]] | None]:
    """A stored body back to bytes, with its chunk boundaries when it was streamed. A JSON
    request body comes back as Python's ``json.dumps`` writes it (``ascii_only``), the
    bytes a Python client sends, so most replayed requests match byte for byte."""
    if stored is None:
        return None, None
    if isinstance(stored, (str, bytes)):  # a plain vcrpy cassette's request body
        return _as_bytes(stored), None
    if not isinstance(stored, dict):
        raise CassetteFormatError(f"{where}: a body is json:, stream: or string:")
    if "json" in stored:
        return _json_bytes(stored["json"], ascii_only=ascii_only), None
    if "string" in stored:
        return _as_bytes(stored["string"]), None
    if "stream" in stored and isinstance(stored["stream"], list):
        crlf = stored.get("line_ends") == "crlf"
        parts: list[bytes] = []
        chunks: list[list[float]] = []
        offset = 0
        for i, piece in enumerate(stored["stream"]):
            if not isinstance(piece, dict):
                raise CassetteFormatError(f"{where}.stream[{i}]: a piece is a mapping")
            if "after" in piece or i == 0:
                chunks.append([offset, float(piece.get("after") or 0.0)])
            part = _piece_bytes(piece, crlf, f"{where}.stream[{i}]")
            parts.append(part)
            offset += len(part)
        return b"".join(parts), chunks
    raise CassetteFormatError(f"{where}: a body is json:, stream: or string:")


# --------------------------------------------------------------------------- interactions


def _headers_out(headers: Any) -> dict[str, list[str]]:
    """Headers as vcrpy keeps them: each name with the list of its values."""
    out: dict[str, list[str]] = {}
    for name, value in (headers or {}).items():
        out[str(name)] = [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return out


def _headers_written(headers: dict[str, list[str]]) -> dict[str, Any]:
    """Headers as written: a header sent once is its value, one sent twice the list."""
    return {k: v[0] if len(v) == 1 else v for k, v in headers.items()}


def _request_out(request: dict[str, Any]) -> dict[str, Any]:
    headers = _headers_out(request.get("headers"))
    return {
        "method": request["method"],
        "uri": request["uri"],
        "headers": _headers_written(headers),
        "body": encode_body(request.get("body"), headers, None),
    }


def _response_out(response: dict[str, Any]) -> dict[str, Any]:
    headers = _headers_out(response.get("headers"))
    extra = dict(response.get(EXTRA) or {})
    raw = (response.get("body") or {}).get("string")
    out: dict[str, Any] = {"status": response["status"], "headers": _headers_written(headers)}
    if extra.get("latency") is not None:
        out["latency"] = round(float(extra["latency"]), _TIME_DIGITS)
    if extra.get("truncated"):
        out["truncated"] = True
    out["body"] = encode_body(raw, headers, extra)
    return out


def _request_in(stored: Any, where: str) -> dict[str, Any]:
    if not isinstance(stored, dict) or "method" not in stored or "uri" not in stored:
        raise CassetteFormatError(f"{where}: a request has method:, uri:, headers: and body:")
    body, _ = decode_body(stored.get("body"), f"{where}.body", ascii_only=True)
    return {
        "method": stored["method"],
        "uri": stored["uri"],
        "body": body,
        "headers": _headers_out(stored.get("headers")),
    }


def _response_in(stored: Any, where: str) -> dict[str, Any]:
    if not isinstance(stored, dict) or not isinstance(stored.get("status"), dict):
        raise CassetteFormatError(f"{where}: a response has status: {{code, message}}")
    headers = _headers_out(stored.get("headers"))
    body, chunks = decode_body(stored.get("body"), f"{where}.body")
    body = body or b""
    for name in headers:
        if name.lower() == "content-length":
            headers[name] = [str(len(body))]  # a JSON body is written back compact
    extra: dict[str, Any] = {"chunks": chunks or [[0, 0.0]]}
    if stored.get("latency") is not None:
        extra["latency"] = float(stored["latency"])
    if stored.get("truncated"):
        extra["truncated"] = True
    status = dict(stored["status"])
    return {"status": status, "headers": headers, "body": {"string": body}, EXTRA: extra}


class Serializer:
    """The vcrpy serializer of the readable form (see the module docstring)::

    my_vcr = vcr.VCR()
    my_vcr.register_serializer("openprogram", openprogram_sim.cassettes.SERIALIZER)
    with my_vcr.use_cassette("session.yaml", serializer="openprogram"): ...
    """

    @staticmethod
    def serialize(cassette_dict: dict[str, Any]) -> str:
        return dump_yaml(to_readable(cassette_dict))

    @staticmethod
    def deserialize(cassette_string: str) -> dict[str, Any]:
        return _load(cassette_string)


SERIALIZER = Serializer()


def to_readable(data: dict[str, Any]) -> dict[str, Any]:
    """vcrpy's cassette dict (``version``, ``interactions``, ``metadata``) as written."""
    out: dict[str, Any] = {"version": data.get("version", 1)}
    if data.get("metadata"):
        out["metadata"] = data["metadata"]
    out["interactions"] = [
        {"request": _request_out(i["request"]), "response": _response_out(i["response"])}
        for i in data.get("interactions", [])
    ]
    return out


def from_readable(data: Any) -> dict[str, Any]:
    """A loaded cassette file back to vcrpy's cassette dict."""
    if not isinstance(data, dict) or not isinstance(data.get("interactions"), list):
        raise CassetteFormatError("a cassette is a mapping with version: 1 and interactions: [...]")
    out: dict[str, Any] = {"version": data.get("version", 1), "interactions": []}
    for i, interaction in enumerate(data["interactions"]):
        where = f"interactions[{i}]"
        if not isinstance(interaction, dict):
            raise CassetteFormatError(f"{where}: an interaction has request: and response:")
        out["interactions"].append(
            {
                "request": _request_in(interaction.get("request"), f"{where}.request"),
                "response": _response_in(interaction.get("response"), f"{where}.response"),
            }
        )
    if isinstance(data.get("metadata"), dict):
        out["metadata"] = data["metadata"]
    return out


def iter_bodies(data: dict[str, Any]) -> Iterator[tuple[str, bytes]]:
    """``(place, raw bytes)`` of every body in vcrpy's cassette dict (for the final scan)."""
    for i, interaction in enumerate(data.get("interactions", [])):
        yield f"interactions[{i}].request.body", _as_bytes(interaction["request"].get("body"))
        raw = (interaction["response"].get("body") or {}).get("string")
        yield f"interactions[{i}].response.body", _as_bytes(raw)
