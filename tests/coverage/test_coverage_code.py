"""The user's own tool code measured per scenario: the example project (examples/
weather_agent) run with --coverage-source, its data file opened by coverage.py's own
commands in real processes, alone and combined from pytest-xdist workers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "weather_agent"
BIN = Path(sys.executable).parent
SCENARIOS = sorted(f"scenarios/{p.name}" for p in (EXAMPLE / "scenarios").glob("*.yaml"))


def _run(*command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "weather_agent"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns(".coverage*", "__pycache__"))
    return copy


def _contexts(project: Path) -> dict[str, dict[int, set[str]]]:
    """``coverage json --show-contexts`` in a real process: per function of tools.py, each
    line's contexts."""
    done = _run(str(BIN / "coverage"), "json", "--show-contexts", "-o", "cov.json", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    files = json.loads((project / "cov.json").read_text())["files"]
    tools = files["src/weather_agent/tools.py"]["functions"]
    return {
        name: {int(n): set(c) for n, c in entry["contexts"].items()}
        for name, entry in tools.items()
    }


def _line(project: Path, text: str) -> int:
    lines = (project / "src" / "weather_agent" / "tools.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if text in line)


def test_each_scenario_is_a_context_and_coverage_opens_the_file(project: Path) -> None:
    ran = _run(str(BIN / "openprogram-sim"), "run", "scenarios", "--coverage-source",
               "weather_agent", "--report", "r.html", cwd=project)  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    table = ran.stdout[ran.stdout.index("tool code coverage (") :]
    rows = {line.split()[0]: line.split() for line in table.splitlines()[2:]}
    assert rows["get_weather"][3:7] == ["4/4", "100%", "2/2", "100%"]
    assert rows["convert"][3:5] == ["2/5", "40%"]  # fahrenheit only: kelvin and the error not
    assert rows["weather_agent.agent:answer"][-1] == "1"

    contexts = _contexts(project)
    no_station = _line(project, 'raise ValueError(f"no weather station')
    assert contexts["get_weather"][no_station] == {"scenarios/unknown_city.yaml"}
    fahrenheit = _line(project, "return round(celsius * 9 / 5 + 32, 1)")
    assert contexts["convert"][fahrenheit] == {"scenarios/weather_then_convert.yaml"}
    first = _line(project, "celsius = _READINGS.get(")
    assert contexts["get_weather"][first] == {
        "scenarios/app_entry_point.yaml",
        "scenarios/plan_trip_nested.yaml",  # in the nested run's worker thread
        "scenarios/unknown_city.yaml",
        "scenarios/weather_then_convert.yaml",
    }  # station_offline_stub stubs get_weather out, so its code never ran

    report = _run(str(BIN / "coverage"), "report", "--contexts", "unknown_city", "-m", cwd=project)
    assert report.returncode == 0, report.stderr
    assert "src/weather_agent/tools.py" in report.stdout
    html = _run(str(BIN / "coverage"), "html", "--show-contexts", "-d", "html", cwd=project)
    assert html.returncode == 0, html.stderr
    page = next((project / "html").glob("*tools_py.html")).read_text()
    assert "scenarios/unknown_city.yaml" in page

    served = (project / "r.html").read_text()
    assert '<details class="tool-code" id="code-get_weather">' in served
    assert 'data-goto="t' in served[served.index('id="tool-code"') :]


@pytest.mark.slow
def test_xdist_workers_data_is_combined_into_one_file(project: Path) -> None:
    ran = _run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
               "--openprogram-scenarios", "--openprogram-coverage-source", "weather_agent",
               cwd=project)  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "openprogram tool code coverage" in ran.stdout
    leftovers = [p.name for p in project.iterdir() if p.name.startswith(".coverage")]
    assert leftovers == [".coverage"]  # the workers' parts were combined and removed
    contexts = _contexts(project)
    seen = {c for lines in contexts.values() for cs in lines.values() for c in cs}
    assert set(SCENARIOS) - {"scenarios/station_offline_stub.yaml"} <= seen
    assert any(c.startswith("tests/test_agent.py::") for c in seen)  # a Python test's node id
    no_station = _line(project, 'raise ValueError(f"no weather station')
    assert contexts["get_weather"][no_station] == {"scenarios/unknown_city.yaml"}


def test_it_refuses_to_pause_a_measurement_already_running(project: Path) -> None:
    ran = _run(str(BIN / "coverage"), "run", "-m", "openprogram_sim.cli", "run", "scenarios",
               "--coverage-source", "weather_agent", cwd=project)  # fmt: skip
    assert ran.returncode == 2
    assert "coverage.py is already measuring this process" in ran.stderr
    assert "--cov-context=test" in ran.stderr
