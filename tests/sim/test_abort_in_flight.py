"""Aborts that land while something is in flight: ``abort: {during_tool: N}`` (the N-th tool
call is running: a simulated tool waits for it, an async tool of the user's is interrupted at
its await, a sync one runs with the abort requested) and ``abort: {during_turn: N}`` for a
reply that waits before its first streamed piece (latency, or a model that hangs without
sending a byte)."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support import OPENING, compact, ended_by_first_reply, run_cli

from openprogram_sim import (
    ScenarioError,
    check_outcome,
    load_scenario,
    parse_scenario,
    run_scenario,
)

BATCH = """\
scenario: an abort while the second call of a batch runs
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}}
    returns: "hit"
  fetch:
    parameters: {type: object, properties: {url: {type: string}}}
    returns: "page"
exec: {content: "Look it up."}
model:
  - tool_calls: [{search: {q: a}}, {fetch: {url: x}}, {search: {q: b}}]
abort: {during_tool: 2}
"""


def test_during_tool_cancels_the_call_in_flight_and_skips_the_rest() -> None:
    outcome = run_scenario(parse_scenario(BATCH, "batch.yaml"))
    assert type(outcome.error).__name__ == "RunAbortedError"
    assert compact(outcome.trace) == [
        *OPENING,
        "message_end:assistant[search,fetch,search]/toolUse",
        "tool_start:search",
        "tool_end:search:ok",
        "message_start:toolResult",
        "message_end:toolResult",
        "tool_start:fetch",
        "tool_end:fetch:error",
        "message_start:toolResult",
        "message_end:toolResult",
        "tool_start:search",
        "tool_end:search:error",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end:aborted",
    ]
    ends = [e for e in outcome.trace if e["type"] == "tool_execution_end"]
    # the second call was running (it is no skip): its result says it was cancelled
    assert [(e["result"], e["skipped"], e["error_kind"]) for e in ends] == [
        ("hit", False, None),
        ("Cancelled", False, "cancelled"),
        ("Not run: the run was aborted.", True, "skipped"),
    ]
    assert check_outcome(outcome).failures[0].title == (
        "exec raised, and the scenario expects no error"
    )


def test_during_tool_inside_a_nested_exec_aborts_both_execs() -> None:
    text = """\
scenario: nested
tools:
  search: {returns: "hit"}
  research:
    parameters: {type: object, properties: {topic: {type: string}}}
    exec: {content: "look into {topic}"}
exec: {content: "Research owls.", tools: [research, search]}
model:
  - tool_calls: [{research: {topic: owls}}]
  - tool_calls: [{search: {q: owls}}]
abort: {during_tool: 2}
expect:
  raises: {type: RunAbortedError}
  events:
    - tool_execution_end: {depth: 1, tool_name: search, error_kind: cancelled}
    - agent_end: {depth: 1, reason: aborted}
    - tool_execution_end: {depth: 0, tool_name: research, is_error: true}
    - agent_end: {depth: 0, reason: aborted}
"""
    verdict = check_outcome(run_scenario(parse_scenario(text, "nested.yaml")))
    assert verdict.passed, verdict.report()


TOOLS = '''
import asyncio

from openprogram import ToolRegistry, function

registry = ToolRegistry()
LOG: list[str] = []


@function(registry=registry)
async def fetch(url: str) -> str:
    """Fetch a page, slowly."""
    LOG.append("fetch started")
    await asyncio.sleep(30)
    LOG.append("fetch finished")
    return "page"


@function(registry=registry)
def save(title: str, signal=None) -> str:
    """Save, seeing whether the run was aborted."""
    LOG.append(f"save ran, aborted: {signal.is_set()}")
    return "saved"
'''


@pytest.fixture
def tools_module(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    name = f"slow_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(TOOLS)
    yield tmp_path, name
    sys.modules.pop(name, None)


def _user_run(where: tuple[Path, str], body: str) -> tuple[object, list[str]]:
    folder, name = where
    path = folder / "case.yaml"
    path.write_text(textwrap.dedent(body).replace("MOD", name))
    outcome = run_scenario(load_scenario(path))
    return outcome, sys.modules[name].LOG


def test_during_tool_interrupts_an_async_tool_of_yours_at_its_await(
    tools_module: tuple[Path, str],
) -> None:
    outcome, log = _user_run(
        tools_module,
        """\
        scenario: a slow fetch, aborted
        tools: {fetch: {python: "MOD:fetch"}}
        exec: {content: "Fetch it."}
        model:
          - tool_calls: [{fetch: {url: x}}]
        abort: {during_tool: 1}
        expect:
          raises: {type: RunAbortedError}
          events:
            - tool_execution_end: {tool_name: fetch, result: "Cancelled", error_kind: cancelled}
            - agent_end: {reason: aborted}
        """,
    )
    assert log == ["fetch started"]  # it was awaiting when the abort landed, and never ended
    assert outcome.duration < 5  # type: ignore[attr-defined]
    verdict = check_outcome(outcome)  # type: ignore[arg-type]
    assert verdict.passed, verdict.report()


def test_during_tool_runs_a_sync_tool_of_yours_with_the_abort_requested(
    tools_module: tuple[Path, str],
) -> None:
    outcome, log = _user_run(
        tools_module,
        """\
        scenario: a sync save, aborted
        tools: {save: {python: "MOD:save"}}
        exec: {content: "Save both."}
        model:
          - tool_calls: [{save: {title: a}}, {save: {title: b}}]
        abort: {during_tool: 1}
        expect:
          raises: {type: RunAbortedError}
          events:
            - tool_execution_end: {args: {title: a}, result: "saved", is_error: false}
            - tool_execution_end: {args: {title: b}, skipped: true}
            - agent_end: {reason: aborted}
        """,
    )
    assert log == ["save ran, aborted: True"]  # it ran (it blocks the loop) and saw the abort
    verdict = check_outcome(outcome)  # type: ignore[arg-type]
    assert verdict.passed, verdict.report()


HANG = """\
scenario: a model that hangs without sending a byte
exec: {content: "Think.", tools: []}
model:
  - {fault: hang}
