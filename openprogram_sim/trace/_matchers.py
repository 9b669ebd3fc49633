"""Field matchers for traces and requests: equality, and a few operators beyond it.

An expected value matches an actual value when they are equal, or when the expected value
is an operator mapping:

``{$regex: "^Skipped"}``   the actual value, as text, matches the regular expression
``{$contains: "disk"}``    the text contains the substring (or a list contains the item)
``{$subset: {q: a}}``      every key given is present and matches (dicts, recursively)
``{$in: [a, b]}``          the actual value is one of these
``{$json: true}``          the text is one JSON value (``false``: it is not)
``{$any: true}``           anything, as long as the field is present

Operators are checked when a scenario is loaded (a bad regex is an error there, not at run
time) by :func:`check_matcher`. A ``$regex`` is matched with the ``regex`` engine under a
time limit (:data:`REGEX_SECONDS`): a pattern that backtracks catastrophically, such as
``^(a+)+$``, raises :class:`~openprogram_sim.errors.MatchTimeoutError` instead of hanging.
The engine expands a counted repeat when it compiles (``x{4000000000}`` asks for 4 GB), so
a pattern longer than :data:`REGEX_MAX_LENGTH`, or whose counted repeats, multiplied along
their nesting, exceed :data:`REGEX_MAX_REPEAT`, is refused before it is compiled.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import regex

from openprogram_sim.errors import MatchTimeoutError
from openprogram_sim.trace._paths import ABSENT, show_pair, show_value

__all__ = [
    "LINE_WIDTH",
    "OPERATORS",
    "REGEX_MAX_LENGTH",
    "REGEX_MAX_REPEAT",
    "REGEX_SECONDS",
    "Unmatched",
    "check_matcher",
    "describe",
    "describe_pair",
    "matches",
    "show",
    "unmatched",
]

OPERATORS = ("$regex", "$contains", "$subset", "$in", "$json", "$any")

REGEX_SECONDS = 0.25
"""The longest one ``$regex`` may take against one value."""

REGEX_MAX_LENGTH = 10_000
"""The most characters a ``$regex`` pattern may have (fixed)."""

REGEX_MAX_REPEAT = 10_000
"""The most a ``$regex``'s counted repeats (``{n}``, ``{n,m}``) may multiply to, nested ones
multiplied together: ``(x{100}){100}`` is 10,000 (fixed)."""

_COUNT = regex.compile(r"\{(\d*)(?:,(\d*))?\}")

LINE_WIDTH = 120
"""The most characters a value takes in a one-line diff (``expected …, actual …``)."""


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    return regex.compile(pattern)


def _search(pattern: str, text: str) -> bool:
    try:
        return _compiled(pattern).search(text, timeout=REGEX_SECONDS) is not None
    except TimeoutError:
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise MatchTimeoutError(
            f"$regex {pattern!r} took longer than {REGEX_SECONDS} s against {shown!r} "
            f"({len(text)} characters): it backtracks catastrophically (nested quantifiers "
            "such as (a+)+); simplify it, e.g. anchor it or drop the nested repetition"
        ) from None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _is_json(value: Any) -> bool:
    """Whether ``value`` is one JSON value: text that parses as one (``NaN`` and
    ``Infinity`` count, as Python writes them), or data JSON can encode."""
    try:
        if isinstance(value, str):
            json.loads(value)
        else:
            json.dumps(value)
    except (ValueError, TypeError, RecursionError):
        return False
    return True


def _operator(expected: Any) -> tuple[str, Any] | None:
    if isinstance(expected, Mapping) and len(expected) == 1:
        ((key, arg),) = expected.items()
        if isinstance(key, str) and key.startswith("$"):
            return key, arg
    return None


def matches(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` satisfies ``expected`` (a plain value or an operator)."""
    op = _operator(expected)
    if op is None:
        if isinstance(expected, Mapping) and isinstance(actual, Mapping):
            return set(expected) == set(actual) and all(
                matches(v, actual[k]) for k, v in expected.items()
            )
        if isinstance(expected, list) and isinstance(actual, list):
            return len(expected) == len(actual) and all(map(matches, expected, actual))
        return bool(expected == actual)
    name, arg = op
    if name == "$regex":
        return actual is not None and _search(arg, _text(actual))
    if name == "$contains":
        if isinstance(actual, list):
            return any(matches(arg, item) for item in actual)
        return actual is not None and str(arg) in _text(actual)
    if name == "$subset":
        return isinstance(actual, Mapping) and all(
            k in actual and matches(v, actual[k]) for k, v in arg.items()
        )
    if name == "$in":
        return any(matches(option, actual) for option in arg)
    if name == "$json":
        return actual is not None and _is_json(actual) == arg
    return True  # $any


