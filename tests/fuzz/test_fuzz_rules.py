"""The seed's rules applied to a scenario without running the loop (``_rules.predict``) and
the regression expectations built on them: hand-written cases where the seed says what
must happen, and the real loop agreeing with the prediction on generated scenarios and on
the scenario library (a prediction the correct loop misses would lock a bug in)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from openprogram.agent import agent_loop
from openprogram_sim.fuzz import UnpredictableScenario, derive_expect, run_generated, strategies
from openprogram_sim.fuzz._rules import effective_cap
from openprogram_sim.fuzz.loop import _predict as _rules
from openprogram_sim.fuzz.loop._predict import EXHAUSTED_TURN, predict
from openprogram_sim.fuzz.loop._regression import regression_document
from openprogram_sim.play import check_outcome
from openprogram_sim.scenario import ExecArgs, ModelTurn, Scenario, ToolDef, discover, load_scenario

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"


def _scenario(**data: Any) -> Scenario:
    data.setdefault("exec", {"content": "go"})
    return Scenario.model_validate({"scenario": "t", **data})


def _predict(**data: Any) -> Any:
    """The prediction for a scenario, once the real loop has passed the regression file the
    prediction gives (so each case below states what the loop does, not only the rules)."""
    scenario = _scenario(**data)
    document = regression_document(scenario, [])
    verdict = check_outcome(run_generated(Scenario.model_validate(document)))
    assert verdict.passed, verdict.report()
    return predict(scenario)


def _ends(events: list[dict[str, Any]]) -> list[tuple[int, str, bool, bool]]:
    return [
        (e["depth"], e["tool_call_id"], e["is_error"], e["skipped"])
        for x in events
        if (e := x.get("tool_execution_end"))
    ]


SEARCH = {"search": {"parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}


@pytest.mark.parametrize(
    ("max_iterations", "cap"),
    [(None, 50), (0, 1), (-3, 1), (1, 1), (7, 7), (50, 50), (51, 50), (200, 50)],
)
def test_the_cap_is_the_seeds(max_iterations: int | None, cap: int) -> None:
    assert effective_cap(max_iterations) == cap


@pytest.mark.parametrize(("max_iterations", "calls"), [(0, 1), (1, 1), (3, 3), (None, 6)])
def test_a_model_that_keeps_picking_is_stopped_at_the_cap(
    max_iterations: int | None, calls: int
) -> None:
    picks = [{"tool_calls": [{"search": {"q": "a"}}]} for _ in range(5)] + [{"text": "done"}]
    exec_ = {"content": "go", "max_iterations": max_iterations}
    p = _predict(tools=SEARCH, exec=exec_, model=picks)
    assert p.model_calls == calls
    assert [t.get("text") for t in p.script] == [t.get("text") for t in picks[:calls]]
    assert (p.reason, p.raises, p.result) == (
        ("stop", None, "done") if calls == 6 else ("cap", None, "")
    )
    assert p.events[-1] == {"agent_end": {"depth": 0, "reason": p.reason}}


def test_a_call_past_the_script_is_a_crash_that_exec_raises() -> None:
    p = _predict(tools=SEARCH, model=[{"tool_calls": [{"search": {}}]}])
    assert p.script[1] == EXHAUSTED_TURN
    assert (p.reason, p.raises, p.result) == ("error", "ModelError", None)
    expect = derive_expect(_scenario(tools=SEARCH, model=p.script))
    assert expect["raises"] == {"type": "ModelError"} and "result" not in expect


def test_an_error_stop_runs_none_of_its_calls_but_numbers_them() -> None:
    model = [
        {"tool_calls": [{"search": {}}], "stop_reason": "aborted"},
        {"tool_calls": [{"search": {}}]},
    ]
    p = _predict(tools=SEARCH, model=model)
    assert (p.model_calls, p.reason, p.raises) == (1, "aborted", "RunAbortedError")
    assert p.counts["tool_execution_end"] == 0
    later = _predict(tools=SEARCH, model=[model[1], {"text": "ok"}])
    assert _ends(later.events) == [(0, "call_1", False, False)]


def test_every_call_gets_one_result_in_order_with_errors_as_data() -> None:
    tools = {**SEARCH, "boom": {"raises": "no"}, "soft": {"returns": {"$error": "bad"}}}
    calls = [{"search": {"q": "a"}}, {"nope": {}}, {"search": {"q": [3]}}, {"boom": {}}]
    calls += [{"soft": {}}, {"name": "search", "arguments": "not json", "id": "mine"}]
    p = _predict(tools=tools, model=[{"tool_calls": calls}, {"text": "ok"}])
    assert _ends(p.events) == [
        (0, "call_1", False, False),
        (0, "call_2", True, False),  # unknown tool
        (0, "call_3", True, False),  # invalid arguments
        (0, "call_4", True, False),  # raises
        (0, "call_5", True, False),  # returns an error result
        (0, "mine", True, False),  # not a JSON object; an explicit id takes no number
    ]
    results = [
        e["message_end"] for e in p.events if e.get("message_end", {}).get("role") == "toolResult"
    ]
    assert [m["tool_call_id"] for m in results] == [
        "call_1",
        "call_2",
        "call_3",
        "call_4",
        "call_5",
        "mine",
    ]
    assert p.requests[1]["message_count"] == 1 + 1 + 6
    assert p.requests[1]["last_message"] == {"role": "toolResult", "tool_name": "search"}


def test_steering_skips_the_rest_of_the_batch_and_opens_the_next_round() -> None:
    calls = [{"search": {"q": "a"}}, {"search": {"q": "b"}}, {"search": {"q": "c"}}]
    steering = [{"after_tool": 1, "text": "A"}, {"after_tool": 1, "text": "B"}]
    steering.append({"after_tool": 9, "text": "never"})
    model = [{"tool_calls": calls}, {"text": "done"}]
    p = _predict(tools=SEARCH, model=model, steering=steering)
    assert _ends(p.events) == [
        (0, "call_1", False, False),
        (0, "call_2", True, True),
        (0, "call_3", True, True),
    ]
    skipped = [e for x in p.events if (e := x.get("tool_execution_end")) and e["skipped"]]
    assert all(
        e["result"] == {"$regex": r"^Skipped due to queued user message\.?$"} for e in skipped
    )
    delivered = [
        e["message_end"]["text"] for e in p.events if e.get("message_end", {}).get("role") == "user"
    ]
    assert delivered == ["A", "B"]  # every entry at one point, in file order
    assert p.fired == [0, 1] and p.skipped == 2 and p.result == "done"
    # the regression file keeps only the entries whose point is reached
    document = regression_document(_scenario(tools=SEARCH, model=model, steering=steering), [])
    assert [s["text"] for s in document["steering"]] == ["A", "B"]


def test_queued_messages_keep_the_loop_alive_after_a_text_reply_within_the_cap() -> None:
    model = [{"text": "first"}, {"text": "second"}, {"text": "third"}]
    steering = [{"after_round": 1, "text": "more"}]
    p = _predict(model=model, steering=steering, follow_ups=[{"text": "again"}])
    assert (p.model_calls, p.reason, p.result) == (3, "stop", "third")
    capped = _scenario(model=model, steering=steering, follow_ups=[{"text": "again"}])
    capped = capped.model_copy(
        update={"exec": capped.exec.model_copy(update={"max_iterations": 2})}
    )
    assert (predict(capped).model_calls, predict(capped).reason) == (2, "cap")


def test_nested_runs_share_the_script_and_steering_reaches_only_the_outer_run() -> None:
    tools = {
        **SEARCH,
        "deep": {"exec": {"content": "look", "max_iterations": 1}},
    }
    model = [
        {"tool_calls": [{"deep": {}}, {"search": {}}]},  # outer round 1
        {"tool_calls": [{"search": {}}]},  # the nested run: one round, its cap
        {"text": "outer done"},
    ]
    steering = [{"after_tool": 1, "text": "stop"}]  # the nested search's end
    p = _predict(tools=tools, model=model, steering=steering)
    assert _ends(p.events) == [
        (1, "call_3", False, False),  # nested calls are never skipped
        (0, "call_1", False, False),  # deep returns: its run ended at the cap, no error
        (0, "call_2", True, True),  # skipped once deep has finished
    ]
    nested = [x for x in p.events if x.get("agent_start") or x.get("agent_end", {}).get("depth")]
    assert nested == [{"agent_start": {"depth": 1}}, {"agent_end": {"depth": 1, "reason": "cap"}}]
    assert (p.model_calls, p.result) == (3, "outer done")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"exec": {"content": "go", "choices": ["a", "b"]}}, "choices"),
        ({"abort": {"after_round": 1}}, "abort"),
        ({"model": [{"fault": "hang"}]}, "hang"),
        ({"exec": {"content": "go", "toolset": "research"}}, "named toolset"),
        ({"exec": {"content": "go", "tools_allow": ["search"]}}, "tools_allow"),
        ({"tools": {"search": {"defer": True}}}, "deferred or gated"),
        (
            {
                "model": [
                    {"tool_calls": [{"name": "search", "id": "x"}, {"name": "search", "id": "x"}]}
                ]
            },
            "tool call id",
        ),
        ({"tools": {"deep": {"exec": {"content": "{0}"}}}, "model": [{"deep": {}}]}, "format"),
    ],
)
def test_what_the_rules_do_not_decide_is_refused(change: dict[str, Any], message: str) -> None:
    data: dict[str, Any] = {"tools": SEARCH, "model": [{"text": "ok"}], **change}
    if change.get("tools", {}).get("deep"):
        data["model"] = [{"tool_calls": [{"deep": {}}]}, {"text": "ok"}]
    with pytest.raises(UnpredictableScenario, match=message):
        predict(_scenario(**data))


def test_the_expectations_do_not_move_with_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the loop's own cap and skip text, the derived expectations are the same:
    they read the scenario and the seed, not the code under test."""
    scenario = load_scenario(LIBRARY / "cap" / "floor_zero_runs_one_round.yaml")
    before = derive_expect(scenario)
    monkeypatch.setattr(agent_loop, "effective_cap", lambda n: 7)
    monkeypatch.setattr(agent_loop, "MAX_INNER_ITERATIONS", 3)
    monkeypatch.setattr(agent_loop, "SKIPPED_TEXT", "nope")
    assert derive_expect(scenario) == before
    assert before["model_calls"] == 1


@settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(strategies.scenario_dicts(max_steering=3, max_follow_ups=2))
def test_a_correct_loop_passes_every_regression_file_the_rules_give(data: dict[str, Any]) -> None:
    document = regression_document(Scenario.model_validate(data), ["a violation"])
    verdict = check_outcome(run_generated(Scenario.model_validate(document)))
    assert verdict.passed, verdict.report()


def test_the_scenario_library_agrees_with_the_rules() -> None:
    decided = 0
    for path in discover([LIBRARY]):
        scenario = load_scenario(path)
        try:
            document = regression_document(scenario, [])
        except UnpredictableScenario:
            continue
        decided += 1
        verdict = check_outcome(run_generated(Scenario.model_validate(document)))
        assert verdict.passed, f"{path}:\n{verdict.report()}"
    assert decided >= 40


def test_a_key_the_rules_were_not_taught_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys added to the format later are refused until the rules learn them, never
    silently ignored; the keys they know are all real."""
    models = {"scenario": Scenario, "exec": ExecArgs, "tool": ToolDef, "turn": ModelTurn}
    for kind, model in models.items():
        assert _rules._KNOWN[kind] <= set(model.model_fields), kind
    scenario = _scenario(tools=SEARCH, model=[{"text": "ok", "latency": 1.0}])
    predict(scenario)
    monkeypatch.setitem(_rules._KNOWN, "turn", _rules._KNOWN["turn"] - {"latency"})
    with pytest.raises(UnpredictableScenario, match=r"turn key\(s\) \['latency'\]"):
        predict(scenario)
