"""The judge of a sample (``expect.judge``): asked through the sample's cassette after its
run, so its calls are recorded into the same file (live, under ``eval``) or answered from
it (replayed), with where they are in the file and the endpoint they went to kept in the
cassette's metadata (``judge: {base_url, interactions, model, criteria, rubric, usage}``:
the judge asked, so a replay with another one says so, and the tokens its reply used).

What the judge is sent and how its answer is read is :mod:`openprogram_sim.scenario`'s
(:func:`~openprogram_sim.scenario.ask_judge`), shared with ``openprogram-sim run``, which
replays the judge of a scenario whose ``model:`` names such a cassette.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from openprogram.types import AssistantMessage
from openprogram_sim.cassettes import Cassette
from openprogram_sim.play import RunOutcome
from openprogram_sim.scenario import CriterionVerdict, JudgedRun, JudgeSpec, ask_judge

__all__ = ["ask_recorded"]


async def ask_recorded(
    cassette: Cassette, client: Any, spec: JudgeSpec, outcome: RunOutcome, name: str
) -> dict[str, CriterionVerdict]:
    """The judge's verdicts on ``outcome``, asked through ``cassette`` (``client`` is its
    client): while recording, live at ``spec.base_url`` (``{sample}`` replaced by
    ``name``) or the adapter's own endpoint, and kept in the file after the run's
    interactions; while replaying, answered by the recorded ones (no key, no socket).
    :class:`~openprogram_sim.scenario.JudgeError` when no verdict can be read."""
    options: dict[str, Any] = {"client": client, "stream": False}
    recorded = cassette.metadata.get("judge") or {}
    if spec.base_url:
        options["base_url"] = spec.base_url.replace("{sample}", name)
    if not cassette.recording and recorded.get("base_url"):
        options["base_url"] = recorded["base_url"]  # the path its requests were recorded at
    provider = cassette.provider(spec.model, **options)
    before = len(cassette.vcr.data)
    replies: list[AssistantMessage] = []
    try:
        return await ask_judge(provider, spec, JudgedRun.of(outcome), replies=replies)
    finally:
        if cassette.recording:
            base = cassette.scrubber.url(str(getattr(provider, "base_url", "") or ""))
            interactions = list(range(before + 1, len(cassette.vcr.data) + 1))
            used = dataclasses.asdict(replies[0].usage) if replies else {}
            usage = {k: v for k, v in used.items() if isinstance(v, int) and v}
            cassette.describe(
                judge={
                    "base_url": base,
                    "interactions": interactions,
                    **spec.asked(),
                    "usage": usage,
                },
            )
