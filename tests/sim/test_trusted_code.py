"""A scenario file that names Python is trusted like a test file, and only when it runs: a
file that is filtered out imports nothing (its module's top-level code never runs), and a
standard-library or builtin callable (``subprocess:getoutput``, ``os:system``,
``builtins:eval``) is refused unless ``[tool.openprogram] allow-stdlib-callables`` lists it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from _support import run_cli
from _trusted import PLAIN, TOOLS, TRUSTED

from openprogram_sim import ScenarioError, check_outcome, load_scenario, run_scenario


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, str]:
    """A folder with a tool module (a unique name: in-process runs keep modules imported)
    that writes ``imported.marker`` when imported, a scenario naming it and a plain one."""
    module = f"marker_tools_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{module}.py").write_text(TOOLS)
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "trusted.yaml").write_text(TRUSTED.replace("MOD", module))
    (tmp_path / "scenarios" / "plain.yaml").write_text(PLAIN)
    return tmp_path, module


@pytest.mark.parametrize(
    "flags",
    [["-k", "plain"], ["-m", "not mine"], ["-m", "nosuchtag"]],
    ids=["keyword", "not-tag", "other-tag"],
)
def test_run_imports_nothing_for_a_file_its_filters_leave_out(
    project: tuple[Path, str], flags: list[str]
) -> None:
    folder, _ = project
    result = run_cli("run", "scenarios", "--pythonpath", str(folder), *flags, cwd=folder)
    assert result.returncode in (0, 2), result.stdout + result.stderr
    assert "trusted.yaml" not in result.stdout
    assert not (folder / "imported.marker").exists()


def test_run_imports_the_module_when_the_scenario_runs(project: tuple[Path, str]) -> None:
    folder, _ = project
    result = run_cli("run", "scenarios", "--pythonpath", str(folder), cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  scenarios/trusted.yaml" in result.stdout
    assert (folder / "imported.marker").read_text() == "imported"


def test_loading_imports_nothing(project: tuple[Path, str]) -> None:
    folder, _ = project
    load_scenario(folder / "scenarios" / "trusted.yaml", pythonpath=[folder])
    assert not (folder / "imported.marker").exists()


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


CALL = """\
scenario: a shell command
call: "{ref}"
args: {{cmd: "touch {folder}/PWNED"}}
model: [{{text: "x"}}]
"""


def test_a_stdlib_callable_is_refused_with_the_file_line_and_the_fix(tmp_path: Path) -> None:
    write(tmp_path, "shell.yaml", CALL.format(ref="subprocess:getoutput", folder=tmp_path))
    result = run_cli("run", "shell.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "ERROR shell.yaml  (could not load: 1 problem(s))" in result.stdout
    assert (
        "  shell.yaml:2: (call) 'subprocess:getoutput' is subprocess.getoutput, of the standard "
        "library or the builtins: a scenario file may name only your own code unless you "
        "allow it, since such a callable can run commands or change files; to allow it, "
        "write in a pyproject.toml in . or above it: [tool.openprogram] "
        'allow-stdlib-callables = ["subprocess:getoutput"]'
    ) in result.stdout
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize(
    ("ref", "origin"),
    [
        ("os:system", "os.system"),
        ("builtins:eval", "builtins.eval"),
        ("shutil:rmtree", "shutil.rmtree"),
        ("subprocess:Popen", "subprocess.Popen"),
        ("os.path:join", "os.path.join"),
        ("json:loads", "json.loads"),
    ],
)
def test_every_stdlib_or_builtin_callable_is_refused(tmp_path: Path, ref: str, origin: str) -> None:
    scenario = load_scenario(
        write(tmp_path, "s.yaml", CALL.format(ref=ref, folder=tmp_path)), shown_as="s.yaml"
    )
    with pytest.raises(ScenarioError) as info:
        run_scenario(scenario)
    (issue,) = info.value.issues
    assert str(issue).startswith(f"s.yaml:2: (call) {ref!r} is ")
    assert f'allow-stdlib-callables = ["{ref}"]' in str(issue)
    assert f"is {origin}, of the standard library" in str(issue)
    assert not (tmp_path / "PWNED").exists()


def test_a_reexport_from_a_user_module_is_judged_by_the_object(tmp_path: Path) -> None:
    module = f"reexports_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{module}.py").write_text(
        "from os import system\nfrom subprocess import getoutput as run\n"
        "tool = {'spec': {'name': 'shell', 'parameters': {'type': 'object'}}, 'execute': system}\n"
    )
    (tmp_path / "pyproject.toml").write_text("[tool.openprogram]\n")
    path = write(
        tmp_path,
        "s.yaml",
        f"""\
        scenario: re-exported
        call: "{module}:run"
        tools:
          shell: {{python: "{module}:tool"}}
        model: [{{text: "x"}}]
        """,
    )
    with pytest.raises(ScenarioError) as info:
        run_scenario(load_scenario(path, shown_as="s.yaml"))
    assert [str(i).split(", of the")[0] for i in info.value.issues] == [
        f"s.yaml:2: (call) '{module}:run' is subprocess.getoutput",
        f"s.yaml:4: (tools.shell.python) '{module}:tool' is posix.system",
    ]
    config = tmp_path / "pyproject.toml"
    assert all(
        f'write in {config}: [tool.openprogram] allow-stdlib-callables = ["' in str(i)
        for i in info.value.issues
    )


def test_the_setting_allows_a_callable_by_name(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.openprogram]\nallow-stdlib-callables = ["subprocess:getoutput"]\n'
    )
    path = write(tmp_path, "shell.yaml", CALL.format(ref="subprocess:getoutput", folder=tmp_path))
    outcome = run_scenario(load_scenario(path))
    assert outcome.error is None and outcome.result == ""
    assert (tmp_path / "PWNED").exists()  # allowed: the command ran
    other = write(tmp_path, "other.yaml", CALL.format(ref="os:system", folder=tmp_path))
    with pytest.raises(ScenarioError, match=r"'os:system' is os\.system"):
        run_scenario(load_scenario(other))  # only what is listed


def test_a_bad_setting_is_named(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.openprogram]\nallow-stdlib-callables = "subprocess:getoutput"\n'
    )
    path = write(tmp_path, "shell.yaml", CALL.format(ref="subprocess:getoutput", folder=tmp_path))
    with pytest.raises(ScenarioError) as info:
        run_scenario(load_scenario(path, shown_as="shell.yaml"))
    assert str(info.value.issues[0]) == (
        f"shell.yaml:2: (call) {tmp_path / 'pyproject.toml'}: [tool.openprogram] "
        "allow-stdlib-callables must be a list of references such as "
        "[\"subprocess:getoutput\"] (got 'subprocess:getoutput')"
    )


def test_a_stdlib_setup_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "s.yaml",
        'scenario: s\nsetup: "os:getcwd"\nexec: {content: go}\nmodel: [{text: hi}]\n',
    )
    outcome = run_scenario(load_scenario(path, shown_as="s.yaml"))
    assert not outcome.started
    (failure,) = check_outcome(outcome).failures
    assert failure.title.startswith(
        "setup 'os:getcwd' is refused: 'os:getcwd' is os.getcwd, of the standard library"
    )
