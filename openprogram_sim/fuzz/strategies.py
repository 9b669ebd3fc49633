"""Hypothesis strategies for tool-call loops: tools, model turns, exec calls, whole scenarios.

Every strategy draws plain data in the scenario file's shape, so the pieces compose into
a scenario and a generated case *is* a scenario: :func:`scenarios` draws validated
:class:`~openprogram_sim.scenario.Scenario` objects, :func:`scenario_dicts` the dicts they
validate from (what a YAML file holds). Arguments are checked when a strategy is built,
and a bad one raises :class:`hypothesis.errors.InvalidArgument` at once::

    from hypothesis import given
    from openprogram_sim.fuzz import check_invariants, run_generated, strategies as ops

    @given(ops.scenarios(max_turns=6))
    def test_the_loop_keeps_its_invariants(scenario):
        assert check_invariants(run_generated(scenario)) == []

**Your own tools.** :func:`tool_calls` and :func:`scenarios` take your tools first (a
``ToolRegistry``, a list of ``@function``/``@agentic_function`` tools, or their
``"pkg.module:attr"`` references): calls to them with arguments drawn from their real JSON
Schemas (numbers and their bounds, enums, nested objects, arrays, ``anyOf``, patterns,
formats; the values where bugs live mixed in: small integers, bounds, empty and non-ASCII
text, your own literals), valid or invalid as asked, and whole scenarios that run them::

    from weather_agent.tools import convert, get_weather, registry

    @given(ops.tool_calls([get_weather, convert], valid=True))
    def test_a_valid_call_answers_or_refuses_cleanly(call):
        ((name, args),) = call.items()
        ...

    @given(ops.scenarios(registry, max_turns=4))
    def test_my_tools_keep_the_loop_invariants(scenario):
        assert check_invariants(run_generated(scenario)) == []

Smaller pieces for your own scenarios: :func:`toolboxes` (named tools that return, raise
or run a nested exec), :func:`tool_calls` (to known and unknown tools, with arguments
valid or invalid for the tool's schema), :func:`model_turns` and :func:`scripts` (text,
tool calls, error and aborted stops, streams that end early or crash, latency on the
virtual clock), :func:`exec_args` (``tool_choice``, ``max_iterations`` from the floor to
past the hard cap, the tools menu), :func:`steering` and :func:`follow_ups`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from openprogram_sim.fuzz import _generate as _s
from openprogram_sim.fuzz import _schemas
from openprogram_sim.fuzz.tools import (
    USER_KINDS,
    TargetError,
    ToolTarget,
    UserOptions,
    tool_call_strategy,
    user_scenario_strategy,
)
from openprogram_sim.scenario import Scenario
from openprogram_sim.scenario._python import PythonRefError

__all__ = [
    "BEHAVIOURS",
    "MENUS",
    "TURN_KINDS",
    "exec_args",
    "follow_ups",
    "model_turns",
    "scenario_dicts",
    "scenarios",
    "scripts",
    "steering",
    "tool_arguments",
    "tool_calls",
    "toolboxes",
]

BEHAVIOURS = ("returns", "raises", "exec")
"""What a generated tool's body does: return a value, raise, or call exec again."""

TURN_KINDS = _s.TURN_KINDS
"""Model turn kinds: ``text``, ``calls``, ``error``/``aborted`` stops, and the faults
``truncate`` (no final event), ``raise`` (the provider crashes) and ``hang`` (waits for an
abort: for Agent tests only, a scenario file cannot abort)."""

MENUS = ("full", "list", "empty", "none")
"""How an exec picks its tools: the full registry (no ``tools:``), a ``tools:`` list,
``tools: []``, or ``toolset: none``."""

_SCENARIO_KINDS = tuple(k for k in TURN_KINDS if k != "hang")

T = TypeVar("T")


