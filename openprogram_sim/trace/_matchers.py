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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import regex

from openprogram_sim.errors import MatchTimeoutError

__all__ = ["OPERATORS", "REGEX_SECONDS", "check_matcher", "describe", "matches", "show"]

OPERATORS = ("$regex", "$contains", "$subset", "$in", "$json", "$any")

REGEX_SECONDS = 0.25
"""The longest one ``$regex`` may take against one value."""


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


def _check_argument(name: str, arg: Any) -> str | None:
    if name == "$regex":
        if not isinstance(arg, str):
            return f"$regex needs a string pattern, got {arg!r}"
        try:
            _compiled(arg)
        except regex.error as exc:
            return f"bad regex {arg!r}: {exc}; escape special characters such as ( [ . with \\"
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
