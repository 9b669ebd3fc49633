"""The fuzzer finds planted bugs, shrinks them and writes scenario files that reproduce
them: each file fails against the buggy loop (``openprogram-sim run`` exits 1) and passes
once the bug is removed (exit 0), because its expectations come from the seed's rules, not
from the buggy run. Bugs are planted by monkeypatching ``openprogram.agent.agent_loop``;
``monkeypatch.undo()`` is the fix."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

from openprogram.agent import agent_loop
from openprogram.events import AgentEnd
from openprogram.types import ToolResultMessage
from openprogram_sim.cli import main
from openprogram_sim.fuzz import FuzzFailure, derive_expect, run_campaign, run_generated
from openprogram_sim.fuzz._rules import effective_cap
from openprogram_sim.play import check_outcome
from openprogram_sim.scenario import Expect, Scenario, load_scenario

# Every test here runs a campaign against a planted bug, then shrinks what it finds (a few
# seconds each): the inner loop (`pytest -m "not slow"`) leaves them to CI.
pytestmark = pytest.mark.slow

# --------------------------------------------------------------------------- planted bugs

CAP_PLUS_ONE = """
real_cap = agent_loop.effective_cap
agent_loop.effective_cap = lambda max_iterations: real_cap(max_iterations) + 1
"""
"""The round cap off by one: the loop allows one model call more than the seed says. Cap
bugs are Python source over ``agent_loop``, so that a subprocess can plant them too."""

HARD_CAP_PLUS_ONE = """
real_cap = agent_loop.effective_cap
agent_loop.effective_cap = lambda n: 51 if real_cap(n) == 50 else real_cap(n)
"""
"""Only the hard cap is off: 51 model calls where the seed allows 50."""


def _plant_cap(monkeypatch: pytest.MonkeyPatch, source: str) -> None:
    """Run ``source`` against a stand-in for ``agent_loop`` and set what it rebinds with
    monkeypatch (so ``monkeypatch.undo()`` removes the bug)."""
    stand_in = types.SimpleNamespace(effective_cap=agent_loop.effective_cap)
    exec(textwrap.dedent(source), {"agent_loop": stand_in})
    monkeypatch.setattr(agent_loop, "effective_cap", stand_in.effective_cap)


def _plant_rest_of_batch_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Steering arrives mid-batch, yet every remaining call still runs (nothing skipped)."""
    execute = agent_loop._execute_tool_calls

    async def one_at_a_time(run: Any, message: Any, tool_calls: list[Any]) -> list[Any]:
        steering: list[Any] = []
        for call in tool_calls:
            steering += await execute(run, message, [call])
        return steering

    monkeypatch.setattr(agent_loop, "_execute_tool_calls", one_at_a_time)


def _plant_wrong_skip_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """A skipped call's result does not say why (not the seed's text)."""
    monkeypatch.setattr(agent_loop, "SKIPPED_TEXT", "Skipped.")


def _plant_result_paired_with_previous_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """From the second call of a batch on, each result goes back under the previous call's
    id (an off-by-one in the pairing)."""
    record = agent_loop._record_result

    def record_off_by_one(run: agent_loop._Run, result: ToolResultMessage) -> None:
        if run.turn_results:
            result = copy.copy(result)
            result.tool_call_id = run.turn_results[-1].tool_call_id
        record(run, result)

    monkeypatch.setattr(agent_loop, "_record_result", record_off_by_one)


def _plant_second_result_fed_back_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second result of a batch is appended to the history (and emitted) twice."""
    record = agent_loop._record_result

    def record_twice(run: agent_loop._Run, result: ToolResultMessage) -> None:
        if len(run.turn_results) == 1:
            record(run, result)
        record(run, result)

    monkeypatch.setattr(agent_loop, "_record_result", record_twice)


def _plant_dropped_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop variant that drops a skipped result: the skip's events are emitted, but the
    result never reaches the history (nor the turn's results)."""
    record = agent_loop._record_result

    def record_unless_skipped(run: agent_loop._Run, result: ToolResultMessage) -> None:
        if not result.skipped:
            record(run, result)

    monkeypatch.setattr(agent_loop, "_record_result", record_unless_skipped)


# --------------------------------------------------------------------------- helpers


def _planted_campaign(
    plant: Any, seed: int, monkeypatch: pytest.MonkeyPatch, folder: Path
) -> tuple[Any, Scenario]:
    """The campaign against the loop with ``plant`` applied, and its kept regression file."""
    plant(monkeypatch)
    result = run_campaign(2000, seed=seed, regressions=folder, chunk_size=500, batch=4)
    return result, _kept_file(result.failure, folder)


