"""A ``python:`` tool that raises a ``BaseException`` that is not an ``Exception``, through
the harness (issue 22, item 7): ``run_scenario`` keeps the outcome (exec's error, the trace
closed by one ``agent_end``); ``openprogram-sim run`` reports that scenario as an error and
every other result stands; a ``KeyboardInterrupt`` (Ctrl-C) stops the run, which reports
what ran and exits 130; under pytest the item fails as a scenario error and the others
pass. A tool's own ``CancelledError`` (item 6) is an error result, and the run goes on."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import run_cli

from openprogram_sim import check_outcome, load_scenario, run_scenario

CLI = Path(sys.executable).parent / "openprogram-sim"

TOOLS = '''
import asyncio
import pathlib
import time

from openprogram import ToolRegistry, function

registry = ToolRegistry()


class Boom(BaseException):
    """Not an Exception."""


@function(registry=registry)
def explode() -> str:
    """Raise a BaseException of our own."""
    raise Boom("kaput")


@function(registry=registry)
def leave() -> str:
    """Call sys.exit()."""
    raise SystemExit(4)


@function(registry=registry)
def interrupt() -> str:
    """As if the user pressed Ctrl-C in the tool."""
    raise KeyboardInterrupt


@function(registry=registry)
async def cancelled() -> str:
    """Await work someone else cancelled."""
    job = asyncio.ensure_future(asyncio.sleep(3600))
    job.cancel()
    await job
    return "unreachable"


@function(registry=registry)
def nap(marker: str) -> str:
    """Say it started, then block for a long time."""
    pathlib.Path(marker).write_text("started")
    time.sleep(30)
    return "woke"
'''

CRASHING = (Path(__file__).parent / "data" / "crashing_tool.yaml").read_text(encoding="utf-8")
"""A scenario whose ``TOOL`` (from ``MODULE``, called with ``ARGS``) raises; filled in per test."""

FINE = (Path(__file__).parent / "data" / "echo_then_done.yaml").read_text(encoding="utf-8")
"""A scenario (titled ``TITLE``) that passes: one simulated call, then text."""


def _json_run(project: Path, *, exit_code: int) -> dict[str, Any]:
    """``openprogram-sim run . --json`` in ``project``: its exit code checked, its JSON."""
    result = run_cli("run", ".", "--json", cwd=project)
    assert result.returncode == exit_code, result.stdout + result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A folder with the tools module (a name of its own)."""
    module = f"raisers_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{module}.py").write_text(TOOLS)
    (tmp_path / "MODULE").write_text(module)
    yield tmp_path
    sys.modules.pop(module, None)


def crashing(project: Path, name: str, tool: str, args: str = "{}") -> Path:
    module = (project / "MODULE").read_text()
    text = CRASHING.replace("TOOL", tool).replace("MODULE", module).replace("ARGS", args)
    path = project / name
    path.write_text(text)
    return path


def line_of(tool: str) -> int:
    """The line of ``TOOLS`` where ``tool`` raises."""
    lines = TOOLS.splitlines()
    start = lines.index(f"def {tool}() -> str:")
    return next(i for i in range(start, len(lines)) if "raise " in lines[i]) + 1


def fine(project: Path, name: str) -> Path:
    path = project / name
    path.write_text(FINE.replace("TITLE", f"fine {name}"))
    return path


def types_of(trace: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in trace]


def ends_of(trace: list[dict[str, Any]]) -> list[tuple[str, bool, str | None, str]]:
    """``(tool, is_error, error_kind, result)`` of each ``tool_execution_end``."""
    return [
        (e["tool_name"], e["is_error"], e["error_kind"], e["result"])
        for e in trace
        if e["type"] == "tool_execution_end"
    ]


# -- run_scenario ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "error"), [("explode", "Boom: kaput"), ("leave", "SystemExit: 4")]
)
def test_run_scenario_keeps_the_outcome_of_a_run_that_crashed(
    project: Path, tool: str, error: str
) -> None:
    outcome = run_scenario(load_scenario(crashing(project, "crash.yaml", tool)))
    assert outcome.error_text == error and outcome.crashed and outcome.result is None
    module = (project / "MODULE").read_text()
    assert outcome.crash == (
        f"{error.split(':')[0]}, a BaseException that is not an Exception, left exec "
        f"(raised at {project / module}.py:{line_of(tool)} in {tool})"  # outside the cwd
    )
    assert ends_of(outcome.trace) == [
        (tool, True, "raised", error),
        ("search", True, "skipped", "Not run: the run ended on an error."),
    ]
    assert types_of(outcome.trace)[-2:] == ["turn_end", "agent_end"]
    assert types_of(outcome.trace).count("agent_end") == 1
    assert outcome.trace[-1]["reason"] == "error"
    verdict = check_outcome(outcome)
    assert verdict.failures[0].title == "exec raised, and the scenario expects no error"
    # the thread's event loop is fine for the next run
    assert check_outcome(run_scenario(load_scenario(fine(project, "next.yaml")))).passed


def test_run_scenario_lets_a_keyboard_interrupt_through_after_the_run_ended(
    project: Path,
) -> None:
    scenario = load_scenario(crashing(project, "ctrl_c.yaml", "interrupt"))
    with pytest.raises(KeyboardInterrupt):
        run_scenario(scenario)
    assert check_outcome(run_scenario(load_scenario(fine(project, "next.yaml")))).passed


def test_a_tool_s_own_cancelled_error_is_an_error_result_and_the_run_goes_on(
    project: Path,
) -> None:
    outcome = run_scenario(load_scenario(crashing(project, "cancelled.yaml", "cancelled")))
    assert outcome.error is None and outcome.result == "Done." and not outcome.crashed
    assert ends_of(outcome.trace) == [
        ("cancelled", True, "raised", "CancelledError raised by the tool"),
        ("search", False, None, "never"),
    ]
    assert outcome.trace[-1] == {**outcome.trace[-1], "type": "agent_end", "reason": "stop"}


