"""Where a generated scenario's choices come from, the choices themselves, and tool
arguments for the generated tools' schemas (private; behind :mod:`._generate`).

Speed: building a Hypothesis strategy costs far more than drawing from one, so the
generators are plain functions over a :class:`Source` of bounded integers. The public
strategies feed them from Hypothesis draws (:class:`DrawSource`); the fuzz campaign feeds
them from one byte string per scenario (:class:`ByteSource`), which is many times faster
and still shrinks.

Tool arguments for any schema but the generated tools' few :data:`SCHEMAS` (which small
builders here know) are drawn from the schema itself by our own JSON-Schema strategies
(:mod:`openprogram_sim.fuzz._schemas`): a user's tools, in the public strategies. The
campaign's byte strings only ever build calls to the generated tools.

Lists are drawn as "another one?" flags followed by the element, which the shrinker
deletes span by span; every choice shrinks toward its first option, and the
first option is always the plainest (a valid argument before an invalid one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from hypothesis import strategies as st

from openprogram_sim.fuzz import _schemas

__all__ = [
    "RAW_ARGUMENTS",
    "SCHEMAS",
    "WORDS",
    "ByteSource",
    "DrawSource",
    "Source",
    "flag",
    "integer",
    "invalid_arguments",
    "many",
    "pick",
    "subset",
    "text",
    "valid_arguments",
    "weighted",
]

T = TypeVar("T")

WORDS = (
    "ok", "done", "hello world", "yes", "null", "1.5", "a: b", "#tag", "- item", "{q}",
    "it's \"quoted\"", "ünïcode ✓", "  padded  ", "line\nbreak", "tab\there", "0",
)  # fmt: skip
"""The texts drawn: plain words and the strings YAML and format() treat specially."""

SCHEMAS: tuple[dict[str, Any], ...] = (
    {"type": "object", "properties": {}},
    {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0}},
        "required": ["n"],
    },
    {
        "type": "object",
        "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["q"],
    },
    {
        "type": "object",
        "properties": {"flag": {"type": "boolean"}, "tags": {"type": "array", "items": {}}},
        "required": ["flag"],
    },
)
"""The argument schemas generated tools take: none, a string, a bounded integer, an
optional property, a boolean and an array."""

RAW_ARGUMENTS = _schemas.RAW_ARGUMENTS
"""Argument texts that are not a JSON object (sent verbatim)."""

_WRONG_TYPE: dict[str, tuple[Any, ...]] = {  # values the lenient coercion cannot rescue
    "string": ({"x": 1}, [1, 2]),
    "integer": ("many", [3], {"n": 3}, 2.5),
    "boolean": ("maybe", [True], 7),
    "array": ("a,b", {"a": 1}),
}

# --------------------------------------------------------------------------- primitives


class Source(Protocol):
    """Where choices come from: ``integer(low, high)`` returns one in ``[low, high]``, and
    smaller is simpler; ``arguments(schema, valid)`` returns tool arguments valid or invalid
    for a JSON Schema."""

    def integer(self, low: int, high: int) -> int: ...

    def arguments(self, schema: Mapping[str, Any], valid: bool) -> Any: ...


_INTS: dict[tuple[int, int], st.SearchStrategy[int]] = {}


class DrawSource:
    """Choices drawn by Hypothesis, one bounded integer per choice (the public strategies:
    the best shrinking, but each draw costs tens of microseconds)."""

    __slots__ = ("draw",)

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self.draw = draw

    def integer(self, low: int, high: int) -> int:
        strategy = _INTS.get((low, high))
        if strategy is None:
            strategy = _INTS[(low, high)] = st.integers(low, high)
        value: int = self.draw(strategy)
        return value

    def arguments(self, schema: Mapping[str, Any], valid: bool) -> Any:
        """For a generated tool's schema, from the builders below (twice as fast, and they
        draw the coercible values too, ``"3"`` for an integer); for any other schema, from
        the schema itself (our JSON-Schema strategies, ``fuzz._schemas``)."""
        if schema in SCHEMAS:
            return valid_arguments(self, schema) if valid else invalid_arguments(self, schema)
        return self.draw(_schemas.arguments(schema, valid))


class ByteSource:
    """Choices read from a byte string Hypothesis drew whole (the campaign's hot path: one
    draw per scenario). Each choice takes one byte (two for ranges over 256); past the end
    every choice is its simplest value, and a lower byte is a simpler choice, so the
    shrinker's moves on the bytes are moves toward simpler scenarios."""

    __slots__ = ("data", "used")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.used = 0

    def integer(self, low: int, high: int) -> int:
        span = high - low + 1
        used = self.used
        data = self.data
        if span <= 256:  # one byte, read by index (no slice, no int.from_bytes)
            self.used = used + 1
            return low + data[used] % span if used < len(data) else low
        self.used = used + 2
        chunk = data[used : used + 2]
        if not chunk:
            return low
        return low + int.from_bytes(chunk, "big") % span

    def arguments(self, schema: Mapping[str, Any], valid: bool) -> Any:
        """From the builders below, which know only the generated tools' :data:`SCHEMAS`."""
        return valid_arguments(self, schema) if valid else invalid_arguments(self, schema)


