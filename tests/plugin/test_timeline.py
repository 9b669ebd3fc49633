"""The timeline tree the report draws, built in Python from a run's trace: whole trees for real
scenario runs (written from each scenario's rules, not copied from a run), the edge cases of
the trace, and the tree's way into the records and the page."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from plugin_data import BROKEN, ONE_PICK
from report_html import parse_report

from openprogram_sim.play import check_outcome, run_scenario
from openprogram_sim.report import build_timeline, render_report, run_entry, scenario_record
from openprogram_sim.scenario import load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = "Skipped due to queued user message."


def prompt(text: str, *, at: int) -> dict[str, Any]:
    return {"kind": "user", "at": [at], "label": "prompt", "text": text, "entered": False}


def entered(label: str, text: str, *, at: int) -> dict[str, Any]:
    return {"kind": "user", "at": [at], "label": label, "text": text, "entered": True}


def model(
    text: str = "",
    picks: tuple[str, ...] = (),
    stop: str = "toolUse",
    error: str | None = None,
    usage: dict[str, int] | None = None,
    *,
    at: int,
) -> dict[str, Any]:
    return {
        "kind": "model",
        "at": [at],
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
    at: tuple[int, ...],
    done: bool = True,
    is_error: bool = False,
    skipped: bool = False,
    updates: int = 0,
    nested: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    return {
        "kind": "tool",
        "at": list(at),
        "name": name,
        "args": args,
        "done": done,
        "result": result,
        "is_error": is_error,
        "skipped": skipped,
        "updates": updates,
        "nested": list(nested),
    }


def round_of(n: int, at: tuple[int, ...], *items: dict[str, Any]) -> dict[str, Any]:
    return {"n": n, "at": list(at), "items": list(items)}


def exec_(
    depth: int, reason: str | None, span: tuple[int | None, int | None], *rounds: dict[str, Any]
) -> dict[str, Any]:
    """An exec node; ``span`` is the numbers of its agent_start and agent_end."""
    start, end = span
    return {"depth": depth, "reason": reason, "start": start, "end": end, "rounds": list(rounds)}


def timeline_of(path: str) -> dict[str, Any]:
    """The timeline of a scenario file from scenarios/, as its record carries it."""
    verdict = check_outcome(run_scenario(load_scenario(ROOT / path)))
    assert verdict.passed, verdict.report()
    (run,) = scenario_record(verdict, id=path, path=path)["runs"]
    assert json.loads(json.dumps(run["timeline"])) == run["timeline"]  # plain JSON
    return run["timeline"]


# ------------------------------------------------------------------ real runs
#
# The numbers follow the loop's event order: agent_start; per round turn_start, each message's
# message_start and message_end (the prompt or an entered message, then the reply), per call
# its tool_execution_start and _end and its result message's start and end, turn_end; then
# agent_end. A nested exec's events come between its call's start and end.


def test_a_tool_round_then_a_text_round() -> None:
    assert timeline_of("scenarios/basics/one_pick.yaml") == exec_(
        0,
        "stop",
        (0, 15),
        round_of(
            1,
            (1, 10),
            prompt("What is the capital of France?", at=3),
            model(picks=("search",), at=5),
            tool(
                "search", {"q": "capital of France"}, "Paris is the capital of France.", at=(6, 7)
            ),
        ),
        round_of(2, (11, 14), model("Paris.", stop="stop", at=13)),
    )


def test_steering_skips_the_remaining_calls_and_enters_the_next_round() -> None:
    skipped = {"is_error": True, "skipped": True}
    assert timeline_of("scenarios/steering/after_tool_skips_remaining.yaml") == exec_(
        0,
        "stop",
        (0, 25),
        round_of(
            1,
            (1, 18),
            prompt("Find three things.", at=3),
            model(picks=("search", "search", "search"), at=5),
            tool("search", {"q": "a"}, "3 results", at=(6, 7)),
            tool("search", {"q": "b"}, SKIPPED, at=(10, 11), **skipped),
            tool("search", {"q": "c"}, SKIPPED, at=(14, 15), **skipped),
        ),
        round_of(
            2,
            (19, 24),
            entered("steering", "Stop, do X instead.", at=21),
            model("Switching to the new request.", stop="stop", at=23),
        ),
    )


def test_a_follow_up_enters_another_pass() -> None:
    assert timeline_of("scenarios/follow_ups/follow_up_starts_another_pass.yaml") == exec_(
        0,
        "stop",
        (0, 13),
        round_of(1, (1, 6), prompt("Check X.", at=3), model("X is fine.", stop="stop", at=5)),
        round_of(
            2,
            (7, 12),
            entered("follow-up", "Also check Y.", at=9),
            model("Y is fine too.", stop="stop", at=11),
        ),
    )


def test_a_nested_exec_hangs_under_the_call_that_opened_it() -> None:
    nested = exec_(
        1,
        "stop",
        (7, 22),
        round_of(
            1,
            (8, 17),
            prompt("read up on tides", at=10),
            model(picks=("fetch",), at=12),
            tool("fetch", {"url": "https://example.org/tides"}, "page text", at=(13, 14)),
        ),
        round_of(2, (18, 21), model("Read one page.", stop="stop", at=20)),
    )
    research = tool("research", {"topic": "tides"}, "Read one page.", at=(6, 23), nested=(nested,))
    assert timeline_of("scenarios/nested/nested_own_tools.yaml") == exec_(
        0,
        "stop",
        (0, 31),
        round_of(
            1,
            (1, 26),
            prompt("Research tides.", at=3),
            model(picks=("research",), at=5),
            research,
        ),
        round_of(2, (27, 30), model("Done.", stop="stop", at=29)),
    )


def test_the_cap_ends_the_run_after_its_last_round_of_tools() -> None:
    def polling(n: int, turn: tuple[int, int], reply: int, *first: Any) -> dict[str, Any]:
        return round_of(
            n,
            turn,
            *first,
            model(f"Polling ({n}).", picks=("poll",), at=reply),
            tool("poll", {}, "not ready", at=(reply + 1, reply + 2)),
        )

    assert timeline_of("scenarios/cap/cap_at_max_iterations.yaml") == exec_(
        0,
        "cap",
        (0, 27),
        polling(1, (1, 10), 5, prompt("Wait until the job is ready.", at=3)),
        polling(2, (11, 18), 13),
        polling(3, (19, 26), 21),
    )


def test_an_error_stop_after_a_tool_round() -> None:
    assert timeline_of("scenarios/stops/error_stop_after_tool_rounds.yaml") == exec_(
        0,
        "error",
        (0, 15),
        round_of(
            1,
            (1, 10),
            prompt("Search.", at=3),
            model(picks=("search",), at=5),
            tool("search", {"q": "a"}, "3 results", at=(6, 7)),
        ),
        round_of(2, (11, 14), model(stop="error", error="rate limited (429)", at=13)),
    )


def test_each_model_call_carries_its_usage() -> None:
    verdict = check_outcome(run_scenario(parse_scenario(ONE_PICK)))
    (run,) = scenario_record(verdict, id="one_pick", path="one_pick.yaml")["runs"]
    assert run["timeline"] == exec_(
        0,
        "stop",
        (0, 15),
        round_of(
            1,
            (1, 10),
            prompt("Find a thing.", at=3),
            model(picks=("search",), usage={"input": 12, "output": 3}, at=5),
            tool("search", {"q": "a"}, "3 results", at=(6, 7)),
        ),
        round_of(2, (11, 14), model("Found it.", stop="stop", at=13)),
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
        (0, None),
        round_of(1, (), tool("t", {}, None, at=(1, 2, 3), done=False, updates=2)),
        round_of(2, (), tool("t", None, "late", at=(5,))),
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

    def child(text: str, reason: str, start: int) -> dict[str, Any]:
        return exec_(
            1, reason, (start, start + 3), round_of(1, (start + 1,), prompt(text, at=start + 2))
        )

    host = tool(
        "t", {}, "ok", at=(2, 11), nested=(child("first", "stop", 3), child("second", "cap", 7))
    )
    after = {"kind": "nested", "at": [12], "exec": child("after the call", "stop", 12)}
    assert build_timeline({"trace": trace}) == exec_(
        0, "stop", (0, 16), round_of(1, (1,), host, after)
    )


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
        (None, None),
        round_of(
            1,
            (),
            prompt("go", at=0),
            entered("steering", "both", at=1),
            entered("follow-up", "fu", at=2),
        ),
        round_of(2, (), entered("user", "other", at=3)),
    )


def test_a_user_message_is_labelled_by_its_origin_when_the_trace_has_one() -> None:
    """The same text as prompt, steering and follow-up: the origin tells them apart."""
    trace = [
        entry("message_end", role="user", text="again", origin="prompt"),
        entry("message_end", role="user", text="again", origin="steering"),
        entry("message_end", round_=2, role="user", text="again", origin="follow_up"),
    ]
    run = {"trace": trace, "steering": ["again"], "follow_ups": ["again"]}
    assert build_timeline(run) == exec_(
        0,
        None,
        (None, None),
        round_of(1, (), prompt("again", at=0), entered("steering", "again", at=1)),
        round_of(2, (), entered("follow-up", "again", at=2)),
    )


def test_the_numbers_are_the_positions_in_the_trace_as_recorded() -> None:
    recorded = [
        entry("agent_start", round_=0),
        entry("turn_start"),
        entry("message_start", role="assistant", text=""),
        entry("message_update", role="assistant", text="Hel"),  # a recorder may keep them
        entry("message_end", role="assistant", text="Hello", stop_reason="stop"),
        entry("turn_end"),
        entry("agent_end", reason="stop"),
    ]
    run = run_entry(recorded)
    assert [e["type"] for e in run["trace"]] == [
        "agent_start",
        "turn_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert run["numbers"] == [0, 1, 4, 5, 6]
    assert run["timeline"] == exec_(
        0, "stop", (0, 6), round_of(1, (1, 5), model("Hello", stop="stop", at=4))
    )


def test_numbers_that_do_not_fit_the_trace_are_refused() -> None:
    trace = [entry("agent_start", round_=0), entry("turn_start")]
    with pytest.raises(ValueError, match=r"has 3 numbers for 2 trace entries; give one per entry"):
        build_timeline({"trace": trace, "numbers": [0, 1, 2]})


# ------------------------------------------------------------------ numbers for every scenario file

SCENARIO_FILES = sorted((ROOT / "scenarios").rglob("*.yaml"))
NOT_DRAWN = ("message_start", "message_update")
"""Entries no node is built from: left out of the report's trace (a ``message_end`` carries
the same fields). A tool result's ``message_end`` is not drawn either: its call's end shows
the result."""


def nodes(exec_node: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], int]]:
    """Every node of a tree: its kind (exec, round or an item's), itself and its exec's depth."""
    depth = exec_node["depth"]
    yield "exec", exec_node, depth
    for round_ in exec_node["rounds"]:
        yield "round", round_, depth
        for item in round_["items"]:
            yield item["kind"], item, depth
            children = item["nested"] if item["kind"] == "tool" else []
            if item["kind"] == "nested":
                children = [item["exec"]]
            for child in children:
                yield from nodes(child)


def built_from(kind: str, node: dict[str, Any], depth: int) -> list[dict[str, Any]]:
    """What the entries a node names must be, by the rules in _timeline's docstring."""
    here = {"depth": depth}
    if kind == "exec":
        return [{**here, "type": "agent_start"}, {**here, "type": "agent_end"}]
    if kind == "round":
        return [{**here, "type": t, "round": node["n"]} for t in ("turn_start", "turn_end")]
    if kind in ("user", "model"):
        role = "user" if kind == "user" else "assistant"
        return [{**here, "type": "message_end", "role": role, "text": node["text"]}]
    if kind == "tool":
        call = {**here, "tool_name": node["name"], "args": node["args"]}
        updates = [{**call, "type": "tool_execution_update"}] * node["updates"]
        end = {**call, "type": "tool_execution_end", "result": node["result"]}
        return [{**call, "type": "tool_execution_start"}, *updates, end]
    assert kind == "nested"
    return [{"depth": depth + 1, "type": "agent_start"}]


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_node_names_the_entries_it_was_built_from(path: Path) -> None:
    outcome = run_scenario(load_scenario(path))
    runs = scenario_record(check_outcome(outcome), id="x", path="x.yaml")["runs"]
    # what a failure's diff numbers: the trace; a conversation's exec's own part of it (each
    # exec is a run of the record, and its failures number from its first entry)
    parts = [s.trace for s in outcome.steps] if outcome.scenario.conversation else [outcome.trace]
    assert len(runs) == len(parts)
    for run, recorded in zip(runs, parts, strict=True):
        _check_numbers(run, recorded)


def _check_numbers(run: dict[str, Any], recorded: list[dict[str, Any]]) -> None:
    named: list[int] = []
    for kind, node, depth in nodes(run["timeline"]):
        at = (
            [n for n in (node["start"], node["end"]) if n is not None]
            if kind == "exec"
            else node["at"]
        )
        assert at or kind == "round", (kind, node)
        wanted = built_from(kind, node, depth)
        if kind == "tool" and not node["done"]:
            wanted = wanted[:-1]
        assert len(at) == len(wanted), (kind, node)
        for number, want in zip(at, wanted, strict=True):
            entry = recorded[number]
            assert {k: entry.get(k) for k in want} == want, (number, entry, kind, node)
        if kind != "nested":  # its exec names its agent_start
            named += at
    drawn = [
        i
        for i, e in enumerate(recorded)
        if e["type"] not in NOT_DRAWN
        and not (e["type"] == "message_end" and e["role"] == "toolResult")
    ]
    assert sorted(named) == drawn  # each entry on one node, and no other


def test_the_numbers_a_failures_diff_names_are_on_the_timeline() -> None:
    verdict = check_outcome(run_scenario(parse_scenario(BROKEN)))
    record = scenario_record(verdict, id="broken", path="broken.yaml")
    (run,) = record["runs"]
    kept = dict(zip(run["numbers"], run["trace"], strict=True))
    lines = re.findall(r"#(\d+) +(\w+) +d(\d+) r(\d+)", record["failure"])
    # the previous match, then the closest actual event and three each side
    assert len(lines) == 8, record["failure"]
    for number, type_, depth, round_ in lines:
        if type_ in NOT_DRAWN:
            assert int(number) not in kept
            continue
        shown = kept[int(number)]  # the raw view's line #number
        assert (shown["type"], shown["depth"], shown["round"]) == (type_, int(depth), int(round_))
    found = re.search(r"closest actual tool_execution_end: #(\d+)", record["failure"])
    assert found is not None
    closest = int(found.group(1))
    (item,) = [node for _, node, _ in nodes(run["timeline"]) if closest in node.get("at", ())]
    assert item["kind"] == "tool" and item["args"] == {"q": "b"} and item["skipped"]
    assert item["at"] == [closest - 1, closest]  # its start and end: the call drawn as #10 to #11


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
    assert shown["numbers"] == run["numbers"] == [0, 1, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15]
