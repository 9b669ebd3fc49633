"""`openprogram-sim run --coverage*` as a user runs it (through ``main(argv)``, in-process):
its output, its exit status."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from _support import CliResult, run_cli

from openprogram_sim.coverage import CATALOGUE

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path = ROOT) -> CliResult:
    return run_cli("run", *args, cwd=cwd)


def test_the_table_lists_every_behaviour_with_its_counts() -> None:
    result = run("scenarios/basics", "--coverage")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    head = next(line for line in out.splitlines() if line.startswith("behaviour coverage:"))
    assert head.startswith(f"behaviour coverage: {len(CATALOGUE)} behaviours, 4 exercised (")
    assert "by 4 scenarios" in head
    lines = [line for line in out.splitlines() if line.startswith("  ")]
    rows = {b.id: next(line for line in lines if f" {b.id} " in line) for b in CATALOGUE}
    assert rows["text_finish"].split()[-3:] == ["4", "4", "asserted"]
    assert rows["several_calls_one_round"].split()[-3:] == ["1", "1", "asserted"]
    assert rows["steering_skip"].endswith("NOT EXERCISED")
    assert "not exercised: steering_skip: steering mid-batch skips the remaining calls" in out
    assert "exercised, unasserted: tool_choice_auto (by scenarios/basics/one_pick.yaml," in out


def test_json_holds_every_behaviour_with_its_scenarios() -> None:
    result = run("scenarios/basics", "scenarios/steering", "--coverage", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert list(data["behaviours"]) == [b.id for b in CATALOGUE]
    skip = data["behaviours"]["steering_skip"]
    assert skip["exercised"] == sorted(skip["exercised"])
    assert "scenarios/steering/after_tool_skips_remaining.yaml" in skip["asserted"]
    assert set(skip["asserted"]) <= set(skip["exercised"])
    assert data["behaviours"]["hard_cap_50"] == {"exercised": [], "asserted": []}
    assert 0 < data["exercised_percent"] < 100
    assert data["summary"]["total"] == len(data["scenarios"])  # the run's own JSON is kept


def test_a_floor_fails_the_run_with_what_is_missing() -> None:
    low = run("scenarios/basics", "--coverage-fail-under", "10")
    assert low.returncode == 0, low.stderr
    assert "behaviour coverage" not in low.stdout  # the table only with --coverage
    high = run("scenarios/basics", "--coverage-fail-under", "90")
    assert high.returncode == 1
    assert "openprogram-sim: behaviour coverage 12.5% is below the floor of 90%" in high.stderr
    assert "not exercised: unknown_tool, invalid_arguments" in high.stderr


def test_misuse_exits_two_with_the_fix() -> None:
    typo = run("scenarios/basics", "--coverage-require", "cap_hit,steering_skp")
    assert typo.returncode == 2
    assert "did you mean 'steering_skip'" in typo.stderr
    alone = run("scenarios/basics", "--suggest")
    assert alone.returncode == 2 and "--suggest goes with --coverage" in alone.stderr
    over = run("scenarios/basics", "--coverage-fail-under", "120")
    assert over.returncode == 2 and "from 0 to 100" in over.stderr


def test_suggested_starters_close_the_gaps_when_saved(tmp_path: Path) -> None:
    result = run("scenarios/basics", "--coverage", "--suggest")
    assert result.returncode == 0, result.stderr
    chunks = result.stdout.split("\n# ---- starter for ")[1:]
    found = {chunk.split(" ", 1)[0]: chunk.split("\n", 1)[1] for chunk in chunks}
    table = json.loads(run("scenarios/basics", "--coverage", "--json").stdout)["behaviours"]
    missing = [id for id, entry in table.items() if not entry["exercised"]]
    assert sorted(found) == sorted(missing)
    assert "`openprogram-sim schema > schema/scenario.schema.json`" in result.stdout
    for id, text in found.items():
        assert text.startswith("# yaml-language-server: $schema=../schema/scenario.schema.json\n")
        doc = yaml.safe_load(text)
        assert doc["description"].startswith(("Seed: ", "DESIGN: "))
        (tmp_path / f"{id}.yaml").write_text(text)
    closed = run(str(tmp_path), "--coverage", "--json", "--coverage-require", ",".join(missing))
    assert closed.returncode == 0, closed.stderr
    data = json.loads(closed.stdout)
    assert data["summary"]["passed"] == len(missing)
    for id in missing:  # each starter asserts its own behaviour
        assert any(p.endswith(f"/{id}.yaml") for p in data["behaviours"][id]["asserted"]), id