def integer(src: Source, low: int, high: int) -> int:
    return src.integer(low, high)


def pick(src: Source, options: Sequence[T]) -> T:
    return options[src.integer(0, len(options) - 1)]


def flag(src: Source) -> bool:
    return src.integer(0, 1) == 1


_POOLS: dict[tuple[int, tuple[Any, ...]], tuple[Mapping[Any, int], tuple[Any, ...]]] = {}
"""The pools :func:`weighted` picks from, by the weights' identity and the options, each
kept with its weights (so an identity is never reused while its entry lives): the weights
are the builders' constants, and a pool is built once, not on every choice."""


def weighted(src: Source, options: Sequence[T], weights: Mapping[Any, int]) -> T:
    key = (id(weights), tuple(options))
    entry = _POOLS.get(key)
    if entry is None or entry[0] is not weights:
        if len(_POOLS) >= 1024:
            _POOLS.clear()
        entry = _POOLS[key] = (weights, tuple(o for o in options for _ in range(weights.get(o, 1))))
    pool: tuple[T, ...] = entry[1]
    return pool[src.integer(0, len(pool) - 1)]


def many(src: Source, element: Callable[[], T], low: int, high: int) -> list[T]:
    """``low`` to ``high`` elements; each one past ``low`` is preceded by a continue flag
    (3 in 4), so the shrinker removes an element by deleting its span."""
    out = [element() for _ in range(low)]
    while len(out) < high and src.integer(0, 3) != 0:
        out.append(element())
    return out


def text(src: Source) -> str:
    return WORDS[src.integer(0, len(WORDS) - 1)]


def subset(src: Source, names: Sequence[str], high: int) -> list[str]:
    chosen: list[str] = []
    for name in many(src, lambda: pick(src, names), 0, high) if names else ():
        if name not in chosen:
            chosen.append(name)
    return chosen


# --------------------------------------------------------------------------- arguments


# The campaign's fast builders, for the generated tools' SCHEMAS only (any other schema goes
# through our JSON-Schema strategies, see DrawSource.arguments).


def _valid_value(src: Source, prop: Mapping[str, Any]) -> Any:
    kind = prop.get("type")
    if kind == "string":
        return text(src)
    if kind == "integer":
        low = prop.get("minimum", -5)
        value = integer(src, low, low + 100)
        # a digit string is valid too: the validator coerces it, as real models need
        return str(value) if value >= 0 and flag(src) else value
    if kind == "boolean":
        return pick(src, (True, False, "true", "false"))
    if kind == "array":
        return many(src, lambda: text(src), 0, 3)
    return None


def valid_arguments(src: Source, schema: Mapping[str, Any]) -> dict[str, Any]:
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    return {k: _valid_value(src, v) for k, v in props.items() if k in required or flag(src)}


def invalid_arguments(src: Source, schema: Mapping[str, Any]) -> Any:
    """Arguments the schema rejects: text that is not a JSON object (a ``str``), a wrong
    type, a missing required key, or a value below its minimum."""
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = [k for k in schema.get("required") or () if k in props]
    ways = ["raw"]
    if required:
        ways += ["wrong_type", "missing"]
    if any("minimum" in props[k] for k in required):
        ways.append("below_minimum")
    way = pick(src, ways)
    if way == "raw":
        return pick(src, RAW_ARGUMENTS)
    args = valid_arguments(src, schema)
    key = pick(src, required)
    if way == "missing":
        args.pop(key, None)
    elif way == "wrong_type":
        args[key] = pick(src, _WRONG_TYPE[props[key]["type"]])
    else:
        args[key] = props[key]["minimum"] - integer(src, 1, 10)
    return args
