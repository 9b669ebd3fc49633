"""Sampling a scenario against a real model: each sample its ``exec`` run through the real
adapter and recorded as a cassette, judged, until the verdict is decided or the samples run
out (the scheduler, :mod:`._scheduling`, runs several scenarios and samples at once)."""

from __future__ import annotations

from collections.abc import Callable

from openprogram_sim.eval._options import EvalOptions
from openprogram_sim.eval._scheduling import evaluate_all
from openprogram_sim.eval._summary import Sample, ScenarioResult
from openprogram_sim.scenario import Scenario

__all__ = ["evaluate"]


def evaluate(
    scenario: Scenario,
    options: EvalOptions,
    on_sample: Callable[[Sample], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> ScenarioResult:
    """Sample ``scenario`` up to ``options.samples`` times (fewer when the sequential test
    decides first, or ``options.budget`` would be passed), ``options.slots()`` at a time,
    each sample's cassette under ``options.out/<slug>/``; each distinct failure distilled
    into ``options.out/regressions/<slug>-N.yaml``. ``should_stop`` is asked before each
    sample starts (Ctrl-C): when it says so, sampling ends with the samples in flight
    (:attr:`ScenarioResult.interrupted`)."""
    each = None if on_sample is None else (lambda _result, sample: on_sample(sample))
    results = list(evaluate_all([scenario], options, on_sample=each, should_stop=should_stop))
    if results:
        return results[0]
    # interrupted before its first sample: nothing was taken
    return ScenarioResult(
        path=scenario.path, title=scenario.scenario, max_samples=options.samples,
        confidence=options.confidence, threshold=options.threshold,
        sequential=options.sequential, interrupted=True,
    )  # fmt: skip
