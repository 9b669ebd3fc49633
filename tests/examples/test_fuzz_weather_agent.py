"""``openprogram-sim fuzz`` on the example project's own tools, as its README runs it: real
processes in a copy of ``examples/weather_agent``, with bugs planted in the copy's tools.

Each planted bug is found within a bounded, seeded campaign; the regression file names the
tools by import path, and ``openprogram-sim run`` on it exits 1 while the bug is there (a
tool that blocks the event loop included: the run's deadline interrupts it) and 0 once the
copy's tools are restored (the fix). The example as it is breaks nothing.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

# Each test runs fuzz campaigns in real processes (about 70 s for the file): the inner loop
# (`pytest -m "not slow"`) leaves them to CI.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "weather_agent"
SIM = str(Path(sys.executable).parent / "openprogram-sim")
README_COMMAND = [SIM, "fuzz", "--registry", "weather_agent.tools:registry", "--examples", "500"]


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "weather_agent"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _plant(copy: Path, *edits: tuple[str, str]) -> str:
    """Apply ``(old, new)`` edits to the copy's tools.py; returns the original text."""
    tools = copy / "src" / "weather_agent" / "tools.py"
    original = text = tools.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    tools.write_text(text)
    return original


def _fix(copy: Path, original: str) -> None:
    (copy / "src" / "weather_agent" / "tools.py").write_text(original)


