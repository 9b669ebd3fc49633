"""The distribution as users install it (issue 22). It is openprogram-sim: the index's
"openprogram" is another project that also provides ``import openprogram``. Every install
line names openprogram-sim (or a clone or a wheel), and an import of ours names the clash
when the other project's files are what Python finds. (.ci/check_dist.py builds the sdist and
the wheel, installs the wheel into a fresh venv and runs the main job from it.)"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import openprogram_sim

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "weather_agent"
BIN = Path(sys.executable).parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# where a user reads an install line: the pages, the example, and our own error messages
INSTALL_TEXTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "examples").rglob("README.md")),
    *sorted((ROOT / "examples").rglob("pyproject.toml")),
    *sorted((ROOT / "openprogram").rglob("*.py")),
    *sorted((ROOT / "openprogram_sim").rglob("*.py")),
]


def _name(requirement: str) -> str | None:
    """The distribution a requirement names (PEP 503 normalized); None for a path or URL."""
    found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    if found is None or requirement.startswith((".", "/", "~")) or "://" in requirement:
        return None
    return re.sub(r"[-_.]+", "-", found.group()).lower()


def _install_arguments(text: str) -> list[str]:
    """Every argument of every ``pip install`` command in ``text`` (code spans and blocks)."""
    arguments = []
    for found in re.finditer(r"pip install ([^`\n]*)", text):
        command = re.split(r"&&|;|\|\||\)|\s#", found.group(1))[0]
        try:
            words = shlex.split(command)
        except ValueError:  # a quote that opens in prose
            words = command.split()
        words = [w.strip("'\"").rstrip(",") for w in words if not w.startswith("-")]
        arguments += [w.rstrip(".") if len(w) > 1 else w for w in words]  # "." is a path
    return arguments


def test_the_distribution_is_openprogram_sim() -> None:
    project = PYPROJECT["project"]
    assert project["name"] == "openprogram-sim"
    assert "openprogram-sim[test,bench,docs]" in project["optional-dependencies"]["dev"]
    for extra, requirements in project["optional-dependencies"].items():
        assert all(_name(r) != "openprogram" for r in requirements), extra
    assert project["scripts"] == {"openprogram-sim": "openprogram_sim.cli:main"}


def test_the_install_line_reader_catches_a_bare_openprogram() -> None:
    # the shapes the old lines had, each caught (so the test below can fail)
    old = ("`pip install openprogram`", "`pip install 'openprogram[fuzz]'`",
           '"pip install openprogram[aws], or "', "pip install -q openprogram==0.5")  # fmt: skip
    for line in old:
        assert "openprogram" in [_name(a) for a in _install_arguments(line)], line
    new = ("`pip install openprogram-sim`", "`pip install 'openprogram-sim[fuzz]'`",
           "pip install -e /path/to/clone", "pip install dist/openprogram_sim-*.whl",
           "`pip install -e '.[docs]' && mkdocs serve`")  # fmt: skip
    for line in new:
        assert "openprogram" not in [_name(a) for a in _install_arguments(line)], line


@pytest.mark.parametrize("path", INSTALL_TEXTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_install_line_names_the_other_project(path: Path) -> None:
    named = [a for a in _install_arguments(path.read_text()) if _name(a) == "openprogram"]
    assert not named, (
        f'{path.name}: pip install {named[0]} installs another project: say "openprogram-sim"'
    )


def test_the_pages_show_the_index_name_and_the_clone_and_wheel_forms() -> None:
    for page in ("getting-started.md", "your-agent.md"):
        text = (ROOT / "docs" / page).read_text()
        arguments = _install_arguments(text)
        assert "openprogram-sim" in arguments, page
        assert any(a.startswith("/path/to/") for a in arguments), page  # a clone
        assert any(a.endswith(".whl") for a in arguments), page  # a built wheel
    started = (ROOT / "docs" / "getting-started.md").read_text()
    assert "cannot be installed side by side" in started
    assert "pip show openprogram-sim" in started


def test_the_example_depends_on_openprogram_sim_and_its_readme_installs_the_clone() -> None:
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    assert [_name(r) for r in project["dependencies"]] == ["openprogram-sim"]
    readme = (EXAMPLE / "README.md").read_text()
    # the form .ci/check_dist.py resolves with `pip install --dry-run` (from the clone's root)
    assert "pip install -q -e . -e examples/weather_agent" in readme
    check = (ROOT / ".ci" / "check_dist.py").read_text()
    assert '"install", "-q", "--dry-run", "--report", report, "-e", ROOT, "-e", EXAMPLE' in check
    assert ".venv/bin/python .ci/check_dist.py" in (ROOT / ".ci" / "run").read_text()


def test_what_the_readme_says_of_the_test_command_holds() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "The tests take about 4½ minutes on 2 cores" in readme
    test_extra = [_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["test"]]
    assert "`-n auto` (pytest-xdist" in readme and "pytest-xdist" in test_extra
    assert '`.venv/bin/pytest -m "not slow" -n auto`' in readme
    assert any(m.startswith("slow:") for m in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"])


# --- the import guard: another project's `openprogram` first on sys.path ---------------------


def _foreign_site(tmp_path: Path, *, init: bool = True) -> Path:
    """A folder holding another project's ``openprogram``, installed as the index's 0.5.0."""
    site = tmp_path / "site"
    (site / "openprogram").mkdir(parents=True)
    if init:
        (site / "openprogram" / "__init__.py").write_text('"""Another project."""\n')
    else:  # what uninstalling one of two overlapping installs leaves: no __init__.py
        (site / "openprogram" / "runtime.py").write_text("")
    info = site / "openprogram-0.5.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: openprogram\nVersion: 0.5.0\n")
    return site


def _run(command: list[str], site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _assert_names_the_clash(output: str, site: Path) -> None:
    ours = Path(openprogram_sim.__file__).parent
    assert (
        f"ImportError: openprogram_sim cannot start: `import openprogram` finds the package at "
        f'{site / "openprogram"} (the distribution "openprogram" 0.5.0 is installed), not the '
        f'engine that ships with openprogram_sim (distribution "openprogram-sim", at {ours}).\n'
        'The index\'s "openprogram" is a different project. It and "openprogram-sim" both '
        "provide the `openprogram` import, so the two cannot be installed side by side.\n"
        "Fix: pip uninstall openprogram && pip install --force-reinstall openprogram-sim\n"
    ) in output.replace("\nE   ", "\n")  # pytest prefixes each line of the error with "E   "
    assert "AttributeError" not in output


@pytest.mark.parametrize("init", [True, False], ids=["another-init", "no-init"])
def test_importing_openprogram_sim_names_the_other_project(tmp_path: Path, init: bool) -> None:
    site = _foreign_site(tmp_path, init=init)
    result = _run([sys.executable, "-c", "import openprogram_sim"], site, cwd=tmp_path)
    assert result.returncode == 1
    _assert_names_the_clash(result.stderr, site)


def test_the_cli_names_the_other_project(tmp_path: Path) -> None:
    site = _foreign_site(tmp_path)
    result = _run([str(BIN / "openprogram-sim"), "run", str(ROOT / "scenarios")], site, tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""  # not one scenario ran
    _assert_names_the_clash(result.stderr, site)


def test_the_pytest_plugin_names_the_other_project(tmp_path: Path) -> None:
    site = _foreign_site(tmp_path)
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_x.py"]
    result = _run(command, site, tmp_path)
    assert result.returncode != 0
    assert "1 passed" not in result.stdout
    _assert_names_the_clash(result.stdout + result.stderr, site)


def test_our_own_engine_passes_the_guard_without_being_imported(tmp_path: Path) -> None:
    code = "import sys, openprogram_sim; assert 'openprogram' not in sys.modules"
    result = _run([sys.executable, "-c", code], tmp_path, cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def test_a_zipped_copy_of_both_packages_passes_the_guard(tmp_path: Path) -> None:
    # the engine's source is read through its loader, so a zip (zipapp, pex) is no false alarm
    archive = tmp_path / "app.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for package in ("openprogram", "openprogram_sim"):
            for path in (ROOT / package).rglob("*.py"):
                zipped.write(path, path.relative_to(ROOT).as_posix())
    code = "import openprogram_sim; assert openprogram_sim.__file__.startswith(sys.argv[1])"
    result = _run([sys.executable, "-c", f"import sys; {code}", str(archive)], archive, tmp_path)
    assert result.returncode == 0, result.stderr


# --- the wheel ---------------------------------------------------------------------------


@pytest.mark.slow
def test_the_wheel_built_from_the_sdist_holds_both_packages_whole(tmp_path: Path) -> None:
    """What .ci/check_dist.py checks, on its own: the sdist and the wheel built from it."""
    spec = importlib.util.spec_from_file_location("check_dist", ROOT / ".ci" / "check_dist.py")
    assert spec is not None and spec.loader is not None
    check_dist = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check_dist)
    sdist, wheel = check_dist.build(tmp_path)  # builds, then twine check --strict
    assert sdist.name == "openprogram_sim-0.1.0.tar.gz"
    assert wheel.name == "openprogram_sim-0.1.0-py3-none-any.whl"
    check_dist.check_wheel(wheel)  # exits (SystemExit) naming what is missing or foreign
