"""The timeline tree the report draws, built in Python from a run's trace: whole trees for real
scenario runs (written from each scenario's rules, not copied from a run), the edge cases of
the trace, and the tree's way into the records and the page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from plugin_data import ONE_PICK
from report_html import parse_report

from openprogram_sim.report import build_timeline, render_report, scenario_record
from openprogram_sim.scenario import check_outcome, load_scenario, parse_scenario, run_scenario

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = "Skipped due to queued user message."


def prompt(text: str) -> dict[str, Any]:
    return {"kind": "user", "label": "prompt", "text": text, "entered": False}


def entered(label: str, text: str) -> dict[str, Any]:
    return {"kind": "user", "label": label, "text": text, "entered": True}


def model(
    text: str = "",
    picks: tuple[str, ...] = (),
    stop: str = "toolUse",
    error: str | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    return {
        "kind": "model",
        "text": text,
        "picks": list(picks),
        "stop": stop,
        "error": error,
        "usage": usage,
    }


def tool(
    name: str,
    args: Any,
    result: str | None,
    *,
    done: bool = True,
    is_error: bool = False,
    skipped: bool = False,
    updates: int = 0,
    nested: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    return {
        "kind": "tool",
        "name": name,
        "args": args,
        "done": done,
        "result": result,
        "is_error": is_error,
        "skipped": skipped,
        "updates": updates,
        "nested": list(nested),
    }


def exec_(depth: int, reason: str | None, rounds: dict[int, list[Any]]) -> dict[str, Any]:
    return {
        "depth": depth,
        "reason": reason,
        "rounds": [{"n": n, "items": items} for n, items in rounds.items()],
    }


def timeline_of(path: str) -> dict[str, Any]:
    """The timeline of a scenario file from scenarios/, as its record carries it."""
    verdict = check_outcome(run_scenario(load_scenario(ROOT / path)))
    assert verdict.passed, verdict.report()
    (run,) = scenario_record(verdict, id=path, path=path)["runs"]
    assert json.loads(json.dumps(run["timeline"])) == run["timeline"]  # plain JSON
    return run["timeline"]


# ------------------------------------------------------------------ real runs


def test_a_tool_round_then_a_text_round() -> None:
    assert timeline_of("scenarios/basics/one_pick.yaml") == exec_(
        0,
        "stop",
        {
            1: [
                prompt("What is the capital of France?"),
                model(picks=("search",)),
                tool("search", {"q": "capital of France"}, "Paris is the capital of France."),
            ],
            2: [model("Paris.", stop="stop")],
        },
    )


def test_steering_skips_the_remaining_calls_and_enters_the_next_round() -> None:
    assert timeline_of("scenarios/steering/after_tool_skips_remaining.yaml") == exec_(
        0,
        "stop",
        {
            1: [
                prompt("Find three things."),
                model(picks=("search", "search", "search")),
                tool("search", {"q": "a"}, "3 results"),
                tool("search", {"q": "b"}, SKIPPED, is_error=True, skipped=True),
                tool("search", {"q": "c"}, SKIPPED, is_error=True, skipped=True),
            ],
            2: [
                entered("steering", "Stop, do X instead."),
                model("Switching to the new request.", stop="stop"),
            ],
        },
    )


def test_a_follow_up_enters_another_pass() -> None:
    assert timeline_of("scenarios/follow_ups/follow_up_starts_another_pass.yaml") == exec_(
        0,
        "stop",
        {
            1: [prompt("Check X."), model("X is fine.", stop="stop")],
            2: [entered("follow-up", "Also check Y."), model("Y is fine too.", stop="stop")],
        },
    )


def test_a_nested_exec_hangs_under_the_call_that_opened_it() -> None:
    nested = exec_(
        1,
        "stop",
        {
            1: [
                prompt("read up on tides"),
                model(picks=("fetch",)),
                tool("fetch", {"url": "https://example.org/tides"}, "page text"),
            ],
            2: [model("Read one page.", stop="stop")],
        },
    )
    assert timeline_of("scenarios/nested/nested_own_tools.yaml") == exec_(
        0,
        "stop",
        {
            1: [
                prompt("Research tides."),
                model(picks=("research",)),
                tool("research", {"topic": "tides"}, "Read one page.", nested=(nested,)),
            ],
            2: [model("Done.", stop="stop")],
        },
    )


def test_the_cap_ends_the_run_after_its_last_round_of_tools() -> None:
    rounds = {
        n: [model(f"Polling ({n}).", picks=("poll",)), tool("poll", {}, "not ready")]
        for n in (1, 2, 3)
    }
    rounds[1].insert(0, prompt("Wait until the job is ready."))
    assert timeline_of("scenarios/cap/cap_at_max_iterations.yaml") == exec_(0, "cap", rounds)


def test_an_error_stop_after_a_tool_round() -> None:
    assert timeline_of("scenarios/stops/error_stop_after_tool_rounds.yaml") == exec_(
        0,
        "error",
        {
            1: [
                prompt("Search."),
                model(picks=("search",)),
                tool("search", {"q": "a"}, "3 results"),
            ],
            2: [model(stop="error", error="rate limited (429)")],
        },
    )


def test_each_model_call_carries_its_usage() -> None:
    verdict = check_outcome(run_scenario(parse_scenario(ONE_PICK)))
    (run,) = scenario_record(verdict, id="one_pick", path="one_pick.yaml")["runs"]
    assert run["timeline"] == exec_(
        0,
        "stop",
        {
            1: [
                prompt("Find a thing."),
                model(picks=("search",), usage={"input": 12, "output": 3}),
                tool("search", {"q": "a"}, "3 results"),
            ],
            2: [model("Found it.", stop="stop")],
        },
    )


# ------------------------------------------------------------------ edge cases of a trace


def entry(type_: str, depth: int = 0, round_: int = 1, **fields: Any) -> dict[str, Any]:
    return {"type": type_, "depth": depth, "round": round_, **fields}


def call(id_: str, depth: int = 0, round_: int = 1) -> dict[str, Any]:
    return entry("tool_execution_start", depth, round_, tool_call_id=id_, tool_name="t", args={})


def end(id_: str, result: str, depth: int = 0, round_: int = 1, **fields: Any) -> dict[str, Any]:
    fields.setdefault("is_error", False)
    return entry(
        "tool_execution_end",
        depth,
        round_,
        tool_call_id=id_,
        tool_name="t",
        result=result,
        **fields,
    )


def test_a_skip_is_the_flag_never_the_text() -> None:
    trace = [
        call("flagged"),
        end("flagged", "skipped, in other words", is_error=True, skipped=True),
        call("not flagged"),
        end("not flagged", SKIPPED, is_error=True, skipped=False),
        call("old trace"),
        end("old trace", SKIPPED, is_error=True),
        call("old trace, no error"),
        end("old trace, no error", SKIPPED),
    ]
    (round_,) = build_timeline({"trace": trace})["rounds"]
    assert [(item["is_error"], item["skipped"]) for item in round_["items"]] == [
        (True, True),
        (True, False),
        (True, False),
        (False, False),
    ]


def test_a_call_without_an_end_and_an_end_without_a_call() -> None:
    trace = [
        entry("agent_start", round_=0),
        call("a"),
        entry("tool_execution_update", tool_call_id="a"),
        entry("tool_execution_update", tool_call_id="a"),
        entry("tool_execution_update", tool_call_id="unknown"),
        end("b", "late", round_=2),
    ]
    assert build_timeline({"trace": trace}) == exec_(
        0,
        None,  # no agent_end: the trace ended first
        {
            1: [tool("t", {}, None, done=False, updates=2)],
            2: [tool("t", None, "late")],
        },
    )


def test_nested_execs_in_one_call_and_one_no_call_is_running_for() -> None:
    def nested(text: str, reason: str) -> list[dict[str, Any]]:
        return [
            entry("agent_start", 1, 0),
            entry("turn_start", 1),
            entry("message_end", 1, role="user", text=text),
            entry("agent_end", 1, reason=reason),
        ]

    trace = [
        entry("agent_start", round_=0),
        entry("turn_start"),
        call("c"),
        *nested("first", "stop"),
        *nested("second", "cap"),
        end("c", "ok"),
        *nested("after the call", "stop"),
        entry("agent_end", reason="stop"),
    ]

    def child(text: str, reason: str) -> dict[str, Any]:
        return exec_(1, reason, {1: [prompt(text)]})

    host = tool("t", {}, "ok", nested=(child("first", "stop"), child("second", "cap")))
    after = {"kind": "nested", "exec": child("after the call", "stop")}
    assert build_timeline({"trace": trace}) == exec_(0, "stop", {1: [host, after]})


def test_a_later_user_message_is_labelled_by_the_texts_the_run_was_given() -> None:
    trace = [
        entry("message_end", role="user", text="go"),
        entry("message_end", role="user", text="both"),
        entry("message_end", role="user", text="fu"),
        entry("message_end", round_=2, role="user", text="other"),
    ]
    run = {"trace": trace, "steering": ["both"], "follow_ups": ["fu", "both"]}
    assert build_timeline(run) == exec_(
        0,
        None,
        {
            1: [prompt("go"), entered("steering", "both"), entered("follow-up", "fu")],
            2: [entered("user", "other")],
        },
    )


# ------------------------------------------------------------------ records and the page


def test_the_page_carries_each_runs_timeline_and_its_raw_trace() -> None:
    verdict = check_outcome(run_scenario(load_scenario(ROOT / "scenarios/basics/one_pick.yaml")))
    record = scenario_record(verdict, id="one_pick", path="one_pick.yaml")
    (run,) = record["runs"]
    assert run["timeline"] == build_timeline(run)
    (row,) = parse_report(render_report([record])).rows
    (shown,) = row["runs"]
    assert shown["timeline"] == run["timeline"]
    assert shown["trace"] == run["trace"]  # for the raw events view
