"""Values where bugs live: the candidates mixed into generated tool arguments.

A bug that hides behind one value (a tool that hangs for ``n == 3``, fails on an empty
string, divides by ``limit``, chokes on a combining mark) is missed by a strategy that draws
from the whole space evenly. These functions list, for one scalar schema, the values worth
trying first: small integers and the schema's own bounds with their neighbours, the sizes at
and next to its length bounds, empty, one-character, whitespace-only, very long and
non-ASCII text, and the literal values a user wrote in their own scenario files and
docstrings (:func:`literals_in_text`, :func:`literals_in_scenario`). Each list is ordered
plainest first, so a strategy that samples from it shrinks toward the simplest value.

Nothing here checks a candidate against the rest of the schema (a pattern, a format, an
enum): :mod:`openprogram_sim.fuzz._schemas` keeps the ones that are instances of it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = [
    "LONG",
    "STRINGS",
    "integers",
    "literals_in_scenario",
    "literals_in_text",
    "numbers",
    "sizes",
    "strings",
]

LONG = 1000
"""The length of the "very long" string (or the schema's ``maxLength`` when smaller)."""

STRINGS = (
    "",
    "a",
    " ",
    "0",
    "ab",
    "  \t\n ",
    "null",
    "e\u0301",  # a combining mark: two code points, one character on screen
    "😀",
    "שלום",  # right to left
    "a\x00b",
    "ünïcödé ✓",
    "مرحبا 123",
    "\u200b",  # zero-width space
    "-1",
    "true",
    "{}",
    "'; --",
)
"""Strings where bugs live, plainest first: empty, one character, whitespace only, digits,
the words JSON and YAML read specially, non-ASCII (a combining mark, an emoji, right-to-left
text, a NUL, a zero-width space)."""

SMALL_INTEGERS = (0, 1, -1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -2)
"""-2 to 10, zero and ±1 first."""


def _order(values: Iterable[Any]) -> list[Any]:
    """``values`` without repeats (``1`` and ``1.0`` count as one, ``True`` is not 1), in
    their order."""
    seen: set[tuple[str, Any]] = set()
    out: list[Any] = []
    for value in values:
        key = (type(value).__name__ if isinstance(value, bool) else "n", value)
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def integers(
    low: int | None, high: int | None, multiple: int | None = None, extra: Iterable[Any] = ()
) -> list[int]:
    """Integers in ``[low, high]`` (None: unbounded) where bugs live: -2 to 10, the bounds
    and their neighbours, multiples of ``multiple`` (and only those, when given), then the
    ``extra`` integers (literals) that fit."""
    near: list[int] = list(SMALL_INTEGERS)
    for bound in (low, high):
        if bound is not None:
            near += [bound, bound + 1, bound - 1]
    if multiple:
        near += [multiple * k for k in (1, -1, 2, 3)]
        base = low if low is not None else high
        if base is not None:
            first = math.ceil(base / multiple) * multiple
            near += [first, first + multiple, first - multiple]
    near += [v for v in extra if isinstance(v, int) and not isinstance(v, bool)]
    return [
        v
        for v in _order(near)
        if (low is None or v >= low)
        and (high is None or v <= high)
        and (not multiple or v % multiple == 0)
    ]


def numbers(
    low: float | None,
    high: float | None,
    *,
    exclude_low: bool = False,
    exclude_high: bool = False,
    extra: Iterable[Any] = (),
) -> list[float | int]:
    """Numbers in the interval where bugs live: the small integers, ±0.5, the bounds (when
    not excluded) and the nearest floats on each side of them, then ``extra``."""
    near: list[float | int] = [*SMALL_INTEGERS, 0.5, -0.5, 0.1, 1e-9]
    for bound in (low, high):
        if bound is not None:
            near += [bound, math.nextafter(bound, math.inf), math.nextafter(bound, -math.inf)]
            near += [bound + 1, bound - 1]
    near += [v for v in extra if isinstance(v, (int, float)) and not isinstance(v, bool)]

    def inside(v: float) -> bool:
        if low is not None and (v < low or (exclude_low and v == low)):
            return False
        return not (high is not None and (v > high or (exclude_high and v == high)))

    return [v for v in _order(near) if math.isfinite(v) and inside(v)]


def sizes(low: int, high: int | None) -> list[int]:
    """Sizes where bugs live for a length in ``[low, high]``: the bounds and their
    neighbours, 0 and 1."""
    near = [low, low + 1, 0, 1, *([high, high - 1] if high is not None else [])]
    return [n for n in _order(near) if n >= low and (high is None or n <= high)]


def strings(low: int, high: int | None, extra: Iterable[Any] = ()) -> list[str]:
    """Strings with a length in ``[low, high]`` where bugs live: :data:`STRINGS`, strings of
    the sizes at and next to the bounds, a very long one, then the ``extra`` strings."""
    near: list[str] = list(STRINGS)
    near += ["a" * n for n in sizes(low, high)]
    near.append("x" * min(LONG, high if high is not None else LONG))
    near += [v for v in extra if isinstance(v, str)]
    return [s for s in _order(near) if len(s) >= low and (high is None or len(s) <= high)]


# --------------------------------------------------------------------------- literals

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_QUOTED = re.compile(r"\"([^\"\n]{1,80})\"|'([^'\n]{1,80})'|`([^`\n]{1,80})`")


def literals_in_text(text: str) -> list[int | float | str]:
    """The numbers and quoted strings (``"..."``, ``'...'``, ```...```) in a docstring or a
    description, in order: ``"Raises for 'ZZ' or a limit over 50"`` gives ``['ZZ', 50]``."""
    found: list[tuple[int, int | float | str]] = []
    for match in _QUOTED.finditer(text):
        found.append((match.start(), next(g for g in match.groups() if g is not None)))
    for match in _NUMBER.finditer(text):
        token = match.group()
        found.append((match.start(), float(token) if "." in token else int(token)))
    return _order(value for _, value in sorted(found, key=lambda pair: pair[0]))


def _literal(value: Any) -> bool:
    """A number (not a bool), or a string of at most 200 characters."""
    if isinstance(value, str):
        return len(value) <= 200
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalars(value: Any) -> Iterator[int | float | str]:
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _scalars(item)
    elif isinstance(value, list):
        for item in value:
            yield from _scalars(item)
    elif _literal(value):
        yield value


def _calls(node: Any) -> Iterator[tuple[str, Any]]:
    """``(tool, arguments)`` of every call written in a scenario document (short and long
    forms, nested scripts and ``one_of`` alternatives included)."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "tool_calls" and isinstance(value, list):
                for call in value:
                    if isinstance(call, Mapping) and isinstance(call.get("name"), str):
                        yield call["name"], call.get("arguments")
                    elif isinstance(call, Mapping) and len(call) == 1:
                        ((name, arguments),) = call.items()
                        yield str(name), arguments
            else:
                yield from _calls(value)
    elif isinstance(node, list):
        for item in node:
            yield from _calls(item)


def literals_in_scenario(document: Any) -> dict[str, list[int | float | str]]:
    """The scalar values a scenario document passes to each tool in its ``tool_calls``, by
    tool name: ``{model: [{tool_calls: [{search: {q: "Paris", limit: 3}}]}]}`` gives
    ``{"search": ["Paris", 3]}``."""
    out: dict[str, list[int | float | str]] = {}
    for name, arguments in _calls(document):
        out.setdefault(name, []).extend(_scalars(arguments))
    return {name: _order(values) for name, values in out.items()}