def _strategy(name: str, build: Callable[..., T], *args: Any) -> st.SearchStrategy[T]:
    """One strategy over a private builder ``build(draw, *args)``."""

    def body(draw: st.DrawFn) -> T:
        return build(_s.DrawSource(draw), *args)

    body.__name__ = body.__qualname__ = name
    return st.composite(body)()


def _check_range(name: str, value: int, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name}={value!r} must be an int")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise InvalidArgument(f"{name}={value!r} must be {bound}")


def _check_order(low_name: str, low: int, high_name: str, high: int) -> None:
    if low > high:
        raise InvalidArgument(f"{low_name}={low} is greater than {high_name}={high}")


def _check_subset(name: str, values: Collection[Any], allowed: Sequence[Any]) -> tuple[Any, ...]:
    if isinstance(values, str) or not isinstance(values, Collection):
        raise InvalidArgument(f"{name}={values!r} must be a collection drawn from {allowed}")
    chosen = tuple(values)
    bad = [v for v in chosen if v not in allowed]
    if bad:
        raise InvalidArgument(f"{name} has {bad!r}, which is not one of {', '.join(allowed)}")
    if not chosen:
        raise InvalidArgument(f"{name} is empty; give at least one of {', '.join(allowed)}")
    return tuple(v for v in allowed if v in chosen)  # the documented order, for shrinking


def _check_caps(values: Collection[Any]) -> tuple[Any, ...]:
    if isinstance(values, str) or not isinstance(values, Collection) or not values:
        raise InvalidArgument(f"max_iterations={values!r} must be a non-empty collection")
    for v in values:
        if isinstance(v, range) and len(v):
            continue
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise InvalidArgument(
                f"max_iterations has {v!r}; each value is an int, None or a non-empty range "
                "(one choice, then a value in it)"
            )
    return tuple(values)


