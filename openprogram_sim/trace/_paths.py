"""JSON paths: ``$.messages[*].content`` parsed and printed, values pruned by a list of
paths, and the JSON-path differences between two values.

A path is ``$`` followed by ``.key``, ``[N]``, ``["key"]`` or ``*`` (any one key or index);
a pattern covers everything under what it names. Cassette matching (ignore lists and the
diff that explains a miss) and the scenario schema (checking ``ignore:`` patterns) read
paths through this module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ABSENT",
    "Difference",
    "IgnoreList",
    "differences",
    "parse_path",
    "path_text",
    "show_pair",
    "show_value",
]

_SEGMENT = re.compile(r"\.([A-Za-z_][\w-]*|\*)|\[(\d+|\*)\]|\[\"((?:[^\"\\]|\\.)*)\"\]")


class _Absent:
    """The value on the side of a difference where the key or index is missing."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
"""What a :class:`Difference` holds on the side where the key or index is missing (shown
as ``(absent)``)."""


def parse_path(pattern: str) -> tuple[str | int, ...]:
    """``$.a[0]["b-c"].*`` as its segments; raises ValueError naming the bad part."""
    if not pattern.startswith("$"):
        raise ValueError(f"ignore pattern {pattern!r} must start with $ (e.g. $.metadata)")
    segments: list[str | int] = []
    pos = 1
    while pos < len(pattern):
        m = _SEGMENT.match(pattern, pos)
        if m is None:
            raise ValueError(
                f"ignore pattern {pattern!r}: cannot read {pattern[pos:]!r}; use .key, [N], "
                '["key"] or * (e.g. $.messages[*].content)'
            )
        key, index, quoted = m.groups()
        if key is not None:
            segments.append(key)
        elif index is not None:
            segments.append("*" if index == "*" else int(index))
        else:
            segments.append(json.loads(f'"{quoted}"'))
        pos = m.end()
    return tuple(segments)


def path_text(path: Iterable[str | int]) -> str:
    """Segments as a JSON path: ``$.messages[2].content``."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][\w-]*", part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


class IgnoreList:
    """Compiled ignore patterns; :meth:`prune` gives a value without the ignored fields."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        self._paths = [parse_path(p) for p in self.patterns]

    def __bool__(self) -> bool:
        return bool(self._paths)

    def prune(self, value: Any) -> Any:
        for path in self._paths:
            value = _without(value, path)
        return value


def _without(value: Any, path: tuple[str | int, ...]) -> Any:
    """``value`` without what ``path`` names (copies only along the way)."""
    if not path:
        return ABSENT
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        keys = list(value) if head == "*" else [head] if head in value else []
        if not keys:
            return value
        out = dict(value)
        for key in keys:
            sub = _without(out[key], rest)
            if sub is ABSENT:
                del out[key]
            else:
                out[key] = sub
        return out
    if isinstance(value, list):
        if head == "*":
            items = [_without(v, rest) for v in value]
            return [v for v in items if v is not ABSENT]
        if isinstance(head, int) and 0 <= head < len(value):
            out_list = list(value)
            sub = _without(out_list[head], rest)
            out_list[head] = None if sub is ABSENT else sub  # keep later indexes in place
            return out_list
    return value


@dataclass(frozen=True, slots=True)
class Difference:
    """One place where a sent body differs from a recorded one."""

    path: str
    """The JSON path, e.g. ``$.messages[2].content[0].text``."""
    recorded: Any
    sent: Any


def differences(recorded: Any, sent: Any, limit: int = 50) -> list[Difference]:
    """Where two (pruned) bodies differ, in document order, at most ``limit``."""
    out: list[Difference] = []
    for diff in _walk(recorded, sent, ()):
        out.append(diff)
        if len(out) >= limit:
            break
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON: ``true`` is not ``1`` (Python says it is)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _walk(a: Any, b: Any, path: tuple[str | int, ...]) -> Iterator[Difference]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            va, vb = a.get(key, ABSENT), b.get(key, ABSENT)
            if va is ABSENT or vb is ABSENT:
                yield Difference(path_text((*path, key)), va, vb)
            elif not _same(va, vb):
                yield from _walk(va, vb, (*path, key))
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            va = a[i] if i < len(a) else ABSENT
            vb = b[i] if i < len(b) else ABSENT
            if va is ABSENT or vb is ABSENT:
                yield Difference(path_text((*path, i)), va, vb)
            elif not _same(va, vb):
                yield from _walk(va, vb, (*path, i))
    elif not _same(a, b):
        yield Difference(path_text(path), a, b)


def _text(value: Any) -> str:
    if value is ABSENT:
        return "(absent)"
    if isinstance(value, bytes):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def show_value(value: Any, width: int = 60) -> str:
    """A value as the mismatch message shows it (JSON, cut to ``width`` characters)."""
    return _around(_text(value), 0, width)


def show_pair(expected: Any, actual: Any, width: int = 60) -> tuple[str, str]:
    """Two values as a diff shows them side by side, as JSON: each whole when it fits in
    ``width`` characters; a longer one cut to the part around where the two texts first
    differ, so the difference shows on both sides (``…the post office`` beside ``…the
    bakery``), never two copies of a common prefix."""
    a, b = _text(expected), _text(actual)
    if expected is ABSENT or actual is ABSENT or a == b:
        return _around(a, 0, width), _around(b, 0, width)
    at = min(len(a), len(b))  # where the two texts first differ
    at = next((i for i in range(at) if a[i] != b[i]), at)
    return _around(a, at, width), _around(b, at, width)


def _around(text: str, at: int, width: int) -> str:
    """``text`` in at most ``width`` characters from a third of the width before position
    ``at`` (the same start for both sides of a pair, so that what differs stays in view);
    ``…`` marks each cut."""
    if len(text) <= width:
        return text
    start = at - min(at, width // 3)
    head = "…" if start else ""
    end = start + width - len(head)
    if end >= len(text):
        return head + text[start:]
    return head + text[start : end - 1] + "…"
