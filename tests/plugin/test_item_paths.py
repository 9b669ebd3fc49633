"""Where a scenario item says its file is: resolved once as the file is collected, then
shown relative to where pytest started, also for files reached through a linked folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

HELD = """\
scenario: one search
tools:
  search: {returns: "3 results"}
exec: {content: "Find.", tools: [search]}
model:
  - tool_calls: [{search: {q: a}}]
  - text: done
"""

BROKEN = "scenario: no exec here\nmodel: [{text: hi}]\n"


def _linked_project(path: Path) -> None:
    real = path / "library" / "kept"
    real.mkdir(parents=True)
    (real / "held.yaml").write_text(HELD)
    (real / "broken.yaml").write_text(BROKEN)
    (path / "scenarios").symlink_to(real, target_is_directory=True)


def test_a_linked_folders_items_show_the_real_paths(pytester: pytest.Pytester) -> None:
    _linked_project(pytester.path)
    result = pytester.runpytest("--openprogram-scenarios", "--openprogram-trace-out=traces")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*invalid scenario file library/kept/broken.yaml:*"])
    (written,) = (pytester.path / "traces").iterdir()
    record = json.loads(written.read_text())
    assert (record["path"], record["title"]) == ("library/kept/held.yaml", "one search")


def test_without_trace_out_nothing_is_written_and_the_item_passes(
    pytester: pytest.Pytester,
) -> None:
    _linked_project(pytester.path)
    (pytester.path / "library" / "kept" / "broken.yaml").unlink()
    result = pytester.runpytest("--openprogram-scenarios", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*held.yaml::one search PASSED*"])
    assert not (pytester.path / "traces").exists()