def _kept_file(failure: FuzzFailure | None, folder: Path) -> Scenario:
    """The failure's regression file: kept, alone in ``folder``, reproducing, and with the
    expectations the rules give for its own content (nothing else went in)."""
    assert failure is not None
    assert failure.unexpressed is None, failure.unexpressed
    assert failure.path is not None and failure.reproduced is True
    assert sorted(folder.glob("fuzz_*.yaml")) == [failure.path]
    scenario = load_scenario(failure.path)
    assert "regression" in scenario.tags
    derived = Expect.model_validate(derive_expect(scenario))
    assert scenario.expect == derived
    assert scenario.expect.model_calls == len(scenario.model)  # type: ignore[arg-type]
    return scenario


def _events(scenario: Scenario, kind: str, **fields: Any) -> list[dict[str, Any]]:
    found = [e[kind] for e in scenario.expect.events if kind in e]
    return [e for e in found if all(e.get(k) == v for k, v in fields.items())]


def _buggy_then_fixed(monkeypatch: pytest.MonkeyPatch, path: Path, capsys: Any) -> None:
    """``openprogram-sim run FILE``: 1 against the buggy loop, 0 once the bug is gone."""
    assert main(["run", str(path)]) == 1
    assert "FAIL" in capsys.readouterr().out
    monkeypatch.undo()
    assert main(["run", str(path)]) == 0
    assert "1 scenarios: 1 passed" in capsys.readouterr().out


# --------------------------------------------------------------------------- the round cap