def check_matcher(expected: Any) -> str | None:
    """None when ``expected`` is a valid matcher, else what is wrong with it."""
    op = _operator(expected)
    if op is None:
        if isinstance(expected, Mapping):
            children: list[Any] = list(expected.values())
        elif isinstance(expected, list):
            children = expected
        else:
            return None
        return next((p for p in map(check_matcher, children) if p), None)
    name, arg = op
    if name not in OPERATORS:
        return f"unknown matcher {name!r}; use one of {', '.join(OPERATORS)}"
    return _check_argument(name, arg)


def _skip_escape(pattern: str, i: int) -> int:
    """The index after the escape at ``pattern[i]`` (``\\x{10000}`` and ``\\p{L}`` whole)."""
    i += 2
    if i < len(pattern) and pattern[i] == "{" and pattern[i - 1].isalpha():
        end = pattern.find("}", i)
        return len(pattern) if end < 0 else end + 1
    return i


def _skip_set(pattern: str, i: int) -> int:
    """The index after the character set opening at ``pattern[i]`` (``[`` … ``]``)."""
    i += 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":  # a ] first is a member
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i = _skip_escape(pattern, i) if pattern[i] == "\\" else i + 1
    return i + 1


def _repeat_weight(pattern: str) -> int:
    """The largest product of counted repeats along any nesting in ``pattern`` (1 for none):
    what the engine multiplies out when it compiles."""
    stack = [1]  # the largest weight seen inside each open group
    i, last = 0, 1  # last: the weight of the atom just ended (what a count multiplies)
    while i < len(pattern):
        c = pattern[i]
        count = _COUNT.match(pattern, i) if c == "{" else None
        if count is not None and (count.group(1) or count.group(2)):
            last *= max(int(count.group(1) or 0), int(count.group(2) or 0))
            stack[-1] = max(stack[-1], last)
            i = count.end()
            continue
        if c == "(":
            stack.append(1)
        elif c == ")" and len(stack) > 1:
            last = stack.pop()
            stack[-1] = max(stack[-1], last)
        else:
            last = 1
        i = _skip_escape(pattern, i) if c == "\\" else _skip_set(pattern, i) if c == "[" else i + 1
    return max(stack)


def _check_regex(pattern: str) -> str | None:
    if len(pattern) > REGEX_MAX_LENGTH:
        return (
            f"$regex pattern is {len(pattern):,} characters long; the limit is "
            f"{REGEX_MAX_LENGTH:,} (fixed): match a shorter pattern, or use $contains"
        )
    weight = _repeat_weight(pattern)
    if weight > REGEX_MAX_REPEAT:
        shown = pattern if len(pattern) <= 60 else pattern[:57] + "..."
        return (
            f"$regex {shown!r} repeats {weight:,} times; counted repeats such as {{n}} and "
            f"{{n,m}}, nested ones multiplied, are limited to {REGEX_MAX_REPEAT:,} (fixed): "
            "use an open repeat such as x+ instead"
        )
    try:
        _compiled(pattern)
    except regex.error as exc:
        return f"bad regex {pattern!r}: {exc}; escape special characters such as ( [ . with \\"
    except (MemoryError, OverflowError) as exc:
        name = type(exc).__name__
        return f"$regex {pattern[:60]!r} is too large to compile ({name}); simplify it"
    return None


