"""Generated scenarios over the user's own tools (a :class:`ToolTarget`), as Hypothesis
strategies.

What is drawn is plain data in the scenario file's shape, like the rest of the generators:
the tools are named by import path (``registry:`` or ``tools: {name: {python: ...}}``), the
gated tools' variables are set with ``env:`` so that every tool is offered, and ``timeout:``
is the run's real-time limit. Calls go to the user's tools with arguments drawn from their
real schemas (:mod:`openprogram_sim.fuzz._schemas`, the values where bugs live and the
tool's literals mixed in): valid ones, save :attr:`UserOptions.invalid_args_rate` of them
with invalid arguments and :attr:`UserOptions.unknown_tool_rate` to tools that do not
exist. The model's script is one list for every depth, played in call order, so a tool that
runs a nested exec (an ``@agentic_function``) takes its replies from the same script; every
script ends on a few text replies, enough for the nested runs and the outer one to finish
rather than run the script dry (which is a clean error end, but ends the run early).

Speed: a scenario is drawn in one go, as the loop campaign draws its own: one byte string
for its shape (the exec call, the turns' kinds and sizes, steering, follow-ups; read by a
:class:`~openprogram_sim.fuzz._generate.ByteSource`) and one list of calls, which the turns
take in order. The strategies are built once per target and options. Each call's kind
(valid, invalid, unknown tool) is read from two bytes of its own, evenly, so the shares
match the settings; zero bytes are a valid call, so a failing case shrinks toward valid
calls, fewer calls (the shrinker deletes list items) and plainer turns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from openprogram_sim.fuzz import _generate as _s
from openprogram_sim.fuzz import _schemas
from openprogram_sim.fuzz.tools._target import ToolInfo, ToolTarget

__all__ = ["USER_KINDS", "UserOptions", "tool_call_strategy", "user_scenario_strategy"]

USER_KINDS = ("text", "calls", "error", "aborted", "truncate", "raise")
"""Model turn kinds in generated scenarios over user tools (``hang`` needs an abort)."""

SHAPE_BYTES = 128
"""Bytes drawn per scenario for its shape (choices past them take their simplest value)."""

_KIND_WEIGHTS = {"text": 6, "calls": 20}  # the others weigh 1: most runs reach the tools
_SHARE_STEPS = 1 << 16

UNKNOWN_TOOL_RATE = 0.05
"""The default share of generated calls to tools that do not exist."""

INVALID_ARGS_RATE = 0.1
"""The default share of generated calls with arguments the tool layer rejects."""


@dataclass(frozen=True, slots=True)
class UserOptions:
    """What the generated scenarios may hold (checked by the public strategies)."""

    min_turns: int = 1
    max_turns: int = 6
    max_calls: int = 3
    kinds: tuple[str, ...] = USER_KINDS
    valid: bool | None = None
    unknown: bool = True
    max_steering: int = 1
    max_follow_ups: int = 1
    timeout: float = 2.0
    unknown_tool_rate: float = UNKNOWN_TOOL_RATE
    """Share of generated calls that go to a tool that does not exist (0 to 1)."""
    invalid_args_rate: float = INVALID_ARGS_RATE
    """Share of generated calls whose arguments the tool layer rejects (0 to 1)."""

    def __post_init__(self) -> None:
        for name in ("unknown_tool_rate", "invalid_args_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{name}={value!r} must be a number between 0 and 1")
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}={value!r} must be between 0 and 1 (a share of calls)")
        if self.unknown_tool_rate + self.invalid_args_rate > 1.0:
            raise ValueError(
                f"unknown_tool_rate={self.unknown_tool_rate!r} and invalid_args_rate="
                f"{self.invalid_args_rate!r} add up to more than 1 (both are shares of all calls)"
            )


def _entry(name: str) -> Callable[[Any], dict[str, Any]]:
    def entry(arguments: Any) -> dict[str, Any]:
        return _s.call_entry(name, arguments)

    return entry


def _calls_to(tools: Sequence[ToolInfo], valid: bool) -> st.SearchStrategy[dict[str, Any]]:
    """A call to one of ``tools`` with valid (or invalid) arguments for its schema."""
    return st.one_of(
        [_schemas.arguments(t.parameters, valid, t.literals).map(_entry(t.name)) for t in tools]
    )


def _shares(
    valid: bool | None, unknown: bool, unknown_rate: float, invalid_rate: float
) -> list[tuple[str, float]]:
    """``(kind, share)`` of calls, valid first (the simplest), the shares adding up to 1."""
    u = unknown_rate if unknown else 0.0
    i = 0.0 if valid is True else (1.0 - u if valid is False else invalid_rate)
    return [("valid", max(0.0, 1.0 - u - i)), ("invalid", i), ("unknown", u)]


def tool_call_strategy(
    target: ToolTarget,
    valid: bool | None,
    unknown: bool,
    *,
    unknown_tool_rate: float = UNKNOWN_TOOL_RATE,
    invalid_args_rate: float = INVALID_ARGS_RATE,
) -> st.SearchStrategy[dict[str, Any]]:
    """One call in the scenario's shape: ``{name: arguments}``, or the long form
    ``{name, arguments}`` for argument text that is not JSON. ``valid`` True: valid
    arguments only, False: invalid ones only, None: ``invalid_args_rate`` of the calls
    invalid; with ``unknown``, ``unknown_tool_rate`` of them go to tools that do not exist."""
    return _call_strategy(target, valid, unknown, unknown_tool_rate, invalid_args_rate)


def _call_strategy(
    target: ToolTarget, valid: bool | None, unknown: bool, unknown_rate: float,
    invalid_rate: float,
) -> st.SearchStrategy[dict[str, Any]]:  # fmt: skip
    by_kind = {
        "valid": lambda: _calls_to(target.tools, True),
        "invalid": lambda: _calls_to(target.tools, False),
        "unknown": lambda: st.sampled_from(_s.UNKNOWN_TOOL_NAMES).map(
            lambda n: _s.call_entry(n, {})
        ),
    }
    bounds: list[tuple[float, st.SearchStrategy[dict[str, Any]]]] = []
    edge = 0.0
    for kind, share in _shares(valid, unknown, unknown_rate, invalid_rate):
        if share > 0:
            edge += share
            bounds.append((edge, by_kind[kind]()))
    if len(bounds) == 1:
        return bounds[0][1]

    def of_kind(two: bytes) -> st.SearchStrategy[dict[str, Any]]:
        at = int.from_bytes(two, "big") / _SHARE_STEPS  # even over [0, 1): the shares hold
        return next((s for top, s in bounds if at < top), bounds[-1][1])

    return st.binary(min_size=2, max_size=2).flatmap(of_kind)


class _CallPlan:
    """What a call may be, built once per target and options: the shares of valid, invalid
    and unknown-tool calls, and each tool's argument strategies."""

    __slots__ = ("bounds", "invalid", "most", "unknown", "valid")

    def __init__(self, target: ToolTarget, options: UserOptions) -> None:
        shares = _shares(options.valid, options.unknown, options.unknown_tool_rate,
                         options.invalid_args_rate)  # fmt: skip
        edge, self.bounds = 0.0, []
        for kind, share in shares:
            edge += share
            self.bounds.append((edge, kind))
        self.valid = [_schemas.arguments(t.parameters, True, t.literals).map(_entry(t.name))
                      for t in target.tools]  # fmt: skip
        self.invalid = [_schemas.arguments(t.parameters, False, t.literals).map(_entry(t.name))
                        for t in target.tools]  # fmt: skip
        self.unknown = st.sampled_from(_s.UNKNOWN_TOOL_NAMES).map(lambda n: _s.call_entry(n, {}))
        self.most = max(1, options.max_turns) * options.max_calls

    def pick(self, src: _s.Source) -> st.SearchStrategy[dict[str, Any]]:
        """One call's strategy, its kind and tool read from ``src`` (evenly: the shares hold;
        zero bytes are a valid call to the first tool)."""
        at = _s.integer(src, 0, _SHARE_STEPS - 1) / _SHARE_STEPS
        kind = next((k for top, k in self.bounds if at < top), "valid")
        if kind == "unknown":
            return self.unknown
        pool = self.valid if kind == "valid" else self.invalid
        return pool[_s.integer(src, 0, len(pool) - 1)]


