"""The example project (examples/weather_agent) run as its users run it: real processes in
its folder, its real tools imported through its pyproject's pythonpath."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "weather_agent"
BIN = Path(sys.executable).parent


def _run(*command: str, cwd: Path = EXAMPLE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_its_scenarios_pass_through_the_cli() -> None:
    result = _run(str(BIN / "openprogram-sim"), "run", "scenarios")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith("6 scenarios: 6 passed")


def test_its_scenarios_and_tests_pass_under_pytest() -> None:
    result = _run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                  "--openprogram-scenarios")  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "7 passed" in result.stdout


def test_a_broken_tool_fails_its_scenario(tmp_path: Path) -> None:
    # the scenarios run the real code: break convert and the scenario that uses it fails
    copy = tmp_path / "weather_agent"
    subprocess.run(["cp", "-r", str(EXAMPLE), str(copy)], check=True)
    tools = copy / "src" / "weather_agent" / "tools.py"
    tools.write_text(tools.read_text().replace("celsius * 9 / 5 + 32", "celsius * 9 / 5"))
    result = _run(str(BIN / "openprogram-sim"), "run", "scenarios", cwd=copy)
    assert result.returncode == 1
    assert "FAIL  scenarios/weather_then_convert.yaml" in result.stdout
    assert 'result     "53.6"' in result.stdout and '"21.6"' in result.stdout


def test_init_writes_a_starter_that_passes(tmp_path: Path) -> None:
    # run in the project: its pyproject's [tool.openprogram] pythonpath finds the package
    target, schema = tmp_path / "starter.yaml", tmp_path / "schema" / "scenario.schema.json"
    made = _run(str(BIN / "openprogram-sim"), "init", "weather_agent.tools:registry", "-o",
                str(target), "--schema", str(schema))  # fmt: skip
    assert made.returncode == 0, made.stderr
    text = target.read_text()
    assert text.startswith("# yaml-language-server: $schema=schema/scenario.schema.json\n")
    assert schema.is_file()  # written beside it, not into the example project
    doc = yaml.safe_load(text)
    assert doc["registry"] == "weather_agent.tools:registry"
    assert [next(iter(t["tool_calls"][0])) for t in doc["model"][:-1]] == [
        "get_weather", "convert", "book_flight", "plan_trip",
    ]  # fmt: skip
    assert doc["tools"]["plan_trip"]["python"] == "weather_agent.tools:plan_trip"
    ran = _run(str(BIN / "openprogram-sim"), "run", str(target), "--pythonpath",
               str(EXAMPLE / "src"), cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    missing = _run(str(BIN / "openprogram-sim"), "init", "weather_agent.tools:registry",
                   cwd=tmp_path)  # fmt: skip
    assert missing.returncode == 2
    assert "cannot import module 'weather_agent.tools'" in missing.stderr
