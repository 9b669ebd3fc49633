"""The project's own scenario library covers the whole catalogue, CI keeps it that way, and
taking a scenario away shows up as a behaviour no longer exercised."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from _support import CliResult, run_cli

from openprogram_sim.coverage import CATALOGUE, BehaviourCoverage, behaviours_of
from openprogram_sim.play import run_scenario
from openprogram_sim.scenario import discover, load_scenario

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "scenarios"


def _cli(*args: str, cwd: Path) -> CliResult:
    return run_cli(*args, cwd=cwd)


def _library_coverage() -> BehaviourCoverage:
    suite = BehaviourCoverage()
    for path in discover([LIBRARY]):
        suite.add(
            path.relative_to(ROOT).as_posix(), behaviours_of(run_scenario(load_scenario(path)))
        )
    return suite


def test_the_library_exercises_and_asserts_every_behaviour() -> None:
    suite = _library_coverage()
    assert suite.missing == []
    assert suite.unasserted == []
    assert suite.percent == 100.0


def test_ci_requires_every_behaviour_after_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = ci.index(".venv/bin/pytest")
    gate = ci.index(".venv/bin/openprogram-sim run scenarios/ --coverage")
    assert test_command < gate
    required = [
        i for group in re.findall(r"--coverage-require (\S+)", ci) for i in group.split(",")
    ]
    assert required == [b.id for b in CATALOGUE]


def test_removing_a_scenario_shows_its_behaviour_as_not_exercised(tmp_path: Path) -> None:
    copy = tmp_path / "scenarios"
    shutil.copytree(LIBRARY, copy)
    (copy / "tool_choice" / "forced_function.yaml").unlink()
    result = _cli("run", "scenarios", "--coverage", "--json", "--coverage-require",
                  "tool_choice_forced,cap_hit", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["behaviours"]["tool_choice_forced"] == {"exercised": [], "asserted": []}
    assert data["summary"]["failed"] == 0  # every scenario still passes: only coverage fails
    assert "1 required behaviour(s) not exercised by any scenario:" in result.stderr
    assert "tool_choice_forced: a forced function choice is sent to the provider" in result.stderr
    assert "cap_hit" not in result.stderr


def test_every_behaviour_with_one_scenario_is_lost_with_that_scenario(tmp_path: Path) -> None:
    suite = _library_coverage()
    single = {b.id: suite.exercised[b.id][0] for b in CATALOGUE if len(suite.exercised[b.id]) == 1}
    assert single, "no behaviour rests on one scenario: nothing to take away"
    for id, path in single.items():
        copy = tmp_path / id / "scenarios"
        shutil.copytree(LIBRARY, copy)
        (copy.parent / path).unlink()
        result = _cli("run", "scenarios", "--coverage", "--coverage-require", id, cwd=copy.parent)
        assert result.returncode == 1, (id, result.stderr)
        row = next(line for line in result.stdout.splitlines() if f" {id} " in line)
        assert row.endswith("NOT EXERCISED"), row
        assert f"not exercised: {id}:" in result.stdout


@pytest.mark.parametrize("path", ["scenarios/steering/after_round_following_tool_round.yaml"])
def test_the_file_added_for_steering_after_a_tool_round_asserts_it(path: str) -> None:
    run = behaviours_of(run_scenario(load_scenario(ROOT / path)))
    assert "steering_after_round" in run.asserted
    assert "steering_skip" not in run.exercised
