"""Keys streamed in pieces: a model that repeats a key streams it in deltas, one piece per
event, so no single event holds the whole key, yet the client joins them back.

The strings at one JSON path (``choices[0].delta.content``, ``delta.text``,
``candidates[0].content.parts[0].text``...) are joined across the events of a stream, the
join is searched for secrets, and each piece of one is cut out of its event (the first
piece says ``<redacted:KIND>``). Only events that held a piece are written again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from openprogram.providers.eventstream import EventStreamDecoder, EventStreamError, encode_message
from openprogram_sim.cassettes._secrets import Scrubber

__all__ = ["stitched"]

Path = tuple[Any, ...]


def _leaves(node: Any, path: Path = ()) -> Iterator[tuple[Path, str]]:
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _leaves(value, (*path, i))


def _set(event: _Event, path: Path, value: str) -> None:
    if not path:
        event.data = value
        return
    node = event.data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


class _Event:
    """One SSE event or event-stream frame whose data is JSON."""

    def __init__(self, kind: str, raw: bytes) -> None:
        self.kind = kind
        self.raw = raw
        self.data: Any = None
        self._line = -1
        self._headers: dict[str, Any] = {}
        self._read()

    def _read(self) -> None:
        if self.kind == "eventstream":
            try:
                (message,) = EventStreamDecoder().feed(self.raw)
                self.data = json.loads(message.payload)
            except (EventStreamError, ValueError):
                return
            self._headers = message.headers
            return
        lines = self.raw.decode("utf-8", "surrogateescape").split("\n")
        data_lines = [i for i, line in enumerate(lines) if line.startswith("data:")]
        if len(data_lines) == 1:
            payload = lines[data_lines[0]][5:].strip()
            try:
                self.data = json.loads(payload)
                self._line = data_lines[0]
            except ValueError:
                self.data = None

    def encode(self) -> bytes:
        if self.kind == "eventstream":
            payload = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
            return encode_message(self._headers, payload.encode("utf-8"))
        lines = self.raw.decode("utf-8", "surrogateescape").split("\n")
        original = lines[self._line]
        compact = '": ' not in original and '", ' not in original
        separators = (",", ":") if compact else (", ", ": ")
        text = json.dumps(self.data, ensure_ascii="\\u" in original, separators=separators)
        ending = "\r" if original.endswith("\r") else ""
        space = " " if original.startswith("data: ") else ""
        lines[self._line] = f"data:{space}{text}{ending}"
        return "\n".join(lines).encode("utf-8", "surrogateescape")


def stitched(kind: str, events: list[bytes], scrubber: Scrubber) -> list[bytes]:
    """``events`` with every secret that only exists across events cut out."""
    parsed = [_Event(kind, raw) for raw in events]
    runs: dict[Path, list[tuple[int, Path, str]]] = {}
    for index, event in enumerate(parsed):
        if event.data is not None:
            for path, value in _leaves(event.data):
                runs.setdefault(path, []).append((index, path, value))
    touched: set[int] = set()
    for pieces in runs.values():
        if len(pieces) > 1:
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
                mask = f"<redacted:{kind}>" if first else ""
                edits.setdefault(k, []).append((lo - offset, hi - offset, mask))
                first = False
            offset += len(value)
    touched = set()
    for k, changes in edits.items():
        index, path, value = pieces[k]
        for lo, hi, mask in sorted(changes, reverse=True):
            value = value[:lo] + mask + value[hi:]
        _set(parsed[index], path, value)
        touched.add(index)
    return touched
