"""Private builders behind :mod:`openprogram_sim.fuzz.strategies` (arguments already checked).

Everything drawn here is plain data in the scenario file's shape (dicts, lists, strings,
ints, bools), so a generated case is a scenario as soon as it validates, and it dumps to
YAML unchanged.

Speed: building a Hypothesis strategy costs far more than drawing from one, so the
generators are plain functions over a :class:`Source` of bounded integers. The public
strategies feed them from Hypothesis draws (:class:`DrawSource`); the fuzz campaign feeds
them from one byte string per scenario (:class:`ByteSource`), which is many times faster
and still shrinks. Only the public entry points are strategies.

Tool arguments for any schema but the generated tools' few :data:`SCHEMAS` (which small
builders here know) are drawn from the schema itself with ``hypothesis-jsonschema``
(:mod:`openprogram_sim.fuzz._schemas`): a user's tools, in the public strategies. The
campaign's byte strings only ever build calls to the generated tools.

Lists are drawn as "another one?" flags followed by the element, which the shrinker
deletes span by span; every choice shrinks toward its first option, and the
first option is always the plainest (text before tool calls, a valid argument before an
invalid one, no fault before a fault).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from hypothesis import strategies as st

from openprogram_sim.fuzz import _schemas
from openprogram_sim.fuzz._rules import HARD_CAP, effective_cap

T = TypeVar("T")

TOOL_NAMES = ("search", "fetch", "calc", "notes", "research", "deep", "clock", "flaky")
"""Names generated tools take (never ``name``: it would read as the long call form)."""

UNKNOWN_TOOL_NAMES = ("nope", "search_v2", "rm_rf")
"""Names no generated tool takes: calls to them are calls to unknown tools."""

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

_NESTED_CONTENT = (  # a nested exec's prompt names the tool's parameters, by schema
    "look into it",
    "look into {q}",
    "count to {n}",
    "search {q} (at most {limit})",
    "flag is {flag}",
)

TURN_KINDS = ("text", "calls", "error", "aborted", "truncate", "raise", "hang")
"""The kinds of model turn, plainest first. ``hang`` waits for an abort, so scenario
files (which cannot abort) never use it."""

_KIND_WEIGHTS = {"text": 8, "calls": 16}  # the others weigh 1

MAX_ITERATIONS: tuple[int | range | None, ...] = (
    None, 0, 1, HARD_CAP, range(2, HARD_CAP), range(HARD_CAP + 1, 201), range(-5, 0),
)  # fmt: skip
"""``max_iterations`` choices, plainest first: not given, the floor (0), one round, the hard
cap, the caps between, past the hard cap, negative. A range is one choice, then a value in
it. The first four are the common ones: the seed's cap rule turns on them."""

SPIN_ONE_IN = 32
"""One scenario in this many is a model that never stops picking, past its cap."""

_CALL_WEIGHTS = {"valid": 6, "invalid": 2, "unknown": 1}
_MENU_WEIGHTS = {"full": 6, "list": 3}  # the others weigh 1
_CAP_WEIGHTS = {None: 3, 0: 2, 1: 2, HARD_CAP: 2, range(2, HARD_CAP): 2}  # the others weigh 1

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
        the schema itself (``hypothesis-jsonschema``)."""
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
        width = 1 if span <= 256 else 2
        chunk = self.data[self.used : self.used + width]
        self.used += width
        if not chunk:
            return low
        return low + int.from_bytes(chunk, "big") % span

    def arguments(self, schema: Mapping[str, Any], valid: bool) -> Any:
        """From the builders below, which know only the generated tools' :data:`SCHEMAS`."""
        return valid_arguments(self, schema) if valid else invalid_arguments(self, schema)


def integer(src: Source, low: int, high: int) -> int:
    return src.integer(low, high)


def pick(src: Source, options: Sequence[T]) -> T:
    return options[integer(src, 0, len(options) - 1)]


def flag(src: Source) -> bool:
    return integer(src, 0, 1) == 1


def weighted(src: Source, options: Sequence[T], weights: Mapping[Any, int]) -> T:
    pool = [o for o in options for _ in range(weights.get(o, 1))]
    return pick(src, pool)


def max_iterations(src: Source, caps: Sequence[int | range | None]) -> int | None:
    """A ``max_iterations`` value: a weighted choice among ``caps`` (see
    :data:`MAX_ITERATIONS`), then a value if the choice is a range."""
    choice = weighted(src, caps, _CAP_WEIGHTS)
    if isinstance(choice, range):
        return choice[integer(src, 0, len(choice) - 1)]
    return choice


def many(src: Source, element: Callable[[], T], low: int, high: int) -> list[T]:
    """``low`` to ``high`` elements; each one past ``low`` is preceded by a continue flag
    (3 in 4), so the shrinker removes an element by deleting its span."""
    out = [element() for _ in range(low)]
    while len(out) < high and src.integer(0, 3) != 0:
        out.append(element())
    return out