abort: {during_turn: 1}
timeout: 3
"""


def test_during_turn_aborts_a_model_that_hangs_before_any_piece() -> None:
    outcome = run_scenario(parse_scenario(HANG, "hang.yaml"))
    assert outcome.timed_out is None and outcome.duration < 1
    assert outcome.model_calls == 1 and outcome.unfired == []
    assert compact(outcome.trace) == ended_by_first_reply("aborted")
    assert outcome.trace[5]["text"] == ""
    assert type(outcome.error).__name__ == "RunAbortedError"


def test_during_turn_lands_in_a_reply_s_latency_before_it_streams() -> None:
    text = """\
scenario: a slow reply, aborted before its first piece
tools: {search: {returns: "hit"}}
exec: {content: "Find it."}
model:
  - tool_calls: [{search: {}}]
  - {text: "A long answer that never comes.", latency: 30}
abort: {during_turn: 2}
expect:
  raises: {type: RunAbortedError}
  model_calls: 2
  events:
    - tool_execution_end: {round: 1, tool_name: search, is_error: false}
    - message_end: {role: assistant, round: 2, text: "", stop_reason: aborted}
    - agent_end: {round: 2, reason: aborted}
"""
    outcome = run_scenario(parse_scenario(text, "slow.yaml"))
    verdict = check_outcome(outcome)
    assert verdict.passed, verdict.report()
    assert not any(e["type"] == "message_end" and e["text"] for e in outcome.trace[-4:])


def test_during_turn_on_a_streaming_reply_still_lands_after_its_first_piece() -> None:
    text = """\
scenario: mid-stream
exec: {content: "Talk.", tools: []}
model:
  - {text: "A reply streamed in pieces of twenty-four characters."}
abort: {during_turn: 1}
"""
    outcome = run_scenario(parse_scenario(text, "mid.yaml"))
    (reply,) = [e for e in outcome.trace if e["type"] == "message_end" and e["role"] == "assistant"]
    assert (reply["text"], reply["stop_reason"]) == ("A reply streamed in piec", "aborted")


def test_a_during_tool_point_the_run_never_reaches_fails_naming_it() -> None:
    text = BATCH.replace("during_tool: 2", "during_tool: 5") + "  - text: Done.\n"
    text = text.replace(
        "abort: {during_tool: 5}\n  - text: Done.", "  - text: Done.\nabort: {during_tool: 5}"
    )
    verdict = check_outcome(run_scenario(parse_scenario(text, "p.yaml")))
    assert [str(f) for f in verdict.failures] == [
        "abort (during_tool: 5) never fired: the run did not reach that point\n"
        "at p.yaml:13\n"
        "the run had 3 tool call(s)"
    ]


def test_a_during_turn_point_with_no_moment_to_land_in_is_a_load_error() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(
            "scenario: s\nexec: {content: go}\nmodel:\n  - {stop_reason: stop}\n"
            "abort: {during_turn: 1}\n",
            "s.yaml",
        )
    assert [str(i) for i in info.value.issues] == [
        "s.yaml:5: (abort.during_turn) model turn 1 streams nothing and does not wait, so no "
        "abort can land while it is in flight; give it latency: or fault: hang (a model that "
        "never answers), or abort after_round: instead"
    ]
    with pytest.raises(ScenarioError, match="give exactly one of after_tool, after_round, "):
        parse_scenario(HANG.replace("{during_turn: 1}", "{during_turn: 1, during_tool: 1}"), "x")


def test_the_cli_runs_a_hanging_model_s_abort_in_time(tmp_path: Path) -> None:
    path = tmp_path / "hang.yaml"
    path.write_text(
        HANG + "expect:\n  raises: {type: RunAbortedError}\n  model_calls: 1\n"
        "  events: [{message_end: {role: assistant, stop_reason: aborted}}]\n"
    )
    result = run_cli("run", str(path))
    assert result.returncode == 0, result.stdout
    assert "1 scenarios: 1 passed" in result.stdout