def _check_tools(tools: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    if not isinstance(tools, Mapping):
        raise InvalidArgument(f"tools={tools!r} must map tool names to tool definitions")
    out: dict[str, dict[str, Any]] = {}
    for name, spec in tools.items():
        if not isinstance(name, str) or not name or name == "name":
            raise InvalidArgument(f"tool name {name!r} must be a non-empty str other than 'name'")
        if not isinstance(spec, Mapping):
            raise InvalidArgument(f"tools[{name!r}]={spec!r} must be a tool definition (a dict)")
        out[name] = dict(spec)
    return out


def _check_valid(valid: Any) -> bool | None:
    if valid is None or isinstance(valid, bool):
        return valid
    raise InvalidArgument(
        f"valid={valid!r} must be True (valid arguments), False (invalid ones) or None (either)"
    )


def _target(registry_or_tools: Any) -> ToolTarget:
    try:
        return ToolTarget.of(registry_or_tools)
    except (TargetError, PythonRefError) as exc:
        raise InvalidArgument(
            f"{exc}; give a ToolRegistry, a tool or a list of tools (@function, "
            "@agentic_function, {spec, execute} dicts), 'pkg.module:attr' references, or "
            "the scenario's tool definitions {name: {parameters: ...}}"
        ) from None


def tool_arguments(
    schema: Mapping[str, Any], *, valid: bool | None = True
) -> st.SearchStrategy[Any]:
    """Arguments for a tool whose parameters have the JSON Schema ``schema``, drawn from the
    schema itself (the subset tool schemas use, see docs/fuzzing.md; any other keyword
    raises :class:`~hypothesis.errors.InvalidArgument` naming it): instances of it
    (``valid=True``; objects with ``properties`` drawn without undeclared keys; small
    integers, bounds, edge sizes, empty, whitespace and non-ASCII text, ``default`` and
    ``examples`` mixed in), or (``valid=False``) arguments the tool layer rejects: an object
    with one defect (a property breaking its own schema, a required key missing, an
    undeclared key where ``additionalProperties`` is false) or text that is not a JSON
    object (a ``str``); ``valid=None``: either, mostly valid."""
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        raise InvalidArgument(f"schema={schema!r} must be a JSON Schema of type object")
    checked = _check_valid(valid)
    try:
        _schemas.check_schema(schema)
    except _schemas.UnsupportedSchema as exc:
        raise InvalidArgument(f"schema: {exc}") from None
    return _schemas.arguments(schema, checked)


def toolboxes(
    *,
    min_tools: int = 0,
    max_tools: int = 4,
    behaviours: Collection[str] = BEHAVIOURS,
    max_iterations: Collection[int | range | None] = _s.MAX_ITERATIONS,
) -> st.SearchStrategy[dict[str, dict[str, Any]]]:
    """Named tool definitions (the ``tools:`` of a scenario): each takes one of a few
    argument schemas and returns a value (or one per call), raises, or runs a nested exec
    whose menu is inherited, a list, ``[]`` or ``toolset: none``."""
    _check_range("min_tools", min_tools, 0, len(_s.TOOL_NAMES))
    _check_range("max_tools", max_tools, 0, len(_s.TOOL_NAMES))
    _check_order("min_tools", min_tools, "max_tools", max_tools)
    kinds = _check_subset("behaviours", behaviours, BEHAVIOURS)
    caps = _check_caps(max_iterations)
    return _strategy("toolboxes", _s.toolbox, min_tools, max_tools, kinds, caps)


def tool_calls(
    registry_or_tools: Any, *, valid: bool | None = None, unknown: bool = False
) -> st.SearchStrategy[dict[str, Any]]:
    """One call to one of your tools, as a scenario writes it: ``{name: arguments}`` (or the
    long form ``{name: ..., arguments: "text"}`` for arguments that are not a JSON object),
    with arguments drawn from the tool's real schema (see :func:`tool_arguments`): valid
    (``valid=True``), invalid (``False``) or either (``None``, mostly valid). With
    ``unknown=True`` some calls go to tools that do not exist.

    ``registry_or_tools``: a ``ToolRegistry``, a tool or a list of tools (``@function``,
    ``@agentic_function``, ``{spec, execute}`` dicts, ``Tool``), ``"pkg.module:attr"``
    references to them (a module: its tools), or a scenario's tool definitions
    ``{name: {parameters: ...}}``."""
    target = _target(registry_or_tools)
    if not isinstance(unknown, bool):
        raise InvalidArgument(f"unknown={unknown!r} must be a bool")
    return tool_call_strategy(target, _check_valid(valid), unknown)


def model_turns(
    tools: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    kinds: Collection[str] = _SCENARIO_KINDS,
    max_calls: int = 4,
    unknown: bool = True,
    invalid: bool = True,
    latency: bool = True,
) -> st.SearchStrategy[dict[str, Any]]:
    """One model reply (a ``model:`` item): text; up to ``max_calls`` tool calls in one round
    (see :func:`tool_calls`); an ``error`` or ``aborted`` stop, possibly carrying calls that
    must never run; a stream that ends early (``truncate``), crashes (``raise``) or hangs
    until aborted (``hang``, only when asked for in ``kinds``). Thinking and latency (on the
    virtual clock) are sprinkled in."""
    checked = _check_tools(tools or {})
    chosen = _check_subset("kinds", kinds, TURN_KINDS)
    _check_range("max_calls", max_calls, 1, 16)
    if "calls" in chosen and not checked and not unknown:
        raise InvalidArgument("kinds has 'calls' but tools is empty and unknown=False")
    return _strategy(
        "model_turns", _s.model_turn, checked, chosen, max_calls, unknown, invalid, latency
    )


def scripts(
    tools: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    min_turns: int = 1,
    max_turns: int = 8,
    spin: bool = False,
    **turn_options: Any,
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """A model script (the ``model:`` list) of :func:`model_turns`. With ``spin=True`` one
    script in 16 is 50 to 52 identical tool-call rounds and a final answer, enough to run a
    loop into the hard cap."""
    _check_range("min_turns", min_turns, 0)
    _check_range("max_turns", max_turns, 0, 200)
    _check_order("min_turns", min_turns, "max_turns", max_turns)
    checked = _check_tools(tools or {})
    turn = model_turns(checked, **turn_options)

    def build(draw: st.DrawFn) -> list[dict[str, Any]]:
        source = _s.DrawSource(draw)
        return _s.script(source, checked, min_turns, max_turns, lambda: draw(turn), spin)

    build.__name__ = build.__qualname__ = "scripts"
    return st.composite(build)()


def exec_args(
    tool_names: Collection[str] = (),
    *,
    menus: Collection[str] = MENUS,
    max_iterations: Collection[int | range | None] = _s.MAX_ITERATIONS,
) -> st.SearchStrategy[dict[str, Any]]:
    """The ``exec:`` of a scenario: a prompt, a tools menu (see :data:`MENUS`) over
    ``tool_names``, ``tool_choice`` (auto, required, none, or forced onto a tool, possibly
    one that is not offered), ``parallel_tool_calls`` and ``max_iterations`` (by default
    often not given, 0, 1 or 50, the values the cap rule turns on; else between them, past
    the hard cap or negative; a range in ``max_iterations`` is one choice)."""
    names = sorted(tool_names)
    if not all(isinstance(n, str) for n in names):
        raise InvalidArgument(f"tool_names={tool_names!r} must be strings")
    chosen = _check_subset("menus", menus, MENUS)
    return _strategy("exec_args", _s.exec_args, names, chosen, _check_caps(max_iterations))


def steering(
    *, max_points: int = 2, max_tool: int = 8, max_round: int = 4
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Steering injection points (the ``steering:`` list): each queued once the N-th tool
    call of the run has finished (``after_tool``) or round N of the outer exec has ended
    (``after_round``); no two at the same point."""
    _check_range("max_points", max_points, 0, 16)
    _check_range("max_tool", max_tool, 1)
    _check_range("max_round", max_round, 1)
    return _strategy("steering", _s.steering_points, max_points, max_tool, max_round)


def follow_ups(*, max_size: int = 2) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Follow-up messages (the ``follow_ups:`` list), queued before the run starts."""
    _check_range("max_size", max_size, 0, 16)
    return _strategy("follow_ups", _s.follow_ups, max_size)


def scenario_dicts(
    registry_or_tools: Any = None, /, **options: Any
) -> st.SearchStrategy[dict[str, Any]]:
    """Whole scenarios as the dicts a scenario file holds (no ``expect:``: a generated case
    is judged by the invariants of :mod:`openprogram_sim.fuzz`). See :func:`scenarios`."""
    if registry_or_tools is not None:
        target = _target(registry_or_tools)
        user = _user_options(options)
        try:
            return user_scenario_strategy(target, user)
        except TargetError as exc:
            raise InvalidArgument(str(exc)) from None
    allowed = set(inspect.signature(_generated_dicts).parameters)
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise InvalidArgument(
            f"unknown option(s) {', '.join(unknown)}; use {', '.join(sorted(allowed))} (or pass "
            "your tools first for scenarios over them)"
        )
    return _generated_dicts(**options)


def _generated_dicts(
    *,
    min_tools: int = 0,
    max_tools: int = 4,
    behaviours: Collection[str] = BEHAVIOURS,
    min_turns: int = 1,
    max_turns: int = 8,
    max_calls: int = 4,
    kinds: Collection[str] = _SCENARIO_KINDS,
    menus: Collection[str] = MENUS,
    max_iterations: Collection[int | range | None] = _s.MAX_ITERATIONS,
    max_steering: int = 2,
    max_follow_ups: int = 2,
    spin: bool = True,
) -> st.SearchStrategy[dict[str, Any]]:
    _check_range("min_tools", min_tools, 0, len(_s.TOOL_NAMES))
    _check_range("max_tools", max_tools, 0, len(_s.TOOL_NAMES))
    _check_order("min_tools", min_tools, "max_tools", max_tools)
    _check_range("min_turns", min_turns, 0)
    _check_range("max_turns", max_turns, 0, 200)
    _check_order("min_turns", min_turns, "max_turns", max_turns)
    _check_range("max_calls", max_calls, 1, 16)
    _check_range("max_steering", max_steering, 0, 16)
    _check_range("max_follow_ups", max_follow_ups, 0, 16)
    chosen_kinds = _check_subset("kinds", kinds, TURN_KINDS)
    if "hang" in chosen_kinds:
        raise InvalidArgument(
            "kinds has 'hang', but a scenario cannot abort, so its run would never end; "
            "use model_turns(kinds=[..., 'hang']) in an Agent test that aborts"
        )
    return _strategy(
        "scenario_dicts",
        _s.scenario_dict,
        min_tools,
        max_tools,
        _check_subset("behaviours", behaviours, BEHAVIOURS),
        min_turns,
        max_turns,
        max_calls,
        chosen_kinds,
        _check_subset("menus", menus, MENUS),
        _check_caps(max_iterations),
        max_steering,
        max_follow_ups,
        spin,
    )


def _user_options(options: dict[str, Any]) -> UserOptions:
    """The options of a scenario over your tools, checked."""
    allowed = set(UserOptions.__dataclass_fields__)
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise InvalidArgument(
            f"unknown option(s) {', '.join(unknown)} for scenarios over your tools; use "
            f"{', '.join(sorted(allowed))}"
        )
    try:
        chosen = UserOptions(**options)
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
    _check_range("min_turns", chosen.min_turns, 0)
    _check_range("max_turns", chosen.max_turns, 0, 200)
    _check_order("min_turns", chosen.min_turns, "max_turns", chosen.max_turns)
    _check_range("max_calls", chosen.max_calls, 1, 16)
    _check_range("max_steering", chosen.max_steering, 0, 16)
    _check_range("max_follow_ups", chosen.max_follow_ups, 0, 16)
    kinds = _check_subset("kinds", chosen.kinds, USER_KINDS)
    _check_valid(chosen.valid)
    timeout = chosen.timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise InvalidArgument(f"timeout={timeout!r} must be a number of seconds > 0")
    return replace(chosen, kinds=kinds, timeout=float(timeout))


def scenarios(registry_or_tools: Any = None, /, **options: Any) -> st.SearchStrategy[Scenario]:
    """Whole scenarios, validated into :class:`~openprogram_sim.scenario.Scenario`.

    Without ``registry_or_tools``: a generated toolbox (see :func:`toolboxes`), an exec call
    over it, a model script, steering points and follow-ups; options ``min_tools``,
    ``max_tools``, ``behaviours``, ``min_turns``, ``max_turns``, ``max_calls``, ``kinds``,
    ``menus``, ``max_iterations`` (drawn first; with ``spin=True`` one scenario in 16 has a
    model that keeps picking up to two rounds past that cap), ``max_steering``,
    ``max_follow_ups``, ``spin``.

    With your tools (as :func:`tool_calls` takes them; each must be importable, since a
    scenario names your Python by ``registry:`` or ``python:``): scenarios that run them for
    real, nested runs of agentic functions included, with calls from :func:`tool_calls`,
    gated tools' variables set with ``env:``, and a script that ends on text replies enough
    for nested runs to finish; options ``min_turns`` (1), ``max_turns`` (6), ``max_calls``
    (3), ``kinds`` (text, calls, error, aborted, truncate, raise), ``valid`` (None),
    ``unknown`` (True), ``max_steering`` (1), ``max_follow_ups`` (1), ``timeout`` (2.0
    seconds of real time per run, the scenario's ``timeout:``), ``unknown_tool_rate``
    (0.05: the share of calls to tools that do not exist) and ``invalid_args_rate`` (0.1:
    the share with invalid arguments). A tool whose schema uses a keyword outside the
    supported subset is left out (see docs/fuzzing.md)."""
    return scenario_dicts(registry_or_tools, **options).map(Scenario.model_validate)