def text(src: Source) -> str:
    return pick(src, WORDS)


def subset(src: Source, names: Sequence[str], high: int) -> list[str]:
    chosen: list[str] = []
    for name in many(src, lambda: pick(src, names), 0, high) if names else ():
        if name not in chosen:
            chosen.append(name)
    return chosen


# --------------------------------------------------------------------------- arguments


# The campaign's fast builders, for the generated tools' SCHEMAS only (any other schema goes
# through hypothesis-jsonschema, see DrawSource.arguments).


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


# --------------------------------------------------------------------------- tools


def nested_exec(
    src: Source, schema_index: int, names: Sequence[str], caps: Sequence[Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {"content": _NESTED_CONTENT[schema_index]}
    menu = pick(src, ("inherit", "list", "empty", "none"))
    if menu == "list":
        out["tools"] = subset(src, names, 3)
    elif menu == "empty":
        out["tools"] = []
    elif menu == "none":
        out["toolset"] = "none"
    cap = max_iterations(src, caps)
    if cap is not None:
        out["max_iterations"] = cap
    return out


def tool_def(
    src: Source, names: Sequence[str], behaviours: Sequence[str], caps: Sequence[Any]
) -> dict[str, Any]:
    index = integer(src, 0, len(SCHEMAS) - 1)
    out: dict[str, Any] = {"parameters": SCHEMAS[index]}
    behaviour = pick(src, behaviours)
    if behaviour == "returns":
        shape = integer(src, 0, 2)
        if shape == 0:
            out["returns"] = text(src)
        elif shape == 1:
            out["returns"] = integer(src, -9, 99)
        else:  # one value per call, the last repeating
            out["returns"] = many(src, lambda: text(src), 1, 3)
    elif behaviour == "raises":
        out["raises"] = text(src)
    else:
        out["exec"] = nested_exec(src, index, names, caps)
    return out


def toolbox(
    src: Source, low: int, high: int, behaviours: Sequence[str], caps: Sequence[Any]
) -> dict[str, dict[str, Any]]:
    names = subset(src, TOOL_NAMES, high)
    for name in TOOL_NAMES:  # top up to the minimum, deterministically
        if len(names) >= low:
            break
        if name not in names:
            names.append(name)
    return {name: tool_def(src, names, behaviours, caps) for name in names}


# --------------------------------------------------------------------------- model turns


def call_entry(name: str, arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, str):  # not JSON: the long form carries the raw text
        return {"name": name, "arguments": arguments}
    return {name: arguments}


def tool_call(
    src: Source, tools: Mapping[str, Mapping[str, Any]], unknown: bool, invalid: bool
) -> dict[str, Any]:
    kinds = ["valid"] if tools else []
    if tools and invalid:
        kinds.append("invalid")
    if unknown or not tools:
        kinds.append("unknown")
    kind = weighted(src, kinds, _CALL_WEIGHTS)
    if kind == "unknown":
        return call_entry(pick(src, UNKNOWN_TOOL_NAMES), {})
    name = pick(src, sorted(tools))
    schema = tools[name].get("parameters") or SCHEMAS[0]
    return call_entry(name, src.arguments(schema, kind == "valid"))


def model_turn(
    src: Source,
    tools: Mapping[str, Mapping[str, Any]],
    kinds: Sequence[str],
    max_calls: int,
    unknown: bool,
    invalid: bool,
    latency: bool,
) -> dict[str, Any]:
    kind = weighted(src, kinds, _KIND_WEIGHTS)

    def calls() -> list[dict[str, Any]]:
        return many(src, lambda: tool_call(src, tools, unknown, invalid), 1, max_calls)

    turn: dict[str, Any] = {}
    reason: str | None
    if kind == "calls":
        turn["tool_calls"] = calls()
        if flag(src):
            turn["text"] = text(src)
        reason = pick(src, (None, "toolUse", "length"))
    elif kind == "text":
        turn["text"] = text(src)
        reason = pick(src, (None, "stop", "length"))
    else:
        # a failing turn may still carry a body: its calls must never run
        if flag(src):
            turn["tool_calls"] = calls()
        if flag(src):
            turn["text"] = text(src)
        reason = kind if kind in ("error", "aborted") else None
        if kind in ("truncate", "raise", "hang"):
            turn["fault"] = kind
        if kind != "truncate" and flag(src):
            turn["error"] = text(src)
    if reason is not None:
        turn["stop_reason"] = reason
    if integer(src, 0, 3) == 3:
        turn["thinking"] = text(src)
    if latency and flag(src):
        turn["latency"] = pick(src, (0.5, 1.0, 30.0))
    return turn


def script(
    src: Source,
    tools: Mapping[str, Mapping[str, Any]],
    low: int,
    high: int,
    turn: Callable[[], dict[str, Any]],
    spin: bool,
) -> list[dict[str, Any]]:
    """A script of ``low`` to ``high`` turns, most ending on a final answer; with ``spin``,
    one in :data:`SPIN_ONE_IN` is a model that never stops picking, past the hard cap."""
    if spin and integer(src, 0, SPIN_ONE_IN - 1) == SPIN_ONE_IN - 1:
        return spinning(src, tools, HARD_CAP + integer(src, 0, 2))
    turns = many(src, turn, low, high)
    if integer(src, 0, 7) != 0:  # most scripts end on a final answer, some run dry
        turns.append({"text": text(src)})
    return turns


def spinning(
    src: Source, tools: Mapping[str, Mapping[str, Any]], rounds: int
) -> list[dict[str, Any]]:
    """``rounds`` identical tool-call rounds, then a final answer: a model that would pick
    forever, to run a loop into its cap. It calls a tool without a nested exec (which would
    eat the script), or an unknown one."""
    plain = [name for name in sorted(tools) if "exec" not in tools[name]]
    name = plain[0] if plain else UNKNOWN_TOOL_NAMES[0]
    turns: list[dict[str, Any]] = [{"tool_calls": [call_entry(name, {})]} for _ in range(rounds)]
    turns.append({"text": text(src)})
    return turns


# --------------------------------------------------------------------------- exec and queues


def exec_args(
    src: Source, names: Sequence[str], menus: Sequence[str], caps: Sequence[Any]
) -> dict[str, Any]:
    out = exec_call(src, names, menus)
    cap = max_iterations(src, caps)
    if cap is not None:
        out["max_iterations"] = cap
    return out


def exec_call(src: Source, names: Sequence[str], menus: Sequence[str]) -> dict[str, Any]:
    """An ``exec:`` without its cap: the prompt, the tools menu, tool_choice and
    parallel_tool_calls."""
    out: dict[str, Any] = {"content": text(src)}
    menu = weighted(src, menus, _MENU_WEIGHTS)
    if menu == "list":
        out["tools"] = subset(src, names, 4)
    elif menu == "empty":
        out["tools"] = []
    elif menu == "none":
        out["toolset"] = "none"
    choice = pick(src, ("auto", "required", "none", "forced"))
    if choice == "forced":
        target = pick(src, [*sorted(names), UNKNOWN_TOOL_NAMES[0]])
        out["tool_choice"] = {"type": "function", "name": target}
    elif choice != "auto":
        out["tool_choice"] = choice
    parallel = pick(src, (None, True, False))
    if parallel is not None:
        out["parallel_tool_calls"] = parallel
    return out


def steering_points(
    src: Source, max_points: int, max_tool: int, max_round: int
) -> list[dict[str, Any]]:
    def point() -> tuple[str, int]:
        if flag(src):
            return ("after_round", integer(src, 1, max_round))
        return ("after_tool", integer(src, 1, max_tool))

    seen: list[tuple[str, int]] = []
    for p in many(src, point, 0, max_points):
        if p not in seen:
            seen.append(p)
    return [{key: at, "text": text(src)} for key, at in seen]


def follow_ups(src: Source, max_size: int) -> list[dict[str, Any]]:
    return many(src, lambda: {"text": text(src)}, 0, max_size)


def scenario_dict(
    src: Source,
    min_tools: int,
    max_tools: int,
    behaviours: Sequence[str],
    min_turns: int,
    max_turns: int,
    max_calls: int,
    kinds: Sequence[str],
    menus: Sequence[str],
    caps: Sequence[Any],
    max_steering: int,
    max_follow_ups: int,
    spin: bool,
) -> dict[str, Any]:
    # The outer cap comes first, so it is always drawn from the bytes (never their
    # simplest default) and the shrinker moves it last; then whether the model spins.
    cap = max_iterations(src, caps)
    spins = spin and integer(src, 0, SPIN_ONE_IN - 1) == SPIN_ONE_IN - 1
    tools = toolbox(src, min_tools, max_tools, behaviours, caps)
    data: dict[str, Any] = {
        "scenario": "generated",
        "tools": tools,
        "exec": exec_call(src, sorted(tools), menus),
    }
    if cap is not None:
        data["exec"]["max_iterations"] = cap

    def turn() -> dict[str, Any]:
        return model_turn(src, tools, kinds, max_calls, True, True, True)

    if spins:  # up to two rounds past the run's cap
        data["model"] = spinning(src, tools, effective_cap(cap) + integer(src, 0, 2))
    else:
        data["model"] = script(src, tools, min_turns, max_turns, turn, False)
    steering = steering_points(src, max_steering, 2 * max_calls, max(1, max_turns))
    if steering:
        data["steering"] = steering
    follow = follow_ups(src, max_follow_ups)
    if follow:
        data["follow_ups"] = follow
    return data
