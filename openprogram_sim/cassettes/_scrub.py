"""Scrubbing a recorded response: its headers, and its body, decoded first when it came
compressed, then searched as the client reads it: a stream on its stitched, decoded text
(:mod:`._stitch`, so a key split across events or hidden by JSON escapes is seen whole),
then event by event (so a key split across two network chunks is still seen whole, and
the chunk boundaries move with the text around them)."""

from __future__ import annotations

import json
from typing import Any

from openprogram.providers.eventstream import EventStreamDecoder, EventStreamError, encode_message
from openprogram_sim.cassettes._codec import (
    DEFAULT_MAX_BODY,
    MAX_BODY_ENV,
    BodyTooLarge,
    NotEncoded,
    codings,
    inflate,
    without_encoding,
)
from openprogram_sim.cassettes._format import EXTRA, body_kind, split_events
from openprogram_sim.cassettes._secrets import Scrubber
from openprogram_sim.cassettes._stitch import stitched
from openprogram_sim.errors import CassetteError

__all__ = ["scrub_response", "streamed_secrets"]


def scrub_response(
    response: dict[str, Any], scrubber: Scrubber, *, max_body: int = DEFAULT_MAX_BODY
) -> dict[str, Any]:
    """vcrpy's response dict with its body decoded (see :func:`decoded`) and credentials
    and key shapes masked (a new dict)."""
    response = decoded(response, max_body)
    headers = scrubber.headers(response.get("headers") or {})
    body = dict(response.get("body") or {})
    raw = body.get("string")
    extra = dict(response.get(EXTRA) or {})
    if raw:
        data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
        kind = body_kind(headers)
        ends = split_events(kind, data) if kind in ("sse", "eventstream") else [len(data)]
        starts = [0, *ends[:-1]]
        old = [data[s:e] for s, e in zip(starts, ends, strict=True)]
        new = old
        if kind in ("sse", "eventstream"):
            new = stitched(kind, old, scrubber)  # the text the client reads, stitched
        new = [_scrub_piece(kind, part, scrubber) for part in new]
        if kind == "json":
            new = [_scrub_json(part, scrubber) for part in new]
        if new != old:
            body["string"] = b"".join(new)
            extra["chunks"] = _move(extra.get("chunks") or [[0, 0.0]], old, new)
    out = {**response, "headers": headers, "body": body}
    if extra:
        out[EXTRA] = extra
    return out


def decoded(response: dict[str, Any], max_body: int = DEFAULT_MAX_BODY) -> dict[str, Any]:
    """``response`` with a gzip or deflate body decoded, its ``content-encoding`` dropped
    and ``content-length`` set to the decoded size (as it is recorded); a body decoded
    already (vcrpy's ``requests`` stub keeps the header) only loses the header; a body in a
    coding that cannot be decoded here is left as it is. Raises
    :class:`~openprogram_sim.errors.CassetteError` when the body inflates past
    ``max_body`` bytes."""
    headers = response.get("headers") or {}
    applied = codings(headers)
    raw = (response.get("body") or {}).get("string")
    if not applied:
        return response
    data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw or b"")
    try:
        data = inflate(data, applied, max_body) if data else data
    except NotEncoded:
        pass
    except BodyTooLarge as exc:
        raise CassetteError(
            f"not recorded: a reply compressed with content-encoding {', '.join(applied)} and "
            f"{exc}, the limit on a recorded body; raise it ({MAX_BODY_ENV}=BYTES in the "
            "environment, Cassette(max_body=BYTES) in Python) if the reply is meant to be "
            "that large"
        ) from None
    except ValueError:
        return response  # kept as received; the replay refuses it with the reason
    extra = dict(response.get(EXTRA) or {})
    first = (extra.get("chunks") or [[0, 0.0]])[0]
    extra["chunks"] = [[0, float(first[1])]]  # offsets into the compressed bytes: gone
    listed = {k: v if isinstance(v, list) else [v] for k, v in headers.items()}
    return {
        **response,
        "headers": without_encoding(listed, len(data)),
        "body": {**(response.get("body") or {}), "string": data},
        EXTRA: extra,
    }


def _scrub_json(part: bytes, scrubber: Scrubber) -> bytes:
    """A JSON body with each decoded string scrubbed (a key written with JSON escapes,
    ``\\u0073k-...``, reads as a key only once parsed); the same bytes when none holds
    one."""
    try:
        parsed = json.loads(part)
    except (ValueError, RecursionError):
        return part
    clean = scrubber.value(parsed)
    if clean == parsed:
        return part
    return json.dumps(clean, ensure_ascii=False).encode("utf-8")


def _scrub_piece(kind: str, part: bytes, scrubber: Scrubber) -> bytes:
    if kind == "eventstream":
        frame = _scrub_frame(part, scrubber)
        if frame is not None:
            return frame
    text = part.decode("utf-8", "surrogateescape")
    return scrubber.text(text).encode("utf-8", "surrogateescape")


def _scrub_frame(part: bytes, scrubber: Scrubber) -> bytes | None:
    """A whole event-stream frame with its payload and string headers scrubbed (and its
    CRCs computed again); None when ``part`` is not one whole frame."""
    try:
        messages = EventStreamDecoder().feed(part)
    except EventStreamError:
        return None
    if len(messages) != 1:
        return None
    message = messages[0]
    payload = message.payload.decode("utf-8", "surrogateescape")
    clean = scrubber.text(payload)
    headers = {k: scrubber.text(v) if isinstance(v, str) else v for k, v in message.headers.items()}
    if clean == payload and headers == message.headers:
        return part
    return encode_message(headers, clean.encode("utf-8", "surrogateescape"))


def _move(chunks: list[list[float]], old: list[bytes], new: list[bytes]) -> list[list[float]]:
    """Chunk starts moved from the old pieces to the scrubbed ones (an offset inside a piece
    keeps its distance from the piece's start, clamped to the new length)."""
    moved: list[list[float]] = []
    old_start = new_start = 0
    bounds = []
    for o, n in zip(old, new, strict=True):
        bounds.append((old_start, old_start + len(o), new_start, len(n)))
        old_start += len(o)
        new_start += len(n)
    for offset, after in chunks:
        for o_start, o_end, n_start, n_len in bounds:
            if o_start <= offset < o_end or (offset == o_end == old_start):
                moved.append([n_start + min(int(offset) - o_start, n_len), after])
                break
        else:
            moved.append([new_start, after])
    out: list[list[float]] = []
    for chunk in moved:  # two starts clamped onto one offset are one chunk
        if not out or int(out[-1][0]) != int(chunk[0]):
            out.append(chunk)
    return out


def streamed_secrets(response: dict[str, Any], scrubber: Scrubber) -> bool:
    """Whether a streamed body still holds a secret in pieces across its events."""
    raw = (response.get("body") or {}).get("string")
    kind = body_kind(response.get("headers") or {})
    if not raw or kind not in ("sse", "eventstream"):
        return False
    data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
    ends = split_events(kind, data)
    events = [data[s:e] for s, e in zip([0, *ends[:-1]], ends, strict=True)]
    return stitched(kind, events, scrubber) != events
