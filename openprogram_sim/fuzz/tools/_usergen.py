"""Generated scenarios over the user's own tools (a :class:`ToolTarget`), as Hypothesis
strategies.

What is drawn is plain data in the scenario file's shape, like the rest of the generators:
the tools are named by import path (``registry:`` or ``tools: {name: {python: ...}}``), the
gated tools' variables are set with ``env:`` so that every tool is offered, and ``timeout:``
is the run's real-time limit. Calls go to the user's tools with arguments drawn from their
real schemas (:mod:`openprogram_sim.fuzz._schemas`): mostly valid, some invalid, a few to
tools that do not exist. The model's script is one list for every depth, played in call
order, so a tool that runs a nested exec (an ``@agentic_function``) takes its replies from
the same script; every script ends on a few text replies, enough for the nested runs and the
outer one to finish rather than run the script dry (which is a clean error end, but ends the
run early).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from openprogram_sim.fuzz import _generate as _s
from openprogram_sim.fuzz import _schemas
from openprogram_sim.fuzz.tools._target import ToolInfo, ToolTarget

__all__ = ["USER_KINDS", "UserOptions", "tool_call_strategy", "user_scenario_strategy"]

USER_KINDS = ("text", "calls", "error", "aborted", "truncate", "raise")
"""Model turn kinds in generated scenarios over user tools (``hang`` needs an abort)."""

_KIND_WEIGHTS = {"text": 6, "calls": 20}  # the others weigh 1: most runs reach the tools
_CALL_WEIGHTS = {True: 6, False: 2, "unknown": 1}


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
    unknown_tool_rate: float = 0.05
    """Share of generated calls that go to a tool that does not exist (0 to 1)."""
    invalid_args_rate: float = 0.1
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


def _weighted(options: Sequence[Any], weights: dict[Any, int]) -> st.SearchStrategy[Any]:
    return st.sampled_from([o for o in options for _ in range(weights.get(o, 1))])


def _calls_to(tool: ToolInfo, valid: bool) -> st.SearchStrategy[dict[str, Any]]:
    def entry(arguments: Any) -> dict[str, Any]:
        return _s.call_entry(tool.name, arguments)

    return _schemas.arguments(tool.parameters, valid).map(entry)


def tool_call_strategy(
    target: ToolTarget, valid: bool | None, unknown: bool
) -> st.SearchStrategy[dict[str, Any]]:
    """One call in the scenario's shape: ``{name: arguments}``, or the long form
    ``{name, arguments}`` for argument text that is not JSON."""
    by_validity: dict[Any, st.SearchStrategy[dict[str, Any]]] = {}
    for wanted in (True, False):
        if valid is None or valid is wanted:
            by_validity[wanted] = st.one_of([_calls_to(t, wanted) for t in target.tools])
    if unknown:
        by_validity["unknown"] = st.sampled_from(_s.UNKNOWN_TOOL_NAMES).map(
            lambda name: _s.call_entry(name, {})
        )
    kinds = [k for k in (True, False, "unknown") if k in by_validity]
    return _weighted(kinds, _CALL_WEIGHTS).flatmap(lambda k: by_validity[k])


def _turn(
    draw: st.DrawFn, calls: st.SearchStrategy[dict[str, Any]], options: UserOptions
) -> dict[str, Any]:
    kind = draw(_weighted(options.kinds, _KIND_WEIGHTS))
    src = _s.DrawSource(draw)
    batch = st.lists(calls, min_size=1, max_size=options.max_calls)
    turn: dict[str, Any] = {}
    if kind == "text":
        turn["text"] = _s.text(src)
    elif kind == "calls":
        turn["tool_calls"] = draw(batch)
        if _s.flag(src):
            turn["text"] = _s.text(src)
    else:  # a failing turn may carry calls: they must never run
        if _s.flag(src):
            turn["tool_calls"] = draw(batch)
        if kind in ("error", "aborted"):
            turn["stop_reason"] = kind
        else:
            turn["fault"] = kind
        if kind != "truncate" and _s.flag(src):
            turn["error"] = _s.text(src)
    return turn


_MENU_WEIGHTS = {"full": 10, "toolset": 2, "list": 2}  # the others weigh 1
_CHOICE_WEIGHTS = {"auto": 8}  # the others weigh 1


def _exec(draw: st.DrawFn, target: ToolTarget) -> dict[str, Any]:
    """The outer exec: mostly the full menu and ``tool_choice: auto`` (where calls reach the
    tools), sometimes a named toolset, a list, no tools, a forced or refused choice, a cap."""
    src = _s.DrawSource(draw)
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


def user_scenario_strategy(
    target: ToolTarget, options: UserOptions
) -> st.SearchStrategy[dict[str, Any]]:
    """Whole scenario dicts over ``target`` (see the module docstring); the target must
    name every tool by import path (:meth:`ToolTarget.scenario_refs`)."""
    refs = target.scenario_refs()
    env = target.env
    calls = tool_call_strategy(target, options.valid, options.unknown)
    nested = any(t.agentic for t in target.tools)

    @st.composite
    def generated(draw: st.DrawFn) -> dict[str, Any]:
        src = _s.DrawSource(draw)
        data: dict[str, Any] = {"scenario": "generated", **refs}
        if env:
            data["env"] = dict(env)
        data["timeout"] = options.timeout
        data["exec"] = _exec(draw, target)
        turns = _s.many(src, lambda: _turn(draw, calls, options), options.min_turns,
                        options.max_turns)  # fmt: skip
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

    return generated()