def _sim(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SIM, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def _regressions(copy: Path) -> list[Path]:
    return sorted((copy / "scenarios" / "regressions").glob("fuzz_*.yaml"))


def test_the_example_as_it_is_breaks_nothing(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    done = subprocess.run(README_COMMAND, cwd=copy, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "over weather_agent.tools:registry (get_weather, convert, book_flight, plan_trip)" in out
    assert "no invariant or tool contract broken in 500 runs (seed 0)" in out
    # the real tools ran: each was called, some calls succeeded, nested runs happened
    by_name = next(line for line in out.splitlines() if "by name" in line)
    assert all(name in by_name for name in ("get_weather", "convert", "book_flight", "plan_trip"))
    assert " ok " in next(line for line in out.splitlines() if "tool calls" in line)
    assert "deepest: depth 1" in out
    assert _regressions(copy) == []


def test_a_tool_returning_a_value_json_cannot_encode(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    original = _plant(
        copy,
        ("import os\n", "import decimal\nimport os\n"),
        (
            "return round(celsius * 9 / 5 + 32, 1)",
            'return {"fahrenheit": decimal.Decimal(str(round(celsius * 9 / 5 + 32, 1)))}',
        ),
    )
    found = subprocess.run(README_COMMAND, cwd=copy, capture_output=True, text=True, timeout=120)
    assert found.returncode == 1, found.stdout + found.stderr
    assert "TOOL CONTRACT BROKEN" in found.stdout
    assert "convert(" in found.stdout and "returned a dict that JSON cannot encode" in found.stdout
    [path] = _regressions(copy)
    assert f"regression scenario written: {path.relative_to(copy)} (reproduces it)" in found.stdout
    doc = yaml.safe_load(path.read_text())
    assert doc["registry"] == "weather_agent.tools:registry"  # the real tools, by import path
    assert doc["exec"]["tools"] == ["convert"]
    assert [next(iter(c)) for c in doc["model"][0]["tool_calls"]] == ["convert"]
    assert doc["expect"]["not_events"][0]["tool_execution_end"]["is_error"] is False

    failing = _sim("run", str(path.relative_to(copy)), cwd=copy)
    assert failing.returncode == 1, failing.stdout
    assert "an event that must not occur occurred" in failing.stdout
    _fix(copy, original)
    assert _sim("run", str(path.relative_to(copy)), cwd=copy).returncode == 0


def test_a_tool_that_never_answers(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    original = _plant(
        copy,
        ("import os\n", "import asyncio\nimport os\n"),
        ("def get_weather(", "async def get_weather("),
        (
            'raise ValueError(f"no weather station in {city!r}")',
            "await asyncio.Event().wait()  # the station never answers",
        ),
    )
    start = time.perf_counter()
    found = _sim(*README_COMMAND[1:], "--timeout", "1", cwd=copy)
    assert time.perf_counter() - start < 60
    assert found.returncode == 1, found.stdout + found.stderr
    assert "did not end within its time limit of 1 s" in found.stdout
    assert "get_weather(" in found.stdout
    [path] = _regressions(copy)
    doc = yaml.safe_load(path.read_text())
    assert doc["registry"] == "weather_agent.tools:registry" and doc["timeout"] == 1.0
    assert doc["model"][0]["tool_calls"] == [{"get_weather": {"city": ""}}]  # simplest args

    failing = _sim("run", str(path.relative_to(copy)), cwd=copy)
    assert failing.returncode == 1, failing.stdout
    assert "did not finish within its timeout of 1 s" in failing.stdout
    _fix(copy, original)
    fixed = _sim("run", str(path.relative_to(copy)), cwd=copy)
    assert fixed.returncode == 0, fixed.stdout


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the run's deadline needs SIGALRM")
def test_a_tool_that_blocks_the_event_loop(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    original = _plant(
        copy,
        ("import os\n", "import os\nimport time\n"),
        (
            'raise ValueError(f"no weather station in {city!r}")',
            "time.sleep(3600)  # the station's socket has no timeout",
        ),
    )
    start = time.perf_counter()
    found = _sim(*README_COMMAND[1:], "--timeout", "1", cwd=copy)
    assert time.perf_counter() - start < 60  # the campaign does not hang with the tool
    assert found.returncode == 1, found.stdout + found.stderr
    assert "blocked the event loop" in found.stdout and "its process was killed" in found.stdout
    assert "get_weather(" in found.stdout
    [path] = _regressions(copy)
    assert f"regression scenario written: {path.relative_to(copy)} (reproduces it)" in found.stdout
    doc = yaml.safe_load(path.read_text())
    assert doc["registry"] == "weather_agent.tools:registry" and doc["timeout"] == 1.0
    assert doc["model"][0]["tool_calls"] == [{"get_weather": {"city": ""}}]  # simplest args
    assert "SIGALRM" in doc["description"]

    start = time.perf_counter()
    failing = _sim("run", str(path.relative_to(copy)), cwd=copy)
    assert time.perf_counter() - start < 15  # interrupted 1 s after the timeout, not 3600 s
    assert failing.returncode == 1, failing.stdout
    assert (
        "did not finish within its timeout of 1 s (real time): tool 'get_weather' blocked the "
        "event loop and was interrupted"
    ) in failing.stdout
    _fix(copy, original)
    fixed = _sim("run", str(path.relative_to(copy)), cwd=copy)
    assert fixed.returncode == 0, fixed.stdout


@pytest.mark.parametrize("where", ["in the project", "elsewhere, with --pythonpath"])
def test_tools_named_one_by_one(tmp_path: Path, where: str) -> None:
    copy = _copy(tmp_path)
    # braces too many: a set, which JSON cannot encode
    original = _plant(
        copy, ("return round(celsius * 9 / 5 + 32, 1)", "return {round(celsius * 9 / 5 + 32, 1)}")
    )
    cwd, extra = copy, []
    if where != "in the project":
        cwd = tmp_path / "elsewhere"
        cwd.mkdir()
        extra = ["--pythonpath", str(copy / "src")]
    refs = "weather_agent.tools:convert,weather_agent.tools:get_weather"
    found = _sim("fuzz", "--tools", refs, "--examples", "300", "--seed", "3", *extra, cwd=cwd)
    assert found.returncode == 1, found.stdout + found.stderr
    [path] = sorted((cwd / "scenarios" / "regressions").glob("fuzz_*.yaml"))
    doc = yaml.safe_load(path.read_text())
    assert doc["tools"] == {
        "convert": {"python": "weather_agent.tools:convert"},
        "get_weather": {"python": "weather_agent.tools:get_weather"},
    }
    replay = f"openprogram-sim run {path.relative_to(cwd)}" + "".join(f" {a}" for a in extra)
    assert replay in found.stdout
    assert _sim("run", str(path), *extra, cwd=cwd).returncode == 1
    _fix(copy, original)
    assert _sim("run", str(path), *extra, cwd=cwd).returncode == 0
