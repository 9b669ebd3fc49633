"""A fuzz campaign as pytest items: one item per chunk, the same cases on any worker."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PLANT_CAP_BUG = """
from openprogram.agent import agent_loop

_real = agent_loop.effective_cap
agent_loop.effective_cap = lambda max_iterations: _real(max_iterations) + 1
"""


def test_a_campaign_is_one_item_per_chunk_and_passes_on_the_loop(
    pytester: pytest.Pytester,
) -> None:
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--openprogram-fuzz", "600", "--openprogram-fuzz-chunk",
        "200", "--openprogram-fuzz-seed", "5", "-v",
    )  # fmt: skip
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*openprogram_fuzz[[]seed5-1of3[]] PASSED*",
            "*openprogram_fuzz[[]seed5-3of3[]] PASSED*",
        ]
    )


def _failures(pytester: pytest.Pytester, *extra: str) -> dict[str, str]:
    # 4 chunks, so that 2 workers share them: each chunk finds the bug and shrinks it, which
    # is most of the cost, so more chunks would only take longer
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--openprogram-fuzz", "2000", "--openprogram-fuzz-seed",
        "2", "--openprogram-fuzz-chunk", "500", *extra,
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    text = result.stdout.str()
    found = re.findall(
        r"invariant violated in chunk (\d+)/4 \(campaign seed 2, chunk seed (\d+)\)", text
    )
    assert found, text
    return dict(found)


@pytest.mark.slow
def test_a_planted_cap_bug_fails_the_same_chunks_whatever_the_workers(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(PLANT_CAP_BUG)  # every process (xdist workers too) runs the bug
    alone = _failures(pytester)
    spread = _failures(pytester, "-n", "2")
    assert alone == spread  # the same chunks fail, with the same chunk seeds


@pytest.mark.slow
def test_the_shrunk_case_can_be_written_as_a_regression_file(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(PLANT_CAP_BUG)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--openprogram-fuzz", "1000", "--openprogram-fuzz-seed",
        "2", "--openprogram-fuzz-regressions", "regressions", "-x",
    )  # fmt: skip
    result.stdout.fnmatch_lines(["*regression file: written to regressions*fuzz_*.yaml*"])
    written = list(Path(pytester.path, "regressions").glob("fuzz_*.yaml"))
    assert len(written) == 1
    assert "max_iterations" in written[0].read_text()
