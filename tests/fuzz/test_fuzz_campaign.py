"""A bounded campaign (deterministic: fixed seed, no timing assertions), the summary it
gives, and the ``openprogram-sim fuzz`` command."""

from __future__ import annotations

import random
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from openprogram.agent import agent_loop
from openprogram_sim.cli import main
from openprogram_sim.fuzz import check_invariants, reproduces, run_campaign, run_generated
from openprogram_sim.fuzz.loop import SCENARIO_BYTES, _campaign, scenario_from_bytes
from openprogram_sim.scenario import Scenario, load_scenario


def test_a_bounded_campaign_finds_no_violation(tmp_path: Path) -> None:
    result = run_campaign(400, seed=20261130, regressions=tmp_path, chunk_size=200)
    assert result.failure is None, result.failure and result.failure.violations
    stats = result.stats
    assert stats.runs == 400
    assert stats.replays == 100  # every 4th run is run twice and compared
    # the generator reaches what the issue asks for
    assert stats.tool_calls > stats.runs
    assert {"ok", "tool error", "unknown tool", "invalid arguments", "skipped"} <= set(
        stats.results
    )
    assert {"error stop", "aborted stop", "fault truncate", "fault raise"} <= set(stats.faults)
    assert {"stop", "error", "aborted", "cap"} <= set(stats.ends)
    assert stats.steering > 0 and stats.follow_ups > 0
    assert stats.nested_runs > 0 and stats.max_depth >= 2
    assert stats.max_rounds == 50  # a model that keeps picking, into the hard cap
    assert not list(tmp_path.iterdir())  # nothing written without a violation


def test_a_campaign_is_the_same_for_the_same_seed() -> None:
    first = run_campaign(96, seed=5, regressions=None, chunk_size=48)
    again = run_campaign(96, seed=5, regressions=None, chunk_size=48)
    other = run_campaign(96, seed=6, regressions=None, chunk_size=48)
    assert first.stats.summary() == again.stats.summary()
    assert first.stats.summary() != other.stats.summary()


def test_every_byte_string_builds_a_valid_scenario() -> None:
    for blob in (b"", b"\x00" * 160, b"\xff" * 160, bytes(range(160))):
        Scenario.model_validate(scenario_from_bytes(blob))


def test_the_fuzz_command_prints_what_it_generated(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["fuzz", "--examples", "64", "--seed", "3", "--no-write"])
    out = capsys.readouterr().out
    assert code == 0
    assert "fuzz: 64 generated scenarios, seed 3, 1 worker(s)" in out
    for label in ("runs ", "model calls", "tool calls", "model faults", "steering", "nested runs"):
        assert label in out
    assert "no invariant violated in 64 runs (seed 3)" in out


def test_the_fuzz_command_rejects_bad_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "--workers", "0"]) == 2
    assert "--workers >= 1" in capsys.readouterr().err


def test_workers_spread_a_campaign_over_processes() -> None:
    result = run_campaign(64, seed=9, workers=2, regressions=None, chunk_size=32)
    single = run_campaign(64, seed=9, workers=1, regressions=None, chunk_size=32)
    assert result.failure is None
    assert result.stats.summary() == single.stats.summary()  # the same chunks, the same seeds


def test_the_generator_reaches_the_caps_the_seed_turns_on() -> None:
    """``max_iterations`` 0, 1 and 50 (and absent) are common; the values between and
    beyond come up too."""
    rng = random.Random(5)
    caps = Counter(
        scenario_from_bytes(rng.randbytes(SCENARIO_BYTES))["exec"].get("max_iterations", "absent")
        for _ in range(2000)
    )
    for value in ("absent", 0, 1, 50):
        assert caps[value] > 200, caps  # each at least one in ten
    assert any(v not in ("absent", 0, 1, 50) and 1 < v < 50 for v in caps)
    assert any(v != "absent" and (v < 0 or v > 50) for v in caps)


def _write_file(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_reproduces_is_exactly_what_run_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    body = """\
        scenario: a model that picks twice
        tools: {search: {returns: hit}}
        exec: {content: go, max_iterations: 0}
        model:
          - tool_calls: [{search: {}}]
          - text: done
        """
    passing = _write_file(
        tmp_path, "passing.yaml", body.replace("max_iterations: 0", "tools: [search]")
    )
    failing = _write_file(tmp_path, "failing.yaml", body + "expect: {model_calls: 1}\n")
    broken = _write_file(tmp_path, "broken.yaml", body + "expect: {modell_calls: 1}\n")
    assert [reproduces(p) for p in (passing, failing, broken)] == [False, True, False]
    assert [main(["run", str(p)]) for p in (passing, failing, broken)] == [0, 1, 2]
    capsys.readouterr()

    # With the cap off by one, the loop breaks an invariant on a file with no expectations,
    # yet `run` passes it: such a file does not reproduce anything.
    real = agent_loop.effective_cap
    monkeypatch.setattr(agent_loop, "effective_cap", lambda n: real(n) + 1)
    silent = _write_file(tmp_path, "silent.yaml", body)
    assert check_invariants(run_generated(load_scenario(silent)))
    assert reproduces(silent) is False
    assert main(["run", str(silent)]) == 0


@pytest.mark.slow  # two campaigns shrinking a violation that never reproduces
def test_a_violation_no_file_can_show_is_reported_not_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A violation the correct loop's run does not show (here a false alarm of the checker)
    gives a regression file that passes, so none is kept, and the campaign says why."""

    def false_alarm(outcome: Any, replay: Any = None) -> list[str]:
        found = any(e["type"] == "tool_execution_end" for e in outcome.trace)
        return ["#0 a planted false alarm (no run shows it)"] if found else []

    monkeypatch.setattr(_campaign, "check_outcome_invariants", false_alarm)
    code = main(["fuzz", "--examples", "40", "--seed", "1", "--regressions", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "INVARIANT VIOLATED" in out and "a planted false alarm" in out
    assert "no regression scenario written: the violation could not be expressed" in out
    assert "passes against this loop" in out
    assert "(reproduces it)" not in out
    assert not list(tmp_path.iterdir())

    result = run_campaign(40, seed=1, regressions=tmp_path)
    assert result.failure is not None
    assert result.failure.path is None and result.failure.reproduced is False
    assert result.failure.unexpressed is not None
