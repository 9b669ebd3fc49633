"""Scenario files as hostile input: each bad file is that file's clear error (file, line,
fix), in bounded time and memory, while every other file still runs; never a traceback.

The CLI runs through ``main(argv)`` in-process (the loader tests above already run every file
in this process, so a hang there would show first), and pytest collection runs in a real inner
session (pytester).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _support import ONE_SEARCH, CliResult, run_cli

from openprogram_sim.errors import ScenarioError
from openprogram_sim.scenario import discover, load_scenario, parse_scenario
from openprogram_sim.scenario._yaml import MAX_BYTES, MAX_DEPTH, MAX_VALUES

GOOD = ONE_SEARCH


def alias_bomb() -> str:
    """9 levels of 9 aliases each: 9**9 (387 million) strings once expanded, in 342 bytes."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


HOSTILE: dict[str, bytes] = {
    "bomb.yaml": alias_bomb().encode(),
    "binary.yaml": bytes(range(256)),
    "latin1.yaml": "scenario: café au lait\n".encode("latin-1"),
    "utf16.yaml": GOOD.encode("utf-16"),
    "deep.yaml": ("scenario: " + "[" * 500 + "]" * 500 + "\n").encode(),
}

EXPECTED: dict[str, str] = {
    "bomb.yaml": f"its aliases expand to more than {MAX_VALUES:,} values",
    "binary.yaml": "binary.yaml:2: not UTF-8 text (byte 0x80 at offset 128); save the file",
    "latin1.yaml": "latin1.yaml:1: not UTF-8 text (byte 0xe9 at offset 13); save the file",
    "utf16.yaml": "utf16.yaml:1: the file is UTF-16 (it starts with a byte-order mark)",
    "deep.yaml": "deep.yaml:1: ",
}


def cli(*args: str, cwd: Path) -> CliResult:
    return run_cli(*args, cwd=cwd)


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    for name, raw in HOSTILE.items():
        (tmp_path / name).write_bytes(raw)
    (tmp_path / "zz_good.yaml").write_text(GOOD)
    return tmp_path


@pytest.mark.parametrize("name", list(HOSTILE))
def test_each_hostile_file_is_a_clear_error(hostile: Path, name: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(hostile / name, shown_as=name)
    (issue,) = info.value.issues
    assert str(issue).startswith(name), str(issue)
    assert EXPECTED[name] in str(issue)


def test_the_bomb_names_its_line_and_the_fix() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(alias_bomb(), "bomb.yaml")
    text = str(info.value.issues[0])
    assert text.startswith("bomb.yaml:") and "use fewer aliases" in text
    assert info.value.issues[0].line is not None


def test_nesting_past_the_limit_is_refused_even_through_aliases() -> None:
    deep = "a: &a " + "[" * (MAX_DEPTH - 2) + "1" + "]" * (MAX_DEPTH - 2) + "\nb: [[*a]]\n"
    with pytest.raises(ScenarioError, match=f"nested more than {MAX_DEPTH} levels deep"):
        parse_scenario(deep, "deep.yaml")
    with pytest.raises(ScenarioError, match="an alias refers to the mapping or list it is inside"):
        parse_scenario("a: &a [1, *a]\n", "loop.yaml")


def test_the_cli_reports_every_hostile_file_and_runs_the_rest(hostile: Path) -> None:
    result = cli("run", ".", cwd=hostile)
    assert result.returncode == 2, result.stdout + result.stderr
    out = result.stdout
    assert "Traceback" not in out + result.stderr
    assert "PASS  zz_good.yaml" in out
    for name, text in EXPECTED.items():
        assert f"ERROR {name}" in out
        assert text in out
    assert out.splitlines()[-1].startswith("6 scenarios: 1 passed, 5 error in ")


def test_pytest_collection_reports_each_and_runs_the_rest(
    hostile: Path, pytester: pytest.Pytester
) -> None:
    for path in hostile.iterdir():
        (pytester.path / "scenarios").mkdir(exist_ok=True)
        (pytester.path / "scenarios" / path.name).write_bytes(path.read_bytes())
    result = pytester.runpytest("--openprogram-scenarios", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=5)
    out = result.stdout.str()
    assert "Traceback" not in out and "RecursionError" not in out
    for text in EXPECTED.values():
        assert text in out


def test_duplicate_keys_are_errors_naming_both_lines() -> None:
    text = GOOD.replace('expect:\n  result: "Found."', 'expect:\n  result: "Found."\n  result: x')
    text = text.replace("scenario: one search", "scenario: one search\nscenario: again")
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "dup.yaml")
    assert [str(i) for i in info.value.issues] == [
        "dup.yaml:2: (scenario) key 'scenario' is given twice (lines 1 and 2); keep one",
        "dup.yaml:11: (expect.result) key 'result' is given twice (lines 10 and 11); keep one",
    ]


