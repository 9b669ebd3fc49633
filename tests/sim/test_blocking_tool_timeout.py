"""A scenario's ``timeout:`` holds even when a tool blocks the event loop (a sync tool that
sleeps or spins, an async one that calls ``time.sleep``): the run is interrupted by SIGALRM,
fails as timed out naming the tool, and the next scenario of the process runs as usual.
Where SIGALRM is someone else's (pytest-timeout's ``signal`` method), it is left alone."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from openprogram_sim import RunOutcome, check_outcome, load_scenario, run_scenario
from openprogram_sim.play._runner import _loop

pytestmark = pytest.mark.skipif(
    not hasattr(signal, "setitimer"), reason="the deadline's timer needs POSIX setitimer"
)

CLI = Path(sys.executable).parent / "openprogram-sim"

TOOLS = '''
import asyncio
import time

from openprogram import ToolRegistry, function

registry = ToolRegistry()  # not the default one: each test imports a module of its own


@function(registry=registry)
def nap(seconds: float = 3600) -> str:
    """Sleep, blocking the loop."""
    time.sleep(seconds)
    return "woke"


@function(registry=registry)
def spin() -> str:
    """Compute forever."""
    n = 0
    while True:
        n += 1


@function(registry=registry)
async def async_nap() -> str:
    """An async tool that blocks all the same."""
    time.sleep(3600)
    return "woke"


@function(registry=registry)
async def stubborn() -> str:
    """Ignores cancellation for 30 s, without blocking: only the timer ends the wait."""
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            await asyncio.sleep(end - time.monotonic())
        except asyncio.CancelledError:
            pass
    return "gave up"
'''

BLOCKING = """\
scenario: TOOL blocks the loop
timeout: 0.5
tools:
  TOOL: {python: "MODULE:TOOL"}
exec: {content: "Go."}
model:
  - tool_calls: [{TOOL: {}}]
  - text: "Done."
expect:
  result: "Done."
"""

FINE = """\
scenario: a quick scenario after it
tools:
  echo: {returns: "hi"}
exec: {content: "Go."}
model:
  - tool_calls: [{echo: {}}]
  - text: "Done."
expect:
  result: "Done."
  events:
    - tool_execution_end: {tool_name: echo, result: "hi"}
    - agent_end: {reason: stop}
"""


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A folder with the tools module (a name of its own) and no scenario yet."""
    module = f"blockers_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{module}.py").write_text(TOOLS)
    (tmp_path / "MODULE").write_text(module)
    yield tmp_path
    sys.modules.pop(module, None)


def write(project: Path, name: str, tool: str | None = None, **changes: str) -> Path:
    text = FINE if tool is None else BLOCKING.replace("TOOL", tool)
    text = text.replace("MODULE", (project / "MODULE").read_text())
    for old, new in changes.items():
        text = text.replace(old, new)
    path = project / name
    path.write_text(text)
    return path


def short_nap(project: Path) -> Path:
    """A sync tool that blocks for 0.3 s, past a timeout of 0.1 s."""
    changes = {"{nap: {}}": "{nap: {seconds: 0.3}}", "timeout: 0.5": "timeout: 0.1"}
    return write(project, "short.yaml", "nap", **changes)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "openprogram_sim.cli"]
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_the_cli_fails_blocking_tools_in_time_naming_them_and_runs_the_next(
    project: Path,
) -> None:
    write(project, "a_sleeps.yaml", "nap")
    write(project, "b_spins.yaml", "spin")
    write(project, "c_async_sleeps.yaml", "async_nap")
    write(project, "d_fine.yaml")
    start = time.perf_counter()
    result = cli("run", ".", cwd=project)
    assert time.perf_counter() - start < 20  # 1.5 s each (timeout + grace), not an hour
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert "PASS  d_fine.yaml" in out
    assert "4 scenarios: 1 passed, 3 failed" in out
    for tool in ("nap", "spin", "async_nap"):
        assert (
            "- the run did not finish within its timeout of 0.5 s (real time): "
            f"tool '{tool}' blocked the event loop and was interrupted"
        ) in out
        assert f"tool_execution_start   d0 r1 {tool}({{}})" in out
    assert "a sync tool should return quickly" in out
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_pytest_session_reports_the_failure_instead_of_hanging(
    project: Path, pytester: pytest.Pytester
) -> None:
    write(project, "a_sleeps.yaml", "nap")
    write(project, "b_fine.yaml")
    result = pytester.runpytest_subprocess(
        "--openprogram-scenarios", str(project), "-p", "no:cacheprovider", "-W", "error",
        timeout=60,
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "scenario failed: nap blocks the loop",
            "  exec raised: LoopBlockedError: tool 'nap' blocked the event loop past the run's "
            "deadline (0.5 s timeout + 1 s grace) and was interrupted",
            "- the run did not finish within its timeout of 0.5 s (real time): tool 'nap' "
            "blocked the event loop and was interrupted",
        ]
    )