class _Calls:
    """The calls one scenario's turns ask for: empty dicts in the turns, each with the
    strategy its arguments are drawn from once the scenario's shape is known."""

    __slots__ = ("holes", "plan")

    def __init__(self, plan: _CallPlan) -> None:
        self.plan = plan
        self.holes: list[tuple[dict[str, Any], st.SearchStrategy[dict[str, Any]]]] = []

    def take(self, src: _s.Source, n: int) -> list[dict[str, Any]]:
        batch: list[dict[str, Any]] = []
        for _ in range(min(n, self.plan.most - len(self.holes))):
            hole: dict[str, Any] = {}
            self.holes.append((hole, self.plan.pick(src)))
            batch.append(hole)
        return batch


def _turn(src: _s.Source, calls: _Calls, options: UserOptions) -> dict[str, Any]:
    kind = _s.weighted(src, options.kinds, _KIND_WEIGHTS)
    size = 1 + _s.integer(src, 0, options.max_calls - 1)
    turn: dict[str, Any] = {}
    if kind == "calls":
        batch = calls.take(src, size)
        if not batch:  # as many calls as a scenario may hold: a text reply instead
            return {"text": _s.text(src)}
        turn["tool_calls"] = batch
        if _s.flag(src):
            turn["text"] = _s.text(src)
    elif kind == "text":
        turn["text"] = _s.text(src)
    else:  # a failing turn may carry calls: they must never run
        if _s.flag(src):
            batch = calls.take(src, size)
            if batch:
                turn["tool_calls"] = batch
        if kind in ("error", "aborted"):
            turn["stop_reason"] = kind
        else:
            turn["fault"] = kind
        if kind != "truncate" and _s.flag(src):
            turn["error"] = _s.text(src)
    return turn


