"""`pytest --openprogram-coverage*`: the table, the JSON, the floor, and pytest-xdist, where
each worker's scenarios travel to the controller on their reports."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _support import run_cli

from openprogram_sim.coverage import CATALOGUE

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("basics", "steering", "nested", "cap")


@pytest.fixture
def library(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester project with a part of the scenario library under scenarios/."""
    for folder in FOLDERS:
        shutil.copytree(ROOT / "scenarios" / folder, pytester.path / "scenarios" / folder)
    return pytester


def _cli_json(cwd: Path) -> dict:
    out = run_cli("run", "scenarios", "--coverage", "--json", cwd=cwd)
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout)
    keys = ("behaviours", "exercised_percent", "asserted_percent", "expectations")
    return {k: data[k] for k in keys}


def test_the_table_and_the_json_are_the_clis(library: pytest.Pytester) -> None:
    result = library.runpytest(
        "-p", "no:cacheprovider", "--openprogram-scenarios", "--openprogram-coverage",
        "--openprogram-coverage-json", "out/cov.json",
    )  # fmt: skip
    result.assert_outcomes(passed=len(list((library.path / "scenarios").rglob("*.yaml"))))
    result.stdout.fnmatch_lines(
        ["*openprogram behaviour coverage*", f"behaviour coverage: {len(CATALOGUE)} behaviours, *"]
    )
    data = json.loads((library.path / "out" / "cov.json").read_text())
    assert data == _cli_json(library.path)
    assert data["behaviours"]["hard_cap_50"]["asserted"] == [
        "scenarios/cap/hard_cap_100_asked_50_run.yaml",
        "scenarios/cap/hard_cap_default_50.yaml",
    ]


@pytest.mark.slow
def test_under_xdist_the_controller_adds_up_every_worker(library: pytest.Pytester) -> None:
    result = library.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--openprogram-scenarios", "--openprogram-coverage",
        "--openprogram-coverage-json", "cov.json", "--openprogram-report", "r.html", timeout=300,
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*2 workers*", "*openprogram behaviour coverage*"])
    assert json.loads((library.path / "cov.json").read_text()) == _cli_json(library.path)
    assert 'id="coverage"' in (library.path / "r.html").read_text()


def test_a_required_behaviour_no_scenario_exercises_fails_the_session(
    library: pytest.Pytester,
) -> None:
    result = library.runpytest(
        "-p", "no:cacheprovider", "--openprogram-scenarios",
        "--openprogram-coverage-require", "tool_round,deferred_tool_loaded",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes().get("failed", 0) == 0  # every test passed
    result.stdout.fnmatch_lines(
        [
            "FAIL openprogram coverage: 1 required behaviour(s) not exercised by any scenario:",
            "  deferred_tool_loaded: a deferred tool is loaded by tool_search and then called *",
        ]
    )
    below = library.runpytest(
        "-p", "no:cacheprovider", "--openprogram-scenarios", "--openprogram-coverage-fail-under",
        "95",
    )  # fmt: skip
    assert below.ret == pytest.ExitCode.TESTS_FAILED
    below.stdout.fnmatch_lines(["FAIL openprogram coverage: behaviour coverage *% is below *"])


def test_an_unknown_id_is_a_usage_error(library: pytest.Pytester) -> None:
    result = library.runpytest(
        "-p", "no:cacheprovider", "--openprogram-scenarios",
        "--openprogram-coverage-require", "steering_skp",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*did you mean 'steering_skip'*"])


def test_without_the_options_nothing_is_registered_or_imported(library: pytest.Pytester) -> None:
    library.makeconftest(
        """
        def pytest_sessionfinish(session):
            assert session.config.pluginmanager.get_plugin("openprogram-coverage") is None
        """
    )
    library.runpytest("-p", "no:cacheprovider", "--openprogram-scenarios").assert_outcomes(
        passed=len(list((library.path / "scenarios").rglob("*.yaml")))
    )
    code = (
        "import sys, openprogram_sim.plugin\n"
        "loaded = [m for m in ('coverage', 'openprogram_sim.coverage') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
