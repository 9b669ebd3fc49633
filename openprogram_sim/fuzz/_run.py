"""Running one generated scenario and checking its invariants (the public entry points
:func:`run_generated` and :func:`check_invariants`)."""

from __future__ import annotations

import asyncio
from typing import Any

from openprogram_sim.fuzz._invariants import check_outcome_invariants
from openprogram_sim.play import RunOutcome, arun_scenario
from openprogram_sim.scenario import Scenario

__all__ = ["check_invariants", "run_generated"]


def check_invariants(outcome: RunOutcome, *, replay: RunOutcome | None = None) -> list[str]:
    """The invariants violated by one scenario run (empty when all hold). Pass ``replay``,
    the same scenario run again, to check that it gives the same trace."""
    return check_outcome_invariants(outcome, replay=replay)


def run_generated(
    scenario: Scenario | dict[str, Any], *, loop: asyncio.AbstractEventLoop | None = None
) -> RunOutcome:
    """Run a (generated) scenario once through the real runner, on ``loop`` if given (reuse
    one loop for many runs: it is much faster than a fresh loop per run)."""
    if not isinstance(scenario, Scenario):
        scenario = Scenario.model_validate(scenario)
    if loop is None:
        return asyncio.run(arun_scenario(scenario))
    return loop.run_until_complete(arun_scenario(scenario))
