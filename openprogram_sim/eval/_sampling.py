"""Sampling a scenario against a real model: each sample its ``exec`` run through the real
adapter and recorded as a cassette, judged, until the verdict is decided or the samples run
out."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openprogram.types import Usage
from openprogram_sim.cassettes import Cassette
from openprogram_sim.errors import SimError
from openprogram_sim.eval._judge import judge, not_applicable
from openprogram_sim.eval._regressions import write_regressions
from openprogram_sim.eval._stats import SequentialTest
from openprogram_sim.eval._summary import Sample, ScenarioResult
from openprogram_sim.play import RunOutcome, arun_scenario
from openprogram_sim.scenario import Scenario
from openprogram_sim.trace import trace_calls

__all__ = ["EvalOptions", "EvalSetupError", "evaluate", "scenario_slug"]

SETUP_STATUSES = {401: "unauthorized", 403: "forbidden", 404: "not found"}
"""Statuses that, on every request of a sample, say the setup is wrong (the key, the base
URL, the model name), not how the model behaves."""


class EvalSetupError(SimError):
    """A sample that says the eval cannot run as set up: every request got 401, 403 or
    404, or none reached the service."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalOptions:
    """How an eval samples: the checked options of ``openprogram-sim eval``."""

    model: str
    """The real adapter, ``PROVIDER:MODEL``."""
    samples: int = 10
    """The most samples per scenario."""
    base_url: str | None = None
    """The adapter's base URL; ``{sample}`` in it is replaced by a name per sample (a wire
    server's session: ``http://127.0.0.1:PORT/s/{sample}/v1``)."""
    threshold: float | None = None
    """The pass rate a scenario must clear (None: every sample must pass)."""
    confidence: float = 0.95
    sequential: bool = True
    """Stop as soon as the verdict is decided (with a threshold)."""
    out: Path = Path("reports/eval")
    timeout: float = 120.0
    """Seconds of real time each sample's run may take (in place of the scenario's
    ``timeout:``, which is set for the scripted model)."""

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"--timeout must be a number of seconds > 0, got {self.timeout}")
        if self.samples < 1:
            raise ValueError(f"--samples must be at least 1, got {self.samples}")
        if not 0 < self.confidence < 1:
            raise ValueError(
                f"--confidence must be between 0 and 1 (e.g. 0.95), got {self.confidence}"
            )
        if self.threshold is not None and not 0 <= self.threshold <= 1:
            raise ValueError(
                f"--threshold is a pass rate between 0 and 1 (e.g. 0.8), got {self.threshold}"
            )
        if ":" not in self.model:
            raise ValueError(
                f"--model {self.model!r} is not PROVIDER:MODEL (e.g. openai:gpt-4o-mini)"
            )

    def test(self) -> SequentialTest | None:
        """The sequential test of the verdict (None without a threshold)."""
        if self.threshold is None:
            return None
        looks = None if self.sequential else 1
        return SequentialTest(self.threshold, self.confidence, self.samples, looks)


def scenario_slug(path: str) -> str:
    """The folder name of a scenario's samples under ``--out``: its path (relative to the
    working directory when under it) without the suffix, ``/`` as ``__``."""
    full = Path(path).resolve()
    try:
        rel = full.relative_to(Path.cwd())
    except ValueError:
        rel = Path(full.name)
    return re.sub(r"[^\w.-]+", "_", "__".join(rel.with_suffix("").parts))


async def _session(cassette: Cassette, scenario: Scenario, options: EvalOptions, name: str) -> Any:
    extra = {}
    if options.base_url:
        extra["base_url"] = options.base_url.replace("{sample}", name)
    async with cassette.client() as client:
        provider = cassette.provider(options.model, client=client, **extra)
        return await arun_scenario(scenario, provider)


def _setup_mistake(statuses: list[int], outcome: RunOutcome) -> str | None:
    if not statuses:
        if outcome.error is None:
            return None
        return (
            f"no request reached the model (exec raised {outcome.error_text}); check "
            "--base-url and the key's environment variable"
        )
    if any(code not in SETUP_STATUSES for code in statuses):
        return None
    got = ", ".join(f"HTTP {c} ({SETUP_STATUSES[c]})" for c in sorted(set(statuses)))
    return (
        f"every request got {got}: a setup mistake (a 404 is a wrong --base-url or model "
        "name; a 401 or 403 a missing, wrong or unauthorised key), not how the model behaves"
    )


def _sample(scenario: Scenario, options: EvalOptions, folder: Path, index: int) -> Sample:
    path = folder / f"sample-{index:03d}.yaml"
    cassette = Cassette(path, record_mode="all")
    cassette.record_mode = "all"  # an eval is live by definition: in CI too (CI forces none)
    cassette.load()
    outcome = asyncio.run(_session(cassette, scenario, options, f"{folder.name}-{index}"))
    statuses = [int(response["status"]["code"]) for _, response in cassette.vcr.data]
    mistake = _setup_mistake(statuses, outcome)
    if mistake is not None:
        raise EvalSetupError(f"{scenario.path}: sample {index}: {mistake}")
    cassette.describe(
        model=options.model,
        scenario=os.path.relpath(Path(scenario.path).resolve(), folder.resolve()),
        recorded_with="openprogram-sim eval",
    )
    cassette.save()
    judgement = judge(outcome)
    calls = [
        {"name": c.name, "args": c.args, "depth": c.depth, "round": c.round}
        for c in trace_calls(outcome.trace)
    ]
    usage = Usage()
    for used in outcome.usage:
        if used is not None:
            usage = usage + used
    return Sample(
        index=index,
        passed=judgement.passed,
        checks=judgement.checks,
        failures=judgement.failures,
        cassette=str(path),
        error=outcome.error_text,
        model_calls=outcome.model_calls,
        calls=calls,
        usage={k: v for k, v in dataclasses.asdict(usage).items() if isinstance(v, int)},
    )


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
        sample = _sample(scenario, options, folder, index)
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
