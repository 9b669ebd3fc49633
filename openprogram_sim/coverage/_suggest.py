"""Starter scenarios for the behaviours a suite does not exercise, built on its own tools.

For each behaviour, :func:`suggest` writes a small scenario that exercises it and asserts it
(the expectations the catalogue counts as asserting), on a tool the suite already uses: a
simulated tool is copied with its schema and a plain ``returns:``; the user's own tool is
named with ``python:`` and stubbed (``returns:``/``raises:``), so the starter is
deterministic. The arguments are ones the suite already sends that tool, else built from
its schema. What every starter expects is what the seed's rules say a correct loop does
with its script, never a run.

The YAML is written by the fuzz regression writer (one expected event and one request per
line), so a starter reads like the files ``openprogram-sim fuzz`` writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from openprogram_sim.coverage._catalogue import Behaviour, behaviour
from openprogram_sim.coverage._starters import STARTERS
from openprogram_sim.coverage._suite_tools import FALLBACK, SuiteTool, suite_tools
from openprogram_sim.scenario import Scenario

__all__ = ["SuiteTool", "starter_document", "starter_text", "suggest", "suite_tools"]

TAGS = {
    "basics": "basics",
    "tool errors": "errors",
    "menu": "toolsets",
    "tool_choice": "tool_choice",
    "stops": "stops",
    "cap": "cap",
    "steering": "steering",
    "follow-ups": "follow_ups",
    "nested": "nested",
    "deferred": "deferred",
    "choices": "choices",
}
"""A behaviour group as a scenario tag (lowercase words, usable as pytest markers)."""


def _describe(b: Behaviour, t: SuiteTool) -> str:
    on = f"the suite's tool {t.name}"
    if t.python is not None:
        on += f" ({t.python}, its body stubbed: remove returns:/raises: to run your code)"
    return (
        f'{b.source}: "{b.quote}" A starter for {b.id} ({b.title}), which no scenario of the '
        f"suite exercised; it is built on {on}. Edit it to your agent's words."
    )


def starter_document(id: str, tools: Sequence[SuiteTool] = ()) -> dict[str, Any]:
    """The scenario (a dict in the file's key order) that exercises and asserts behaviour
    ``id`` on the first of ``tools`` (the second is used where two are needed)."""
    b = behaviour(id)
    t = tools[0] if tools else FALLBACK
    other = tools[1] if len(tools) > 1 else None
    doc = STARTERS[id](t, other)
    head: dict[str, Any] = {"scenario": f"{b.id}: {b.title}", "description": _describe(b, t)}
    head["tags"] = [TAGS.get(b.group, "coverage"), "starter"]
    order = ["tools", "exec", "model", "steering", "follow_ups", "abort", "expect"]
    document = {**head, **{k: doc[k] for k in order if k in doc}}
    Scenario.model_validate(document)  # a starter is always a valid file
    return document


def starter_text(
    document: dict[str, Any], schema_ref: str = "../schema/scenario.schema.json"
) -> str:
    """The document as a scenario file: the editor's schema line, then the YAML the fuzz
    regression writer makes."""
    try:
        from openprogram_sim.fuzz._regression import regression_text
    except ImportError as exc:  # the fuzz package imports Hypothesis
        raise ImportError(
            f"--suggest writes starters with the fuzz regression writer, which needs "
            f"Hypothesis: pip install 'openprogram-sim[fuzz]' ({exc})"
        ) from exc
    return f"# yaml-language-server: $schema={schema_ref}\n" + regression_text(document)


def suggest(missing: Iterable[str], scenarios: Iterable[Scenario]) -> list[tuple[str, str]]:
    """``(id, file text)`` of a starter for each behaviour in ``missing``, on the tools of
    ``scenarios`` (the suite)."""
    tools = suite_tools(scenarios)
    return [(id, starter_text(starter_document(id, tools))) for id in missing]
