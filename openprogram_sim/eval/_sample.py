"""One sample: a scenario's ``exec`` run once through the real adapter, recorded as a
cassette (scrubbed), its judge asked (``expect.judge``, recorded into the same cassette),
and judged; and a recorded sample replayed offline, judge included."""

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
from openprogram_sim.eval._summary import Sample, sample_calls
from openprogram_sim.eval._verdict import ask_recorded
from openprogram_sim.play import RunOutcome, arun_scenario
from openprogram_sim.scenario import CriterionVerdict, JudgeError, Scenario, judge_changes

__all__ = ["SETUP_STATUSES", "EvalSetupError", "replay_sample", "run_sample"]

SETUP_STATUSES = {401: "unauthorized", 403: "forbidden", 404: "not found"}
"""Statuses that, on every request of a sample, say the setup is wrong (the key, the base
URL, the model name), not how the model behaves."""


class EvalSetupError(SimError):
    """A sample that says the eval cannot run as set up: every request got 401, 403 or
    404, or none reached the service, or the judge gave no verdict it could read."""


@dataclasses.dataclass(slots=True)
class _Session:
    outcome: RunOutcome
    mistake: str | None = None
    """A setup mistake the run's own requests show (the judge is not asked then)."""
    verdicts: dict[str, CriterionVerdict] | None = None
    judge_error: JudgeError | None = None


async def _session(
    cassette: Cassette,
    client: Any,
    scenario: Scenario,
    model: str | None,
    base_url: str | None,
    name: str,
) -> _Session:
    """The run, then its judge, both sending through ``client`` (answered by
    ``cassette``)."""
    extra = {}
    if base_url:
        extra["base_url"] = base_url.replace("{sample}", name)
    async with client:
        provider = cassette.provider(model, client=client, **extra)
        outcome = await arun_scenario(scenario, provider)
        statuses = [int(response["status"]["code"]) for _, response in cassette.vcr.data]
        session = _Session(outcome, _setup_mistake(statuses, outcome))
        spec = scenario.expect.judge
        if spec is not None and session.mistake is None:
            try:
                session.verdicts = await ask_recorded(cassette, client, spec, session.outcome, name)
            except JudgeError as exc:
                session.judge_error = exc
        return session


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


def _sample(
    session: _Session, index: int, path: Path, where: str, cassette_meta: dict[str, Any]
) -> Sample:
    outcome = session.outcome
    if session.judge_error is not None:
        raise EvalSetupError(
            f"{where}: sample {index}: {session.judge_error} (the sample's cassette: {path})"
        ) from session.judge_error
    judgement = judge(outcome, session.verdicts)
    calls = sample_calls(outcome.trace)
    usage = Usage()
    for used in outcome.usage:
        if used is not None:
            usage = usage + used
    retries = cassette_meta.get("retries")
    judged = cassette_meta.get("judge") if session.verdicts else None
    judge_usage = judged.get("usage") if isinstance(judged, dict) else None
    spec = outcome.scenario.expect.judge
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
        retries=[dict(r) for r in retries] if isinstance(retries, list) else [],
        judge_model=spec.model if spec is not None and session.verdicts else None,
        judge_usage=dict(judge_usage) if isinstance(judge_usage, dict) else {},
    )


def run_sample(scenario: Scenario, options: EvalOptions, folder: Path, index: int) -> Sample:
    path = folder / f"sample-{index:03d}.yaml"
    cassette = Cassette(path, record_mode="all")
    cassette.record_mode = "all"  # an eval is live by definition: in CI too (CI forces none)
    cassette.load()
    name = f"{folder.name}-{index}"
    client = options.client(cassette)  # a 429 or 5xx retried, the run's calls and the judge's
    session = asyncio.run(
        _session(cassette, client, scenario, options.model, options.base_url, name)
    )
    if session.mistake is not None:
        raise EvalSetupError(f"{scenario.path}: sample {index}: {session.mistake}")
    cassette.describe(
        model=options.model,
        scenario=os.path.relpath(Path(scenario.path).resolve(), folder.resolve()),
        recorded_with="openprogram-sim eval",
        sample=name,
    )
    cassette.save()  # with the judge's calls, also when its verdict could not be read
    return _sample(session, index, path, scenario.path, cassette.metadata)


def replay_sample(
    scenario: Scenario, cassette: str | os.PathLike[str], index: int | None = None
) -> Sample:
    """A sample recorded by ``openprogram-sim eval`` replayed offline: ``scenario``'s run
    through the real adapter against the cassette's recorded replies, its judge
    (``expect.judge``) answered by the judge's recorded calls, judged as the eval judged
    it (``index``: its number, by default read from the file's name). No key, no socket:
    a request the recording cannot answer gets an HTTP 400 naming
    the JSON paths that differ (the run fails, or the judge raises :class:`JudgeError`)."""
    path = Path(cassette)
    if index is None:  # sample-007.yaml is sample 7
        digits = path.stem.rpartition("-")[2]
        index = int(digits) if digits.isdigit() else 1
    recorded = Cassette(path, record_mode="none").load()
    meta = recorded.metadata
    spec, asked = scenario.expect.judge, meta.get("judge")
    changed = judge_changes(spec, asked) if spec is not None and isinstance(asked, dict) else []
    if changed:
        raise JudgeError(
            f"{path}: expect.judge is not the judge recorded in it: {'; '.join(changed)}"
        )
    name = str(meta.get("sample") or "")
    session = asyncio.run(
        _session(recorded, recorded.client(), scenario, meta.get("model"), None, name)
    )
    if session.judge_error is not None:
        raise session.judge_error
    return _sample(session, index, path, scenario.path, meta)
