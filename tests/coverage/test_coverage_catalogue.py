"""The catalogue: stable, documented ids, each quoting the seed (or DESIGN) word for word."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import openprogram_sim.coverage as coverage
from openprogram_sim.coverage import (
    CATALOGUE,
    UnknownBehaviourError,
    behaviour,
    catalogue_markdown,
    parse_ids,
)

ROOT = Path(__file__).resolve().parents[2]

ISSUE_IDS = {
    "text_finish", "tool_round", "several_calls_one_round", "unknown_tool",
    "invalid_arguments", "tool_raised", "error_result_returned", "steering_skip",
    "steering_after_text", "steering_after_round", "follow_up_pass", "cap_hit",
    "cap_floor_at_one", "error_stop", "aborted_stop", "length_stop", "nested_exec",
    "nested_inherits_tools", "nested_opt_out", "tool_choice_auto", "tool_choice_required",
    "tool_choice_none", "tool_choice_forced", "parallel_tool_calls_false",
    "deferred_tool_loaded", "choices_pick", "choices_reask",
}  # fmt: skip
"""The ids issue 17 names: they must all be there, under these names."""


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_issues_ids_are_all_in_the_catalogue_and_ids_are_unique() -> None:
    ids = [b.id for b in CATALOGUE]
    assert len(ids) == len(set(ids))
    assert set(ids) >= ISSUE_IDS, sorted(ISSUE_IDS - set(ids))
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", i) for i in ids)


def test_every_seed_quote_is_a_sentence_of_the_seed_word_for_word() -> None:
    spec = re.sub(r"^> ?", "", (ROOT / "docs" / "loop-spec.md").read_text(), flags=re.M)
    missing = [
        b.id for b in CATALOGUE if b.source == "Seed" and _words(b.quote) not in _words(spec)
    ]
    assert missing == []
    assert {b.source for b in CATALOGUE} == {"Seed", "DESIGN"}


def test_every_behaviour_says_what_exercises_and_what_asserts_it() -> None:
    for b in CATALOGUE:
        assert b.title and b.exercised and b.asserted and b.group, b.id


def test_docs_hold_the_catalogue_as_generated() -> None:
    docs = (ROOT / "docs" / "coverage.md").read_text()
    assert catalogue_markdown() in docs, "regenerate the table: catalogue_markdown()"
    assert f"{len(CATALOGUE)} behaviours" in docs


def test_an_unknown_id_names_the_closest() -> None:
    with pytest.raises(
        UnknownBehaviourError, match=r"'steering_skp'.*did you mean 'steering_skip'"
    ):
        behaviour("steering_skp")
    assert parse_ids(["cap_hit, tool_round", "cap_hit"]) == ["cap_hit", "tool_round"]
    with pytest.raises(UnknownBehaviourError, match="nope"):
        parse_ids(["cap_hit,nope"])


def test_the_public_face_exports_exactly_its_all() -> None:
    public = {n for n in vars(coverage) if not n.startswith("_") and n != "annotations"}
    public = {n for n in public if not isinstance(getattr(coverage, n), type(coverage))}
    assert public == set(coverage.__all__)
    assert coverage.BehaviourCoverage.__module__ == "openprogram_sim.coverage"
