"""Under pytest, a scenario file's Python is imported when its item runs: collecting
(``--collect-only``) and deselecting (``-k``, ``-m``) import nothing, and a reference that
does not import, or names a standard-library callable, fails the item with the file's line."""

from __future__ import annotations

from pathlib import Path

import pytest
from _trusted import PLAIN, TOOLS, TRUSTED


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A tool module (a unique name) that writes ``imported.marker`` when imported, a
    scenario naming it (tagged ``mine``) and a plain one."""
    module = f"marker_tools_{abs(hash(pytester.path)) % 10**8}"
    pytester.makepyfile(**{module: TOOLS})
    scenarios = pytester.mkdir("scenarios")
    (scenarios / "trusted.yaml").write_text(TRUSTED.replace("MOD", module))
    (scenarios / "plain.yaml").write_text(PLAIN)
    return pytester


def marker(project: pytest.Pytester) -> Path:
    return project.path / "imported.marker"


def test_collect_only_imports_nothing(project: pytest.Pytester) -> None:
    result = project.runpytest("--collect-only", "-q", "--openprogram-scenarios")
    result.stdout.fnmatch_lines(["scenarios/trusted.yaml::uses my tool", "2 tests collected*"])
    assert not marker(project).exists()


@pytest.mark.parametrize("flags", [["-k", "plain"], ["-m", "not mine"]], ids=["keyword", "marker"])
def test_a_deselected_item_imports_nothing(project: pytest.Pytester, flags: list[str]) -> None:
    result = project.runpytest("--openprogram-scenarios", "--strict-markers", *flags)
    result.assert_outcomes(passed=1, deselected=1)
    assert not marker(project).exists()


def test_the_item_imports_the_module_when_it_runs(project: pytest.Pytester) -> None:
    result = project.runpytest("--openprogram-scenarios", "--strict-markers")
    result.assert_outcomes(passed=2)
    assert marker(project).read_text() == "imported"


def test_an_import_error_fails_the_item_with_the_file_line(pytester: pytest.Pytester) -> None:
    scenarios = pytester.mkdir("scenarios")
    (scenarios / "missing.yaml").write_text(
        'scenario: missing module\ntools:\n  lookup: {python: "no_such_module_qq:lookup"}\n'
        'exec: {content: "Go.", tools: [lookup]}\nmodel: [{text: "x"}]\n'
    )
    collected = pytester.runpytest("--collect-only", "-q", "--openprogram-scenarios")
    collected.stdout.fnmatch_lines(["scenarios/missing.yaml::missing module"])  # loads fine
    result = pytester.runpytest("--openprogram-scenarios")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "invalid scenario file scenarios/missing.yaml:",
            "  scenarios/missing.yaml:3: (tools.lookup.python) cannot import module "
            "'no_such_module_qq' for 'no_such_module_qq:lookup': ModuleNotFoundError: No "
            "module named 'no_such_module_qq' (searched from *",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_stdlib_callable_fails_the_item_and_runs_nothing(pytester: pytest.Pytester) -> None:
    scenarios = pytester.mkdir("scenarios")
    (scenarios / "shell.yaml").write_text(
        'scenario: a shell command\ncall: "subprocess:getoutput"\n'
        f'args: {{cmd: "touch {pytester.path}/PWNED"}}\nmodel: []\n'
    )
    result = pytester.runpytest("--openprogram-scenarios")
    result.assert_outcomes(failed=1)
    assert (
        "invalid scenario file scenarios/shell.yaml:\n"
        "  scenarios/shell.yaml:2: (call) 'subprocess:getoutput' is subprocess.getoutput, of "
        "the standard library or the builtins: a scenario file may name only your own code "
        "unless you allow it, since such a callable can run commands or change files; to "
        "allow it, write in a pyproject.toml in scenarios or above it: [tool.openprogram] "
        'allow-stdlib-callables = ["subprocess:getoutput"]\n'
    ) in result.stdout.str()
    assert not (pytester.path / "PWNED").exists()
    (pytester.path / "pyproject.toml").write_text(
        '[tool.openprogram]\nallow-stdlib-callables = ["subprocess:getoutput"]\n'
    )
    result = pytester.runpytest("--openprogram-scenarios")
    result.assert_outcomes(passed=1)  # allowed: it ran (and expects nothing)
    assert (pytester.path / "PWNED").exists()
