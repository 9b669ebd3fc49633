"""The fuzzer finds a planted bug, shrinks it and writes a scenario file that reproduces
it: the file fails against the buggy loop and passes against the real one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openprogram.agent import agent_loop
from openprogram.events import AgentEnd
from openprogram.types import ToolResultMessage
from openprogram_sim.cli import main
from openprogram_sim.fuzz import run_campaign, run_generated
from openprogram_sim.scenario import check_outcome, load_scenario


def _plant_dropped_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop variant that drops a skipped result: the skip's events are emitted, but the
    result never reaches the history (nor the turn's results)."""
    record = agent_loop._record_result

    def record_unless_skipped(run: agent_loop._Run, result: ToolResultMessage) -> None:
        if result.text != agent_loop.SKIPPED_TEXT:
            record(run, result)

    monkeypatch.setattr(agent_loop, "_record_result", record_unless_skipped)


def test_the_fuzzer_finds_a_dropped_skipped_result(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant_dropped_skip(monkeypatch)
    result = run_campaign(2000, seed=3, regressions=tmp_path, chunk_size=500, batch=4)
    failure = result.failure
    assert failure is not None
    assert any("got no toolResult message" in v for v in failure.violations)
    assert failure.path is not None and failure.path.parent == tmp_path
    assert failure.reproduced is True

    scenario = load_scenario(failure.path)  # a valid scenario file
    assert "regression" in scenario.tags and scenario.steering  # shrunk to what matters
    assert len(scenario.model) <= 3  # type: ignore[arg-type]

    buggy = check_outcome(run_generated(scenario))
    assert not buggy.passed
    assert any("toolResult" in str(f) or "tool_execution" in str(f) for f in buggy.failures)
    assert main(["run", str(failure.path)]) == 1

    monkeypatch.undo()  # the real loop
    assert check_outcome(run_generated(scenario)).passed
    capsys.readouterr()
    assert main(["run", str(failure.path)]) == 0


def test_the_fuzz_command_reports_a_violation(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant_dropped_skip(monkeypatch)
    code = main(["fuzz", "--examples", "500", "--seed", "3", "--regressions", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "INVARIANT VIOLATED" in out
    written = list(tmp_path.glob("fuzz_*.yaml"))
    assert len(written) == 1
    assert f"regression scenario written: {written[0]} (reproduces it)" in out


def test_the_fuzzer_finds_a_second_agent_end(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A loop variant that closes a nested run twice: the written file's ``counts`` and
    events catch it."""
    end = agent_loop._end

    def end_twice(run: agent_loop._Run, reason: Any, **kwargs: Any) -> agent_loop.LoopResult:
        if run.depth > 0 and run.listeners:
            run.emit(AgentEnd(reason, run.new_messages, run.depth, run.round))
        return end(run, reason, **kwargs)

    monkeypatch.setattr(agent_loop, "_end", end_twice)
    result = run_campaign(2000, seed=11, regressions=tmp_path, chunk_size=500, batch=4)
    failure = result.failure
    assert failure is not None and failure.path is not None and failure.reproduced
    assert any("depth 1" in v for v in failure.violations), failure.violations
    scenario = load_scenario(failure.path)
    assert any(tool.exec is not None for tool in scenario.tools.values())
    assert not check_outcome(run_generated(scenario)).passed
    monkeypatch.undo()
    assert check_outcome(run_generated(scenario)).passed
