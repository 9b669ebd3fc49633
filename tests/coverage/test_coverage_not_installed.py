"""``--coverage-source`` where coverage.py is not installed: one line that says what to
install and which extra holds it, never a traceback, from the CLI and from the plugin."""

from __future__ import annotations

import re
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
from _support import run_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_coverage(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import coverage`` fails as it does where coverage.py is not installed."""
    monkeypatch.setitem(sys.modules, "coverage", None)


def _extra_named(message: str) -> tuple[str, str]:
    found = re.search(r"pip install '([\w.-]+)\[(\w+)\]'", message)
    assert found, message
    return found[1], found[2]


def test_the_cli_says_what_to_install(no_coverage: None, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "scenarios" / "basics", tmp_path / "scenarios")
    out = run_cli("run", "scenarios", "--coverage-source", "tools", cwd=tmp_path)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith(
        "openprogram-sim: --coverage-source: measuring tool code needs coverage.py, which is "
        "not installed: pip install '"
    ), out.stderr
    assert out.stdout == ""  # nothing ran


def test_the_extra_it_names_holds_coverage(no_coverage: None, tmp_path: Path) -> None:
    out = run_cli("run", "scenarios", "--coverage-source", "tools", cwd=tmp_path)
    name, extra = _extra_named(out.stderr)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert name == project["name"]
    assert any(r.startswith("coverage") for r in project["optional-dependencies"][extra])


def test_the_plugin_says_it_as_a_usage_error(no_coverage: None, pytester: pytest.Pytester) -> None:
    shutil.copytree(ROOT / "scenarios" / "basics", pytester.path / "scenarios")
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--openprogram-scenarios", "--openprogram-coverage-source",
        "tools",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert err.startswith(
        "ERROR: --openprogram-coverage-source: measuring tool code needs coverage.py, which is "
        "not installed: pip install '"
    ), err
    assert _extra_named(err)[1] == "coverage"
    assert "Traceback" not in err
