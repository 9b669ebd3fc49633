"""Sampling a scenario against a real model: each sample its ``exec`` run through the real
adapter and recorded as a cassette, judged, until the verdict is decided or the samples run
out."""

from __future__ import annotations

from collections.abc import Callable

from openprogram_sim.eval._judge import not_applicable
from openprogram_sim.eval._options import EvalOptions, scenario_slug
from openprogram_sim.eval._regressions import write_regressions
from openprogram_sim.eval._sample import run_sample
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
    decides first), each sample's cassette under ``options.out/<slug>/``; each distinct
    failure distilled into ``options.out/regressions/<slug>-N.yaml``. ``should_stop`` is
    asked after each sample (Ctrl-C): when it says so, sampling ends there
    (:attr:`ScenarioResult.interrupted`)."""
    source = scenario.path
    slug = scenario_slug(source)
    folder = options.out / slug
    scenario = scenario.model_copy(update={"timeout": options.timeout})
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("sample-*.yaml"):  # a rerun's samples replace the last run's
        old.unlink()
    test = options.test()
    result = ScenarioResult(
        path=scenario.path,
        title=scenario.scenario,
        max_samples=options.samples,
        confidence=options.confidence,
        threshold=options.threshold,
        sequential=options.sequential,
        not_applicable=not_applicable(scenario),
        expectations=[],
    )
    for index in range(1, options.samples + 1):
        sample = run_sample(scenario, options, folder, index)
        result.samples.append(sample)
        for key in sample.checks:
            if key not in result.expectations:
                result.expectations.append(key)
        if on_sample is not None:
            on_sample(sample)
        if test is not None and test.decide(result.passed, result.n) != "undecided":
            break
        if should_stop is not None and should_stop():
            result.interrupted = True
            break
    result.regressions = write_regressions(
        result.samples, source, options.out / "regressions", slug
    )
    return result
