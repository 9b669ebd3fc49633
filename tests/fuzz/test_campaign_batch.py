"""A campaign's batch (scenarios per Hypothesis example) has a bound that names itself,
instead of Hypothesis's ``Unsatisfiable`` from deep in its engine."""

from __future__ import annotations

import pytest

from openprogram_sim.fuzz import run_campaign
from openprogram_sim.fuzz.loop._campaign import MAX_BATCH


def test_a_batch_past_the_bound_is_refused_with_the_bound_and_the_default() -> None:
    with pytest.raises(
        ValueError, match=rf"batch is at most {MAX_BATCH} \(got 64\).*default is 16"
    ):
        run_campaign(10, seed=1, batch=64, regressions=None)


def test_the_largest_batch_runs_every_example() -> None:
    result = run_campaign(2 * MAX_BATCH, seed=1, batch=MAX_BATCH, regressions=None)
    assert result.failure is None
    assert result.stats.runs == 2 * MAX_BATCH


def test_one_chunk_of_a_campaign_keeps_the_same_bound() -> None:
    from openprogram_sim.fuzz.loop import run_chunk

    with pytest.raises(ValueError, match=rf"batch is at most {MAX_BATCH} \(got 33\)"):
        run_chunk(0, 10, seed=1, batch=33)
