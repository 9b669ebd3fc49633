"""The invariants hold on the scenario library and catch each kind of broken trace: real
traces, mutated one way each."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from openprogram_sim.fuzz import check_invariants, check_trace, run_generated
from openprogram_sim.play import RunOutcome
from openprogram_sim.scenario import discover, load_scenario

ROOT = Path(__file__).resolve().parents[2]
Trace = list[dict[str, Any]]


def _run(name: str) -> RunOutcome:
    return run_generated(load_scenario(ROOT / "scenarios" / name))


def test_the_scenario_library_keeps_every_invariant() -> None:
    loop = asyncio.new_event_loop()
    try:
        checked = 0
        for path in discover([ROOT / "scenarios"]):
            scenario = load_scenario(path)
            if scenario.exec.choices is not None or "regression" in scenario.tags:
                continue  # a decision re-asks in a second run; regressions fail on purpose
            outcome = run_generated(scenario, loop=loop)
            replay = run_generated(scenario, loop=loop)
            assert check_invariants(outcome, replay=replay) == [], path
            checked += 1
        assert checked >= 50
    finally:
        loop.close()


def _index(trace: Trace, **fields: Any) -> int:
    return next(i for i, e in enumerate(trace) if all(e.get(k) == v for k, v in fields.items()))


def _drop(**fields: Any) -> Callable[[Trace], None]:
    return lambda t: t.pop(_index(t, **fields))


def _duplicate_agent_end(t: Trace) -> None:
    t.append(dict(t[-1]))


def _swap_tool_order(t: Trace) -> None:
    starts = [i for i, e in enumerate(t) if e["type"] == "tool_execution_start"]
    t[starts[0]]["tool_name"], t[starts[1]]["tool_name"] = "other", t[starts[0]]["tool_name"]


def _tool_after_error(t: Trace) -> None:
    at = _index(t, type="message_end", role="assistant")
    t[at]["stop_reason"] = "error"
    end = _index(t, type="turn_end")
    t[end]["stop_reason"] = "error"


def _skip(which: int) -> Callable[[Trace], None]:
    def mutate(t: Trace) -> None:
        ends = [e for e in t if e["type"] == "tool_execution_end"]
        skip = {"result": "Skipped due to queued user message.", "is_error": True, "skipped": True}
        ends[which].update(skip)

    return mutate


def _left_unrun(t: Trace) -> None:
    """The last call of the first batch answered as an abort answers it, yet the run goes on."""
    ends = [e for e in t if e["type"] == "tool_execution_end"]
    ends[-1].update(result="Not run: the run was aborted.", is_error=True, skipped=True)


def _non_json(t: Trace) -> None:
    t[-1]["reason"] = {"not", "json"}


def _set_last(key: Any, value: Any) -> Callable[[Trace], None]:
    def mutate(t: Trace) -> None:
        t[-1][key] = value

    return mutate


MUTATIONS = [
    ("basics/several_picks_in_order.yaml", _duplicate_agent_end, "after the outer run's agent_end"),
    ("basics/several_picks_in_order.yaml", _drop(type="agent_end"), "no agent_end"),
    ("basics/several_picks_in_order.yaml", _drop(type="turn_end"), "still open"),
    ("basics/several_picks_in_order.yaml", _drop(type="tool_execution_end"), "tool call is open"),
    ("basics/several_picks_in_order.yaml", _drop(role="toolResult", type="message_end"), "open"),
    (
        "basics/several_picks_in_order.yaml",
        _drop(role="toolResult", type="message_start"),
        "without its message_start",
    ),
    ("basics/several_picks_in_order.yaml", _swap_tool_order, "calls run in order"),
    ("basics/several_picks_in_order.yaml", _tool_after_error, "ran after a error stop"),
    ("basics/several_picks_in_order.yaml", _skip(0), "first call of a round"),
    ("basics/several_picks_in_order.yaml", _skip(1), "a call ran after a skipped one"),
    ("basics/several_picks_in_order.yaml", _skip(-1), "does not open with the steering"),
    ("basics/several_picks_in_order.yaml", _left_unrun, "went on after leaving calls unrun"),
    ("nested/nested_inherits_tools.yaml", _drop(type="agent_start", depth=1), "depth 1 while"),
    ("basics/one_pick.yaml", _non_json, "not JSON-serializable"),
    ("basics/one_pick.yaml", _set_last("reason", ("a", "tuple")), "JSON round trip"),
    ("basics/one_pick.yaml", _set_last(1, "an int key"), "JSON round trip"),
    ("basics/one_pick.yaml", _set_last("usage", float("nan")), "JSON round trip"),
]


@pytest.mark.parametrize(("name", "mutate", "expected"), MUTATIONS)
def test_each_broken_trace_is_caught(
    name: str, mutate: Callable[[Trace], None], expected: str
) -> None:
    trace = copy.deepcopy(_run(name).trace)
    assert check_trace(trace) == []
    mutate(trace)
    problems = check_trace(trace)
    assert problems and expected in "\n".join(problems), problems


def test_the_cap_of_each_run_is_checked() -> None:
    outcome = _run("cap/cap_at_max_iterations.yaml")
    rounds = max(e["round"] for e in outcome.trace)
    assert check_trace(outcome.trace, cap_for=lambda depth, tool: rounds) == []
    problems = check_trace(outcome.trace, cap_for=lambda depth, tool: rounds - 1)
    assert any(f"exceeds the cap of {rounds - 1}" in p for p in problems), problems


def test_outcome_checks_exceptions_results_queues_and_replays() -> None:
    outcome = _run("steering/after_tool_skips_remaining.yaml")
    assert check_invariants(outcome) == []
    wrong = copy.copy(outcome)
    wrong.error = KeyError("boom")
    assert "undocumented exception left exec: KeyError" in check_invariants(wrong)[0]
    wrong = copy.copy(outcome)
    wrong.result = "something else"
    assert "not the final assistant text" in check_invariants(wrong)[0]
    wrong = copy.copy(outcome)
    wrong.scenario = outcome.scenario.model_copy(update={"steering": []})
    assert any("skipped" in p for p in check_invariants(wrong))
    other = _run("basics/one_pick.yaml")
    assert any("another trace" in p for p in check_invariants(outcome, replay=other))


def test_a_conversation_is_checked_exec_by_exec() -> None:
    """Each step of a conversation is a run of its own: its agent_start after the previous
    step's agent_end is no violation, and a broken step is named by its number."""
    outcome = _run("conversation/continue_after_abort.yaml")
    assert len(outcome.steps) == 2
    assert check_invariants(outcome) == []
    last_end = max(i for i, e in enumerate(outcome.trace) if e["type"] == "agent_end")
    del outcome.trace[last_end]
    problems = check_invariants(outcome)
    assert problems and all(p.startswith("exec 2: ") for p in problems), problems