def test_in_process_the_interrupted_run_is_timed_out_and_the_next_one_passes(
    project: Path,
) -> None:
    # 30 s, not an hour: should the deadline not hold, the test fails instead of hanging
    path = write(project, "sleeps.yaml", "nap", **{"{nap: {}}": "{nap: {seconds: 30}}"})
    outcome = run_scenario(load_scenario(path))
    assert outcome.timed_out == 7 and outcome.blocked == "tool 'nap'"
    # the interrupt ended the tool and the run, which closed as any run does: the call's
    # result names the interrupt, one agent_end last
    end = outcome.trace[7]
    assert (end["type"], end["tool_name"], end["is_error"]) == ("tool_execution_end", "nap", True)
    assert end["result"] == (
        "DeadlineInterrupt: the run's deadline interrupted what blocked the event loop"
    )
    assert [e["type"] for e in outcome.trace].count("agent_end") == 1
    assert outcome.trace[-1]["reason"] == "error"
    assert 1.4 < outcome.duration < 5
    verdict = check_outcome(outcome)
    assert [f.title for f in verdict.failures] == [
        "the run did not finish within its timeout of 0.5 s (real time): tool 'nap' blocked "
        "the event loop and was interrupted"
    ]
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert check_outcome(run_scenario(load_scenario(write(project, "fine.yaml")))).passed


@pytest.mark.slow
def test_a_tool_that_ignores_cancellation_is_interrupted_and_the_loop_replaced(
    project: Path,
) -> None:
    """It awaits without blocking, so the loop sits idle: the timer's interrupt surfaces
    from the loop itself, which is dropped for a new one."""
    outcome = run_scenario(load_scenario(write(project, "stubborn.yaml", "stubborn")))
    assert outcome.timed_out is not None and outcome.blocked == "tool 'stubborn'"
    assert outcome.duration < 10
    assert check_outcome(run_scenario(load_scenario(write(project, "fine.yaml")))).passed


def test_a_sigalrm_handler_already_installed_is_left_in_place(project: Path) -> None:
    """pytest-timeout's ``signal`` method, for one: the run does not arm its own timer, so a
    blocking tool is not interrupted (here it returns after 0.3 s), and the handler and the
    timer that were there stay."""
    fired: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        fired.append(signum)

    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 30)
    try:
        outcome = run_scenario(load_scenario(short_nap(project)))
        ends = [e for e in outcome.trace if e["type"] == "tool_execution_end"]
        assert [e["result"] for e in ends] == ["woke"]  # it ran to the end
        assert outcome.blocked is None
        assert signal.getsignal(signal.SIGALRM) is handler
        assert 25 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30
        assert fired == []
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_off_the_main_thread_the_run_keeps_today_s_limit(project: Path) -> None:
    """Signals reach only the main thread: elsewhere no timer is armed, and a blocking tool
    runs to its end (only the loop's own limit applies, once the tool lets it run)."""
    scenario = load_scenario(short_nap(project))
    outcomes: list[RunOutcome] = []

    def target() -> None:
        outcomes.append(run_scenario(scenario))
        _loop().close()  # the thread's own loop, which would outlive it unclosed

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    [outcome] = outcomes
    ends = [e for e in outcome.trace if e["type"] == "tool_execution_end"]
    assert [e["result"] for e in ends] == ["woke"] and outcome.blocked is None
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL


def test_the_timer_is_armed_only_for_runs_of_the_users_code(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Simulated tools and the scripted model never block the loop: their runs skip the
    timer (its cost shows in scenarios per second); a python: tool's run gets it."""
    from openprogram_sim.play import _deadline

    armed: list[float] = []
    arm = _deadline.Deadline.arm.__func__  # type: ignore[attr-defined]

    def counting(cls: type, seconds: float, trace: list) -> object:
        armed.append(seconds)
        return arm(cls, seconds, trace)

    monkeypatch.setattr(_deadline.Deadline, "arm", classmethod(counting))
    assert check_outcome(run_scenario(load_scenario(write(project, "fine.yaml")))).passed
    assert armed == []
    quick = write(project, "quick.yaml", "nap", **{"{nap: {}}": "{nap: {seconds: 0}}"})
    assert check_outcome(run_scenario(load_scenario(quick))).passed
    assert armed == [1.5]  # its timeout: 0.5, and the grace
