"""Compressed bodies: a reply stored with ``content-encoding: gzip`` (or ``deflate``) is
decoded once, with a bound on what it inflates to, and kept without the header.

The recorder stores every body decoded (the header dropped, ``content-length`` set to the
decoded size), so a cassette it wrote holds no compressed body. One written by hand, by
plain vcrpy or by an older version may: the replay decodes it when the file is loaded,
never past :func:`max_body` bytes (a 1.5 MB gzip body can inflate to 1 GB), and refuses a
coding it cannot bound (``br``, ``zstd``). A streamed body is also refused at load when one
of its SSE lines is longer than the adapters read (:data:`MAX_SSE_LINE`).
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Mapping
from typing import Any

from openprogram_sim.errors import CassetteError

__all__ = [
    "DEFAULT_MAX_BODY",
    "MAX_BODY_ENV",
    "MAX_SSE_LINE",
    "BodyTooLarge",
    "NotEncoded",
    "codings",
    "inflate",
    "longest_line",
    "max_body",
    "without_encoding",
]

DEFAULT_MAX_BODY = 64 * 1024 * 1024
"""What a compressed body may inflate to, by default (the cassette file's own cap)."""
MAX_BODY_ENV = "OPENPROGRAM_SIM_CASSETTE_MAX_BODY"
"""The environment variable that sets :func:`max_body` (bytes)."""
MAX_SSE_LINE = 16 * 1024 * 1024
"""The longest SSE line a replay serves: the adapters' own fixed limit (a longer line
ends the call in an error stop)."""

_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
_LINE_END = re.compile(rb"\r\n|\r|\n")


class BodyTooLarge(ValueError):
    """A body inflated past the limit (the message says how far it got)."""


class NotEncoded(ValueError):
    """A body that is not what its ``content-encoding`` says: it is stored decoded already
    (vcrpy's ``requests`` and ``urllib3`` stubs keep the header of a body they decoded)."""


def max_body(given: int | None = None) -> int:
    """The limit on an inflated body: ``given``, else :data:`MAX_BODY_ENV`, else
    :data:`DEFAULT_MAX_BODY`."""
    if given is not None:
        if given < 1:
            raise CassetteError(f"max_body={given}: give a number of bytes, 1 or more")
        return given
    raw = os.environ.get(MAX_BODY_ENV, "").strip().replace("_", "")
    if not raw:
        return DEFAULT_MAX_BODY
    if not raw.isdigit() or int(raw) < 1:
        raise CassetteError(
            f"{MAX_BODY_ENV}={os.environ[MAX_BODY_ENV]!r}: give a number of bytes, 1 or more "
            f"(e.g. {MAX_BODY_ENV}={DEFAULT_MAX_BODY * 2})"
        )
    return int(raw)


def codings(headers: Mapping[str, Any]) -> list[str]:
    """The content codings of ``headers`` in the order they were applied (``identity``
    left out), lower-case."""
    out: list[str] = []
    for name, value in headers.items():
        if name.lower() == "content-encoding":
            for v in value if isinstance(value, list) else [value]:
                out += [c.strip().lower() for c in str(v).split(",")]
    return [c for c in out if c and c != "identity"]


def inflate(data: bytes, applied: list[str], limit: int) -> bytes:
    """``data`` with ``applied`` codings undone (last applied first), never holding more
    than ``limit`` bytes of output. Raises :class:`BodyTooLarge` past it, and
    :class:`ValueError` for a coding that is not gzip or deflate, and :class:`NotEncoded`
    for data that is not what its coding says."""
    unknown = [c for c in applied if c not in _WBITS]
    if unknown:
        raise ValueError(
            f"content-encoding {', '.join(unknown)} cannot be decoded here (only gzip and deflate)"
        )
    for coding in reversed(applied):
        data = _undo(data, coding, limit)
    return data


def _undo(data: bytes, coding: str, limit: int) -> bytes:
    wbits = _WBITS[coding]
    try:
        return _bounded(data, wbits, limit)
    except zlib.error:
        if coding != "deflate":
            raise NotEncoded(f"the body is not valid {coding} data") from None
    try:  # "deflate" is sent raw (no zlib header) by some servers, as httpx also accepts
        return _bounded(data, -zlib.MAX_WBITS, limit)
    except zlib.error:
        raise NotEncoded("the body is not valid deflate data") from None


_STEP = 1 << 20


def _bounded(data: bytes, wbits: int, limit: int) -> bytes:
    """``data`` inflated, once a first pass (that keeps nothing) has measured it within
    ``limit``: a bomb is refused holding 1 MiB at a time, not ``limit`` bytes."""
    measure = zlib.decompressobj(wbits)
    size, rest = 0, data
    while True:
        size += len(piece := measure.decompress(rest, _STEP))
        if size > limit:
            raise BodyTooLarge(f"it inflates past {limit:,} bytes")
        rest = measure.unconsumed_tail
        if not rest and len(piece) < _STEP:
            break
    if size + len(measure.flush()) > limit:
        raise BodyTooLarge(f"it inflates past {limit:,} bytes")
    decoder = zlib.decompressobj(wbits)
    return decoder.decompress(data) + decoder.flush()


def without_encoding(headers: dict[str, list[str]], size: int) -> dict[str, list[str]]:
    """Headers of a decoded body: no ``content-encoding``, ``content-length`` (when it was
    given) the decoded ``size``."""
    out: dict[str, list[str]] = {}
    for name, values in headers.items():
        lower = name.lower()
        if lower == "content-encoding":
            continue
        out[name] = [str(size)] if lower == "content-length" else values
    return out


def longest_line(body: bytes, limit: int) -> int:
    """The length of the longest line of ``body`` when it is longer than ``limit``, else 0
    (a body no longer than ``limit`` is not scanned)."""
    if len(body) <= limit:
        return 0
    longest = start = 0
    for match in _LINE_END.finditer(body):
        longest = max(longest, match.start() - start)
        start = match.end()
    longest = max(longest, len(body) - start)
    return longest if longest > limit else 0
