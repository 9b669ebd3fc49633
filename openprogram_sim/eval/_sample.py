"""One sample: a scenario's ``exec`` run once through the real adapter, recorded as a
cassette (scrubbed), and judged."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path
from typing import Any

from openprogram.types import Usage
from openprogram_sim.cassettes import Cassette
from openprogram_sim.errors import SimError
from openprogram_sim.eval._judge import judge
from openprogram_sim.eval._options import EvalOptions
from openprogram_sim.eval._summary import Sample
from openprogram_sim.play import RunOutcome, arun_scenario
from openprogram_sim.scenario import Scenario
from openprogram_sim.trace import trace_calls

__all__ = ["SETUP_STATUSES", "EvalSetupError", "run_sample"]

SETUP_STATUSES = {401: "unauthorized", 403: "forbidden", 404: "not found"}
"""Statuses that, on every request of a sample, say the setup is wrong (the key, the base
URL, the model name), not how the model behaves."""


class EvalSetupError(SimError):
    """A sample that says the eval cannot run as set up: every request got 401, 403 or
    404, or none reached the service."""


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


def run_sample(scenario: Scenario, options: EvalOptions, folder: Path, index: int) -> Sample:
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