# -- openprogram-sim run -----------------------------------------------------------------


def test_the_cli_reports_the_crashed_scenario_as_an_error_and_the_others_stand(
    project: Path,
) -> None:
    fine(project, "a_fine.yaml")
    crashing(project, "b_explode.yaml", "explode")
    crashing(project, "c_leave.yaml", "leave")  # sys.exit() in a tool does not end the CLI
    fine(project, "d_fine.yaml")
    result = run_cli("run", ".", cwd=project)
    assert result.returncode == 1, (
        result.stdout
    )  # as for a failure; 2 is for files that do not load
    lines = result.stdout.splitlines()
    assert [line.split()[:2] for line in lines[:4]] == [
        ["PASS", "a_fine.yaml"],
        ["ERROR", "b_explode.yaml"],
        ["ERROR", "c_leave.yaml"],
        ["PASS", "d_fine.yaml"],
    ]
    module = (project / "MODULE").read_text()
    assert (
        "  the run crashed: Boom, a BaseException that is not an Exception, left exec "
        f"(raised at {module}.py:{line_of('explode')} in explode)"  # below the cwd: relative
    ) in lines
    assert "- exec raised, and the scenario expects no error" in lines
    assert "  Boom: kaput" in lines and "  SystemExit: 4" in lines
    assert lines[-1].startswith("4 scenarios: 2 passed, 2 error in ")
    assert "Traceback" not in result.stderr


def test_the_cli_s_json_names_the_crash_and_keeps_the_closed_trace(project: Path) -> None:
    fine(project, "a_fine.yaml")
    crashing(project, "b_explode.yaml", "explode")
    data = _json_run(project, exit_code=1)
    assert data["summary"] == {**data["summary"], "passed": 1, "error": 1, "total": 2}
    crashed = data["scenarios"][1]
    assert crashed["status"] == "error" and crashed["error"] == "Boom: kaput"
    assert crashed["crash"].startswith("Boom, a BaseException that is not an Exception")
    assert [e["type"] for e in crashed["trace"]].count("agent_end") == 1
    assert crashed["trace"][-1]["reason"] == "error"
    assert data["scenarios"][0]["status"] == "passed" and data["scenarios"][0]["crash"] is None


def test_a_keyboard_interrupt_stops_the_cli_which_reports_what_ran(project: Path) -> None:
    fine(project, "a_fine.yaml")
    crashing(project, "b_interrupt.yaml", "interrupt")
    fine(project, "c_fine.yaml")
    result = run_cli("run", ".", cwd=project)
    assert result.returncode == 130, result.stdout
    lines = result.stdout.splitlines()
    assert lines[0].startswith("PASS  a_fine.yaml")
    assert lines[1] == (
        "INTERRUPTED b_interrupt.yaml  (KeyboardInterrupt (Ctrl-C): this run and the files "
        "after it did not finish)"
    )
    assert "c_fine.yaml" not in result.stdout
    assert lines[-1].startswith("2 scenarios: 1 passed, 1 interrupted in ")


def test_the_cli_s_json_after_a_keyboard_interrupt(project: Path) -> None:
    fine(project, "a_fine.yaml")
    crashing(project, "b_interrupt.yaml", "interrupt")
    data = _json_run(project, exit_code=130)
    assert [(Path(s["path"]).name, s["status"]) for s in data["scenarios"]] == [
        ("a_fine.yaml", "passed"),
        ("b_interrupt.yaml", "interrupted"),
    ]
    assert data["summary"]["interrupted"] == 1


def test_ctrl_c_while_a_tool_blocks_stops_the_cli_which_reports_what_ran(
    project: Path,
) -> None:
    """A real SIGINT, in a real process: Ctrl-C must work."""
    fine(project, "a_fine.yaml")
    marker = project / "started"
    crashing(project, "b_nap.yaml", "nap", args=f"{{marker: {str(marker)!r}}}")
    fine(project, "c_fine.yaml")
    command = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "openprogram_sim.cli"]
    process = subprocess.Popen(
        [*command, "run", ".", "--json"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    data = json.loads(out)
    assert [s["status"] for s in data["scenarios"]] == ["passed", "interrupted"]
    assert "Traceback" not in err


# -- the pytest plugin -------------------------------------------------------------------


def test_under_pytest_the_crashed_scenario_fails_as_an_error_and_the_others_pass(
    project: Path, pytester: pytest.Pytester
) -> None:
    fine(project, "a_fine.yaml")
    crashing(project, "b_explode.yaml", "explode")
    crashing(project, "c_leave.yaml", "leave")
    fine(project, "d_fine.yaml")
    result = pytester.runpytest("--openprogram-scenarios", str(project), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "scenario error: explode in a tool",
            "  file: *b_explode.yaml",
            "  the run crashed: Boom, a BaseException that is not an Exception, left exec "
            f"(raised at *.py:{line_of('explode')} in explode)",
            "  exec raised: Boom: kaput",
        ]
    )
    result.stdout.fnmatch_lines(["scenario error: leave in a tool", "*SystemExit: 4"])


def test_under_pytest_a_keyboard_interrupt_stops_the_session(
    project: Path, pytester: pytest.Pytester
) -> None:
    fine(project, "a_fine.yaml")
    crashing(project, "b_interrupt.yaml", "interrupt")
    fine(project, "c_fine.yaml")
    result = pytester.runpytest_inprocess(
        "--openprogram-scenarios", str(project), "-p", "no:cacheprovider", no_reraise_ctrlc=True
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*KeyboardInterrupt*", "*1 passed*"])
