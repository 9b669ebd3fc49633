"""A ``$regex`` that would take gigabytes to compile is that file's load error, found before
compiling; the files beside it still get their verdicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _support import run_cli

from openprogram_sim.trace import _matchers
from openprogram_sim.trace._matchers import REGEX_MAX_LENGTH, check_matcher

HUGE = """\
scenario: huge regex
exec:
  content: "Hi"
model:
  - text: "Hello"
expect:
  result: {$regex: "x{4000000000}"}
"""

GOOD = """\
scenario: hello
exec: {content: "Hi"}
model: [{text: "Hello"}]
expect: {result: "Hello"}
"""


@pytest.fixture
def no_compile(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Patterns that reached the compiler (none of the refused ones may)."""
    compiled: list[str] = []

    def record(pattern: str) -> Any:
        compiled.append(pattern)
        raise AssertionError(f"{pattern!r} reached the compiler")

    monkeypatch.setattr(_matchers, "_compiled", record)
    return compiled


def test_a_huge_repeat_is_a_load_error_and_the_good_file_still_runs(
    tmp_path: Path, no_compile: list[str]
) -> None:
    (tmp_path / "bad.yaml").write_text(HUGE)
    (tmp_path / "good.yaml").write_text(GOOD)
    result = run_cli("run", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    assert "PASS  " in result.stdout and "good.yaml" in result.stdout
    assert (
        "bad.yaml:7: (expect.result) $regex 'x{4000000000}' repeats 4,000,000,000 times; "
        "counted repeats such as {n} and {n,m}, nested ones multiplied, are limited to "
        "10,000 (fixed): use an open repeat such as x+ instead"
    ) in result.stdout
    assert no_compile == []


@pytest.mark.parametrize(
    "pattern",
    ["x{4000000000}", "(x{10000}){10000}", "((ab){101}c){100}", "a{,20000}", "a{20000,}"],
)
def test_counted_repeats_over_the_limit_are_refused_before_compiling(
    pattern: str, no_compile: list[str]
) -> None:
    problem = check_matcher({"$regex": pattern})
    assert problem is not None and "limited to 10,000 (fixed)" in problem
    assert no_compile == []


def test_a_pattern_over_the_length_limit_is_refused_before_compiling(
    no_compile: list[str],
) -> None:
    problem = check_matcher({"$regex": "a" * (REGEX_MAX_LENGTH + 1)})
    assert problem == (
        "$regex pattern is 10,001 characters long; the limit is 10,000 (fixed): "
        "match a shorter pattern, or use $contains"
    )
    assert no_compile == []


@pytest.mark.parametrize(
    "pattern",
    ["(x{100}){100}", r"\N{DIGIT ONE}{2}", r"\{20000\}", "[{]{5}", r"\p{L}{3}", "^(a+)+$"],
)
def test_repeats_within_the_limit_and_braces_that_are_not_repeats_compile(pattern: str) -> None:
    assert check_matcher({"$regex": pattern}) is None


@pytest.mark.parametrize("error", [MemoryError, OverflowError])
def test_running_out_of_memory_while_compiling_is_the_files_error(
    monkeypatch: pytest.MonkeyPatch, error: type[BaseException]
) -> None:
    def fail(pattern: str) -> Any:
        raise error()

    monkeypatch.setattr(_matchers, "_compiled", fail)
    assert check_matcher({"$regex": "x{3}"}) == (
        f"$regex 'x{{3}}' is too large to compile ({error.__name__}); simplify it"
    )