def _check_argument(name: str, arg: Any) -> str | None:
    if name == "$regex":
        if not isinstance(arg, str):
            return f"$regex needs a string pattern, got {arg!r}"
        return _check_regex(arg)
    if name == "$subset" and not isinstance(arg, Mapping):
        return f"$subset needs a mapping, got {arg!r}"
    if name == "$in" and not isinstance(arg, list):
        return f"$in needs a list of values, got {arg!r}"
    if name == "$json" and not isinstance(arg, bool):
        return f"$json takes true (the text is JSON) or false (it is not), got {arg!r}"
    return None


def show(value: Any) -> str:
    """A value as diffs print it: JSON, with real characters (``"39.2°F"``, not
    ``"39.2\\u00b0F"``); expected and actual values are printed alike."""
    return json.dumps(value, ensure_ascii=False, default=str)


def describe(expected: Any) -> str:
    """A short rendering of an expected value for diffs (an operator as ``regex "^a"``,
    ``{$json: false}`` as ``not JSON``)."""
    op = _operator(expected)
    if op is not None and op[0] == "$json" and isinstance(op[1], bool):
        return "JSON" if op[1] else "not JSON"
    if op is not None:
        return f"{op[0][1:]} {show(op[1])}"
    return show(expected)


@dataclass(frozen=True, slots=True)
class Unmatched:
    """One place where an actual value fails its expected one: ``args.body`` or
    ``tool_calls[2]``, as the path below the value compared."""

    path: tuple[str | int, ...]
    expected: Any
    """The matcher there, or ``ABSENT`` (of :mod:`openprogram_sim.trace._paths`): the actual
    mapping has a key the expected one does not name."""
    actual: Any
    """The value there, or ``ABSENT``: the key or the field is missing."""


def unmatched(expected: Any, actual: Any, path: tuple[str | int, ...] = ()) -> Iterator[Unmatched]:
    """Where ``actual`` fails ``expected``, down to the differing key: the same rules as
    :func:`matches` (a mapping names every key unless it is a ``$subset``; lists of the same
    length item by item). Lists of different lengths, operators and values of different
    kinds differ as a whole. Nothing when ``actual`` matches."""
    if actual is ABSENT:
        yield Unmatched(path, expected, actual)
        return
    if matches(expected, actual):
        return
    op = _operator(expected)
    if op is not None and op[0] == "$subset" and isinstance(actual, Mapping):
        yield from _keys(op[1], actual, path, every=False)
    elif op is None and isinstance(expected, Mapping) and isinstance(actual, Mapping):
        yield from _keys(expected, actual, path, every=True)
    elif (
        op is None
        and isinstance(expected, list)
        and isinstance(actual, list)
        and len(expected) == len(actual)
    ):
        for i, (want, have) in enumerate(zip(expected, actual, strict=True)):
            yield from unmatched(want, have, (*path, i))
    else:
        yield Unmatched(path, expected, actual)


def _keys(
    expected: Mapping[Any, Any], actual: Mapping[Any, Any], path: tuple[str | int, ...], *,
    every: bool,
) -> Iterator[Unmatched]:  # fmt: skip
    for key, want in expected.items():
        yield from unmatched(want, actual.get(key, ABSENT), (*path, str(key)))
    if every:
        for key in actual:
            if key not in expected:
                yield Unmatched((*path, str(key)), ABSENT, actual[key])


def describe_pair(expected: Any, actual: Any, width: int = LINE_WIDTH) -> tuple[str, str]:
    """An expected matcher and the actual value side by side, each in at most ``width``
    characters; two plain values cut around where they differ (see
    :func:`~openprogram_sim.trace.show_pair`), an operator shown as :func:`describe` does."""
    if expected is not ABSENT and _operator(expected) is not None:
        text = describe(expected)
        return text if len(text) <= width else text[: width - 1] + "…", show_value(actual, width)
    return show_pair(expected, actual, width)
