"""A bounded campaign (deterministic: fixed seed, no timing assertions), the summary it
gives, and the ``openprogram-sim fuzz`` command."""

from __future__ import annotations

from pathlib import Path

import pytest

from openprogram_sim.cli import main
from openprogram_sim.fuzz import run_campaign, scenario_from_bytes
from openprogram_sim.scenario import Scenario


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
