"""Helpers for the behaviour coverage tests: run a scenario written inline and classify it."""

from __future__ import annotations

import textwrap

from openprogram_sim.coverage import RunBehaviours, behaviours_of
from openprogram_sim.play import check_outcome, run_scenario
from openprogram_sim.scenario import parse_scenario

SEARCH = """
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
    returns: "3 results"
"""


def classified(text: str, *, passes: bool = True) -> RunBehaviours:
    """Run the scenario ``text`` (dedented; ``SEARCH`` is a handy tools block) and classify
    it; by default the scenario must pass, so a test's expectations are real ones."""
    scenario = parse_scenario(textwrap.dedent(text), path="case.yaml")
    outcome = run_scenario(scenario)
    verdict = check_outcome(outcome)
    if passes:
        assert verdict.passed, verdict.report()
    return behaviours_of(outcome)
