"""Secrets in a stream, found on the text a client reads: each event's data decoded (its
JSON parsed, so ``\\u0073k-`` and ``\\/`` escapes read as the characters they stand for),
and the pieces a client joins stitched back together.

A model that repeats a key streams it in deltas, one piece per event, so no single event
holds the whole key, yet the client joins them back. The strings at one JSON path
(``choices[0].delta.content``, ``delta.text``, ``candidates[0].content.parts[0].text``...)
are joined across the events of a stream twice: once by path alone, and once also by the
fields that say which block or call a delta belongs to (``index``, ``output_index``,
``content_index``, ``item_id``, ``contentBlockIndex``, ``type``), so the argument deltas of
two tool calls streamed interleaved are joined call by call. Each join is searched for
secrets, as it is and, when it holds JSON escapes, as JSON text read once more (a tool
call's ``arguments`` and ``partial_json`` are JSON text the client parses again, so a
``\\u0073k-`` there is an ``s`` too); each piece of one is cut out of its event (the first
piece says ``<redacted:KIND>``). A path that occurs once is searched on its own. Only
events that held a piece are written again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from openprogram.providers.eventstream import EventStreamDecoder, EventStreamError, encode_message
from openprogram_sim.cassettes._secrets import REDACTED, Scrubber

__all__ = ["stitched"]

Path = tuple[Any, ...]

_IDENTITY = ("index", "output_index", "content_index", "item_id", "contentBlockIndex", "type")
"""Fields of a streamed delta that say which block, item or call it belongs to."""
_DATA = "<data>"
"""The path of an event whose data is not JSON (the data itself is the string)."""


def _leaves(node: Any, path: Path = (), ident: Path = ()) -> Iterator[tuple[Path, Path, str]]:
    """``(path, identity, string)`` of every string in ``node``."""
    if isinstance(node, str):
        yield path, ident, node
    elif isinstance(node, dict):
        own = tuple(
            (k, node[k]) for k in _IDENTITY if isinstance(node.get(k), (str, int, float, bool))
        )
        for key, value in node.items():
            yield from _leaves(value, (*path, key), (*ident, *own))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _leaves(value, (*path, i), ident)


class _Event:
    """One SSE event or event-stream frame, its data decoded (JSON when it parses)."""

    def __init__(self, kind: str, raw: bytes) -> None:
        self.kind = kind
        self.raw = raw
        self.data: Any = None
        self.is_json = False
        self._lines: list[int] = []
        self._headers: dict[str, Any] = {}
        self._read()

    def _read(self) -> None:
        if self.kind == "eventstream":
            try:
                (message,) = EventStreamDecoder().feed(self.raw)
                self.data = json.loads(message.payload)
            except (EventStreamError, ValueError, RecursionError):
                return
            self.is_json = True
            self._headers = message.headers
            return
        lines = self.raw.decode("utf-8", "surrogateescape").split("\n")
        self._lines = [i for i, line in enumerate(lines) if line.startswith("data:")]
        if not self._lines:
            return
        values = [_value(lines[i]) for i in self._lines]
        payload = "\n".join(values)
        try:
            self.data = json.loads(payload)
            self.is_json = True
        except (ValueError, RecursionError):
            self.data = payload  # what the client reads, as text

    def leaves(self) -> Iterator[tuple[Path, Path, str]]:
        if self.data is None:
            return iter(())
        if not self.is_json:
            return iter([((_DATA,), (), self.data)]) if isinstance(self.data, str) else iter(())
        return _leaves(self.data)

    def set(self, path: Path, value: str) -> None:
        if not path or path == (_DATA,):
            self.data = value
            return
        node = self.data
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    def encode(self) -> bytes:
        if self.kind == "eventstream":
            payload = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
            return encode_message(self._headers, payload.encode("utf-8"))
        lines = self.raw.decode("utf-8", "surrogateescape").split("\n")
        first = lines[self._lines[0]]
        ending = "\r" if first.endswith("\r") else ""
        space = " " if first.startswith("data: ") else ""
        if self.is_json:
            compact = '": ' not in first and '", ' not in first
            separators = (",", ":") if compact else (", ", ": ")
            ascii_only = any("\\u" in lines[i] for i in self._lines)
            texts = [json.dumps(self.data, ensure_ascii=ascii_only, separators=separators)]
        else:
            texts = str(self.data).split("\n")
        # the data lines become the new ones (one line for JSON), where the first one was
        new = [f"data:{space}{text}{ending}" for text in texts]
        kept = [line for i, line in enumerate(lines) if i not in self._lines[1:]]
        at = self._lines[0]
        kept[at : at + 1] = new
        return "\n".join(kept).encode("utf-8", "surrogateescape")


def _value(line: str) -> str:
    value = line[5:].removesuffix("\r")
    return value[1:] if value.startswith(" ") else value


def stitched(kind: str, events: list[bytes], scrubber: Scrubber) -> list[bytes]:
    """``events`` with every secret in their decoded data cut out, whole or in pieces
    across events."""
    parsed = [_Event(kind, raw) for raw in events]
    touched: set[int] = set()
    for by_identity in (False, True):
        runs: dict[Path, list[tuple[int, Path, str]]] = {}
        for index, event in enumerate(parsed):
            for path, ident, value in event.leaves():
                key = (path, ident) if by_identity else path
                runs.setdefault(key, []).append((index, path, value))
        for pieces in runs.values():
            if len(pieces) > 1 and len({value for _, _, value in pieces}) == 1:
                # the same value in every event (an id, the model name): not a delta a
                # client joins; a secret in it is cut from each event
                if scrubber.spans(pieces[0][2]):
                    for piece in pieces:
                        touched |= _cut([piece], parsed, scrubber)
                continue
            touched |= _cut(pieces, parsed, scrubber)
    return [parsed[i].encode() if i in touched else raw for i, raw in enumerate(events)]


def _cut(pieces: list[tuple[int, Path, str]], parsed: list[_Event], scrubber: Scrubber) -> set[int]:
    joined = "".join(value for _, _, value in pieces)
    spans = scrubber.spans(joined)
    if not spans:
        return set()
    edits: dict[int, list[tuple[int, int, str]]] = {}  # piece -> (start, end, replacement)
    for start, end, kind in spans:
        offset, first = 0, True
        for k, (_, _, value) in enumerate(pieces):
            lo, hi = max(start, offset), min(end, offset + len(value))
            if lo < hi:
                mask = (REDACTED if kind == "secret" else f"<redacted:{kind}>") if first else ""
                edits.setdefault(k, []).append((lo - offset, hi - offset, mask))
                first = False
            offset += len(value)
    touched = set()
    for k, changes in edits.items():
        index, path, value = pieces[k]
        for lo, hi, mask in sorted(changes, reverse=True):
            value = value[:lo] + mask + value[hi:]
        parsed[index].set(path, value)
        touched.add(index)
    return touched
