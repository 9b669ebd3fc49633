"""The gates CI enforces, as tests: ruff lint and format, mypy strict on the engine and the
harness."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; install the test extra: pip install -e '.[test]'")
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_lint_is_clean() -> None:
    result = _run(_tool("ruff"), "check", "openprogram", "openprogram_sim", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = _run(
        _tool("ruff"), "format", "--check", "openprogram", "openprogram_sim", "tests", "bench"
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_strict_on_the_engine_and_the_harness_is_clean() -> None:
    result = _run(_tool("mypy"), "openprogram", "openprogram_sim")
    assert result.returncode == 0, result.stdout + result.stderr


def test_test_module_names_are_unique() -> None:
    """Test folders are not packages (rootdir-relative imports): two test files with one
    basename make pytest refuse to collect the second ("import file mismatch")."""
    names: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    clashes = {name: paths for name, paths in names.items() if len(paths) > 1}
    assert clashes == {}, f"rename one of each: {clashes}"