def test_a_cap_off_by_one_is_written_with_the_seeds_cap(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _plant_cap(monkeypatch, CAP_PLUS_ONE)
    result = run_campaign(400, seed=1, regressions=tmp_path, chunk_size=200, batch=4)
    failure = result.failure
    scenario = _kept_file(failure, tmp_path)
    assert failure is not None
    assert any("exceeds the cap" in v for v in failure.violations), failure.violations

    # the file holds the seed's cap, not the buggy run's: one model call fewer
    cap = effective_cap(scenario.exec.max_iterations)
    rounds = [r for r in scenario.expect.requests if r.depth == 0]
    assert len(rounds) == cap < failure.trace[-1]["round"]
    assert scenario.expect.model_calls is not None
    assert scenario.expect.model_calls < failure.model_calls
    assert _events(scenario, "agent_end", depth=0) == [{"depth": 0, "reason": "cap"}]
    if scenario.exec.max_iterations is not None and scenario.exec.max_iterations <= 1:
        assert scenario.expect.model_calls == 1  # the case: never 2 for 0 or 1

    # openprogram-sim run, in real processes: the buggy loop fails the file, the real one
    # passes it
    planted = (
        "import sys\nfrom openprogram.agent import agent_loop\n"
        + CAP_PLUS_ONE
        + "from openprogram_sim.cli import main\n"
        + f"sys.exit(main(['run', {str(failure.path)!r}]))\n"
    )
    buggy = subprocess.run(
        [sys.executable, "-c", planted], capture_output=True, text=True, timeout=120
    )
    assert buggy.returncode == 1, buggy.stdout + buggy.stderr
    assert "the model was called beyond its script" in buggy.stdout
    fixed = subprocess.run(
        [sys.executable, "-m", "openprogram_sim.cli", "run", str(failure.path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


@pytest.mark.parametrize(
    "plant", [CAP_PLUS_ONE, HARD_CAP_PLUS_ONE], ids=["every-cap", "hard-cap-only"]
)
def test_the_default_fuzz_command_finds_a_cap_off_by_one(
    plant: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``openprogram-sim fuzz --examples 3000`` with the CLI's defaults otherwise (chunks,
    batches, replays): the generator reaches the caps the bug is at, 1 and 50."""
    _plant_cap(monkeypatch, plant)
    code = main(["fuzz", "--examples", "3000", "--seed", "4", "--regressions", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "exceeds the cap of" in out
    (written,) = tmp_path.glob("fuzz_*.yaml")
    assert f"regression scenario written: {written} (reproduces it)" in out
    _buggy_then_fixed(monkeypatch, written, capsys)


# --------------------------------------------------------------------------- the skip


@pytest.mark.parametrize(
    ("plant", "seed"),
    [(_plant_rest_of_batch_runs, 2), (_plant_wrong_skip_text, 2)],
    ids=["rest-of-batch-runs", "wrong-skip-text"],
)
def test_a_broken_skip_is_written_with_the_seeds_skip(
    plant: Any,
    seed: int,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result, scenario = _planted_campaign(plant, seed, monkeypatch, tmp_path)
    assert result.failure is not None
    assert scenario.steering  # a skip needs a steering point

    # the file expects the seed's skip: flagged, an error, the seed's text; the buggy loop
    # misses exactly that
    skipped = _events(scenario, "tool_execution_end", skipped=True)
    assert skipped
    for end in skipped:
        assert end["is_error"] is True
        assert end["result"] == {"$regex": r"^Skipped due to queued user message\.?$"}
    verdict = check_outcome(run_generated(scenario))
    assert not verdict.passed
    assert "skipped: true" in verdict.report() or "Skipped due to" in verdict.report()
    _buggy_then_fixed(monkeypatch, scenario_path(result.failure), capsys)


def scenario_path(failure: FuzzFailure | None) -> Path:
    assert failure is not None and failure.path is not None
    return failure.path


# --------------------------------------------------------------------------- result pairing


@pytest.mark.parametrize(
    ("plant", "seed"),
    [(_plant_result_paired_with_previous_call, 2), (_plant_second_result_fed_back_twice, 2)],
    ids=["paired-with-previous-call", "fed-back-twice"],
)
def test_broken_result_pairing_is_written_with_one_result_per_call(
    plant: Any,
    seed: int,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result, scenario = _planted_campaign(plant, seed, monkeypatch, tmp_path)

    # one tool_execution_end and one toolResult message per call, ids paired in call order
    ends = _events(scenario, "tool_execution_end")
    messages = _events(scenario, "message_end", role="toolResult")
    assert len(ends) >= 2
    assert [e["tool_call_id"] for e in ends] == [m["tool_call_id"] for m in messages]
    assert len({e["tool_call_id"] for e in ends}) == len(ends)
    assert scenario.expect.counts["tool_execution_end"] == len(ends)
    _buggy_then_fixed(monkeypatch, scenario_path(result.failure), capsys)


# --------------------------------------------------------------------------- earlier bugs


def test_the_fuzzer_finds_a_dropped_skipped_result(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant_dropped_skip(monkeypatch)
    result = run_campaign(2000, seed=3, regressions=tmp_path, chunk_size=500, batch=4)
    failure = result.failure
    scenario = _kept_file(failure, tmp_path)
    assert failure is not None
    assert any("got no toolResult message" in v for v in failure.violations)
    assert scenario.steering and len(scenario.model) <= 3  # type: ignore[arg-type]

    buggy = check_outcome(run_generated(scenario))
    assert not buggy.passed
    assert any("toolResult" in str(f) or "message_end" in str(f) for f in buggy.failures)
    _buggy_then_fixed(monkeypatch, scenario_path(failure), capsys)


def test_the_fuzz_command_reports_a_violation(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant_dropped_skip(monkeypatch)
    code = main(["fuzz", "--examples", "500", "--seed", "3", "--regressions", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "INVARIANT VIOLATED" in out
    (written,) = tmp_path.glob("fuzz_*.yaml")
    assert f"regression scenario written: {written} (reproduces it)" in out
    assert f"replay: openprogram-sim run {written}" in out


def test_the_fuzzer_finds_a_second_agent_end(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A loop variant that closes a nested run twice: the written file's ``counts`` and
    events catch it."""
    end = agent_loop._end

    def end_twice(run: agent_loop._Run, reason: Any, **kwargs: Any) -> agent_loop.LoopResult:
        if run.depth > 0 and run.listeners:
            run.emit(
                AgentEnd(reason=reason, messages=run.new_messages, depth=run.depth, round=run.round)
            )
        return end(run, reason, **kwargs)

    monkeypatch.setattr(agent_loop, "_end", end_twice)
    result = run_campaign(2000, seed=11, regressions=tmp_path, chunk_size=500, batch=4)
    failure = result.failure
    scenario = _kept_file(failure, tmp_path)
    assert failure is not None
    assert any("depth 1" in v for v in failure.violations), failure.violations
    assert any(tool.exec is not None for tool in scenario.tools.values())
    assert scenario.expect.counts["agent_end"] == scenario.expect.counts["agent_start"]
    _buggy_then_fixed(monkeypatch, scenario_path(failure), capsys)