def test_a_file_over_the_size_limit_is_refused_before_parsing(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as handle:
        handle.write(b"scenario: x\ndescription: '")
        handle.write(b"y" * MAX_BYTES)
        handle.write(b"'\n")
    with pytest.raises(ScenarioError, match=f"just over 10 MiB \\({MAX_BYTES + 28:,} bytes\\)"):
        load_scenario(big)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_links_that_loop_and_fifos_do_not_hang_or_crash_a_run(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(GOOD)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "again.yaml").write_text(GOOD.replace("one search", "again"))
    (tmp_path / "sub" / "up").symlink_to(tmp_path, target_is_directory=True)  # a folder loop
    (tmp_path / "self.yaml").symlink_to(tmp_path / "self.yaml")  # a link to itself
    os.mkfifo(tmp_path / "pipe.yaml")  # opening it would block forever

    found = [p.relative_to(tmp_path).as_posix() for p in discover([tmp_path])]
    assert found == ["good.yaml", "self.yaml", "sub/again.yaml"]

    result = cli("run", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert "ERROR self.yaml" in result.stdout
    assert "self.yaml: cannot read: a symbolic link loop" in result.stdout
    assert result.stdout.count("PASS ") == 2
    with pytest.raises(ScenarioError, match="not a regular file"):
        load_scenario(tmp_path / "pipe.yaml")  # named explicitly: refused, not opened


def redos(pattern: str, value: str) -> str:
    return GOOD.replace('text: "Found."', f'text: "{value}"').replace(
        'result: "Found."', f'result: {{$regex: "{pattern}"}}'
    )


def test_the_issues_catastrophic_regex_finishes_and_fails_plainly(tmp_path: Path) -> None:
    (tmp_path / "redos.yaml").write_text(redos("^(a+)+$", "a" * 38 + "!"))
    result = cli("run", "redos.yaml", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "- exec returned something else" in result.stdout
    assert 'expected: regex "^(a+)+$"' in result.stdout


def test_a_regex_past_its_time_limit_fails_the_check_instead_of_hanging(tmp_path: Path) -> None:
    (tmp_path / "redos.yaml").write_text(redos("^(a|aa)+$", "a" * 40 + "!"))
    result = cli("run", "redos.yaml", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "- a $regex expectation could not be checked" in result.stdout
    assert "$regex '^(a|aa)+$' took longer than 0.25 s against 'aaaa" in result.stdout
    assert "simplify it" in result.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_pytest_collection_survives_link_loops_and_fifos(pytester: pytest.Pytester) -> None:
    folder = pytester.path / "scenarios"
    folder.mkdir()
    (folder / "good.yaml").write_text(GOOD)
    (folder / "up").symlink_to(pytester.path, target_is_directory=True)
    (folder / "self.yaml").symlink_to(folder / "self.yaml")
    os.mkfifo(folder / "pipe.yaml")
    result = pytester.runpytest("--openprogram-scenarios", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "Traceback" not in result.stdout.str()
