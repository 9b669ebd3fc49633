"""The scenario library (``scenarios/``): every file runs as its own test, and the library
as a whole covers every behaviour of the seed, each file quoting the sentence it pins."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from openprogram_sim.play import check_outcome, run_scenario
from openprogram_sim.scenario import Scenario, discover, load_scenario

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "scenarios"
FILES = discover([LIBRARY]) if LIBRARY.is_dir() else []

REQUIRED_TAGS = {
    "basics",
    "tools",
    "errors",
    "stops",
    "cap",
    "steering",
    "follow_ups",
    "nested",
    "tool_choice",
    "toolsets",
    "deferred",
    "choices",
}
"""One tag per behaviour group of the seed (issue 4, item 6)."""


@cache
def _load(path: Path) -> Scenario:
    return load_scenario(path)


def _rel(path: Path) -> str:
    return path.relative_to(LIBRARY).as_posix()


@pytest.mark.parametrize("path", FILES, ids=[_rel(p) for p in FILES])
def test_scenario_passes(path: Path) -> None:
    verdict = check_outcome(run_scenario(load_scenario(path)))
    assert verdict.passed, verdict.report()


def test_library_is_large_and_grouped_in_folders() -> None:
    assert len(FILES) >= 30, f"scenarios/ holds {len(FILES)} files; the library needs >= 30"
    loose = [p.name for p in FILES if p.parent == LIBRARY]
    assert not loose, f"scenario files belong in a folder of scenarios/: {loose}"


def test_every_description_quotes_the_seed_or_design() -> None:
    missing = [
        _rel(p) for p in FILES if not any(k in _load(p).description for k in ("Seed:", "DESIGN:"))
    ]
    assert not missing, f"these descriptions quote neither the seed nor DESIGN.md: {missing}"


def test_every_file_is_tagged_with_lowercase_words() -> None:
    def ok(tags: list[str]) -> bool:
        return bool(tags) and all(t.replace("_", "").isalpha() and t.islower() for t in tags)

    bad = {_rel(p): _load(p).tags for p in FILES if not ok(_load(p).tags)}
    assert not bad, f"every file needs lowercase word tags (pytest markers): {bad}"


def test_tags_cover_every_behaviour() -> None:
    tags = {t for p in FILES for t in _load(p).tags}
    assert tags >= REQUIRED_TAGS, f"no scenario is tagged {sorted(REQUIRED_TAGS - tags)}"


def test_titles_are_unique() -> None:
    titles = [_load(p).scenario for p in FILES]
    duplicates = sorted({t for t in titles if titles.count(t) > 1})
    assert not duplicates, f"scenario titles must be unique: {duplicates}"


def test_whole_sequences_are_pinned_somewhere() -> None:
    exact = [p for p in FILES if _load(p).expect.events_mode == "exact"]
    assert len(exact) >= 5, f"only {len(exact)} scenarios pin whole event sequences (exact)"