_MENU_WEIGHTS = {"full": 10, "toolset": 2, "list": 2}  # the others weigh 1
_CHOICE_WEIGHTS = {"auto": 8}  # the others weigh 1


def _exec(src: _s.Source, target: ToolTarget) -> dict[str, Any]:
    """The outer exec: mostly the full menu and ``tool_choice: auto`` (where calls reach the
    tools), sometimes a named toolset, a list, no tools, a forced or refused choice, a cap."""
    out: dict[str, Any] = {"content": _s.text(src)}
    menus = ["full", "list", "empty", "none"] + (["toolset"] if target.toolsets else [])
    menu = _s.weighted(src, menus, _MENU_WEIGHTS)
    if menu == "list":  # at least one tool ("empty" is the empty list)
        chosen = _s.subset(src, target.names, len(target.names))
        out["tools"] = chosen or [_s.pick(src, target.names)]
    elif menu == "empty":
        out["tools"] = []
    elif menu in ("none", "toolset"):
        out["toolset"] = "none" if menu == "none" else _s.pick(src, target.toolsets)
    choice = _s.weighted(src, ("auto", "required", "none", "forced"), _CHOICE_WEIGHTS)
    if choice == "forced":
        out["tool_choice"] = {"type": "function", "name": _s.pick(src, target.names)}
    elif choice != "auto":
        out["tool_choice"] = choice
    if _s.integer(src, 0, 3) == 3:  # a cap in one run in four: low caps end runs early
        cap = _s.max_iterations(src, _s.MAX_ITERATIONS)
        if cap is not None:
            out["max_iterations"] = cap
    return out


def _scenario(
    shape: bytes, base: dict[str, Any], target: ToolTarget, options: UserOptions,
    calls: _Calls,
) -> dict[str, Any]:  # fmt: skip
    """The scenario ``shape`` describes; its calls are left in ``calls`` to be drawn."""
    src = _s.ByteSource(shape)
    data: dict[str, Any] = {**base, "exec": _exec(src, target)}
    turns = _s.many(src, lambda: _turn(src, calls, options), options.min_turns,
                    options.max_turns)  # fmt: skip
    nested = any(t.agentic for t in target.tools)
    finishes = 1 + _s.integer(src, 0, 2 if nested else 1)
    data["model"] = turns + [{"text": _s.text(src)} for _ in range(finishes)]
    steering = _s.steering_points(src, options.max_steering, 2 * options.max_calls,
                                  max(1, options.max_turns))  # fmt: skip
    if steering:
        data["steering"] = steering
    follow = _s.follow_ups(src, options.max_follow_ups)
    if follow:
        data["follow_ups"] = follow
    return data


def user_scenario_strategy(
    target: ToolTarget, options: UserOptions
) -> st.SearchStrategy[dict[str, Any]]:
    """Whole scenario dicts over ``target`` (see the module docstring); the target must
    name every tool by import path (:meth:`ToolTarget.scenario_refs`)."""
    base: dict[str, Any] = {"scenario": "generated", **target.scenario_refs()}
    if target.env:
        base["env"] = dict(target.env)
    base["timeout"] = options.timeout
    plan = _CallPlan(target, options)
    shape = st.binary(min_size=SHAPE_BYTES, max_size=SHAPE_BYTES)

    def generated(draw: st.DrawFn) -> dict[str, Any]:
        calls = _Calls(plan)
        data = _scenario(draw(shape), base, target, options, calls)
        for hole, arguments in calls.holes:
            hole.update(draw(arguments))
        return data

    return st.composite(generated)()
