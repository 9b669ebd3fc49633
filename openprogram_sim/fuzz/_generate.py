"""Private builders behind :mod:`openprogram_sim.fuzz.strategies` (arguments already checked).

Everything drawn here is plain data in the scenario file's shape (dicts, lists, strings,
ints, bools), so a generated case is a scenario as soon as it validates, and it dumps to
YAML unchanged.

The builders draw every choice from a :class:`Source` (:mod:`openprogram_sim.fuzz._source`:
the Hypothesis-fed and the byte-string sources, the primitive choices and the generated
tools' arguments, re-exported here). Only the public entry points are strategies.

Every choice shrinks toward its first option, and the first option is always the plainest
(text before tool calls, a valid argument before an invalid one, no fault before a fault).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from openprogram_sim.fuzz._rules import HARD_CAP, effective_cap
from openprogram_sim.fuzz._source import (
    RAW_ARGUMENTS,
    SCHEMAS,
    WORDS,
    ByteSource,
    DrawSource,
    Source,
    flag,
    integer,
    invalid_arguments,
    many,
    pick,
    subset,
    text,
    valid_arguments,
    weighted,
)

__all__ = [
    "MAX_ITERATIONS",
    "RAW_ARGUMENTS",
    "SCHEMAS",
    "SPIN_ONE_IN",
    "TOOL_NAMES",
    "TURN_KINDS",
    "UNKNOWN_TOOL_NAMES",
    "WORDS",
    "ByteSource",
    "DrawSource",
    "Source",
    "call_entry",
    "exec_args",
    "exec_call",
    "flag",
    "follow_ups",
    "integer",
    "invalid_arguments",
    "many",
    "max_iterations",
    "model_turn",
    "nested_exec",
    "pick",
    "scenario_dict",
    "script",
    "spinning",
    "steering_points",
    "subset",
    "text",
    "tool_call",
    "tool_def",
    "toolbox",
    "valid_arguments",
    "weighted",
]

TOOL_NAMES = ("search", "fetch", "calc", "notes", "research", "deep", "clock", "flaky")
"""Names generated tools take (never ``name``: it would read as the long call form)."""

UNKNOWN_TOOL_NAMES = ("nope", "search_v2", "rm_rf")
"""Names no generated tool takes: calls to them are calls to unknown tools."""

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


def max_iterations(src: Source, caps: Sequence[int | range | None]) -> int | None:
    """A ``max_iterations`` value: a weighted choice among ``caps`` (see
    :data:`MAX_ITERATIONS`), then a value if the choice is a range."""
    choice = weighted(src, caps, _CAP_WEIGHTS)
    if isinstance(choice, range):
        return choice[integer(src, 0, len(choice) - 1)]
    return choice


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
