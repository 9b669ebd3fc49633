"""Failing samples turned into regression scenarios: each distinct failure (the same
trajectory: the tool calls made, with their arguments, depths and rounds, and what exec
raised) distilled once from its first sample's cassette, onto the scenario it was sampled
from, with the count of samples that failed so.

A sample that failed on its judge (a ``judge.NAME`` check) has no scripted stand-in for the
judge's verdict: its cassette is copied beside the regression (``<slug>-N.cassette.yaml``)
and the regression's ``expect.judge.cassette`` names it, so ``openprogram-sim run`` replays
the recorded verdict offline and fails on the same criterion."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from openprogram_sim.cassettes import distill, distill_yaml
from openprogram_sim.eval._summary import Regression, Sample

__all__ = ["trajectory_key", "write_regressions"]


def trajectory_key(sample: Sample) -> str:
    """What makes two failures the same: the calls made and the error raised (its type)."""
    error = sample.error.partition(":")[0] if sample.error else None
    return json.dumps([sample.calls, error], sort_keys=True, default=str)


def _header(sample: Sample, group: list[Sample], source: str) -> str:
    shown = [Path(s.cassette).stem for s in group[:10]]
    more = f" and {len(group) - 10} more" if len(group) > 10 else ""
    failed = ", ".join(k for k, held in sample.checks.items() if not held)
    return (
        f"# A regression from openprogram-sim eval of {source}: {len(group)} failing\n"
        f"# sample(s) made this trajectory; it fails on {failed}, as they did.\n"
        f"# Samples: {', '.join(shown)}{more} (cassettes in {Path(sample.cassette).parent}).\n"
        "# Commit it to keep that failure fixed: it runs offline on the scripted model.\n"
    )


def _judged(sample: Sample, copy: Path, source: str) -> str:
    """The regression of a sample its judge failed: distilled, its judge replayed from a
    copy of the sample's cassette (the eval's next run replaces the samples' own)."""
    shutil.copyfile(sample.cassette, copy)
    data = distill(sample.cassette, scenario=source)
    data.setdefault("expect", {}).setdefault("judge", {})["cassette"] = copy.name
    head = (
        f"# distilled from the cassette {Path(sample.cassette).as_posix()}; its judge's\n"
        f"# recorded verdict replays from {copy.name} (no key, no socket).\n"
    )
    return head + yaml.safe_dump(
        json.loads(json.dumps(data)), sort_keys=False, allow_unicode=True, width=100
    )


def write_regressions(
    samples: list[Sample], source: str, folder: Path, slug: str
) -> list[Regression]:
    """Write one scenario per distinct failure of ``samples`` under ``folder`` (files named
    ``<slug>-N.yaml``, replacing the last eval's), most frequent first."""
    groups: dict[str, list[Sample]] = {}
    for sample in samples:
        if not sample.passed:
            groups.setdefault(trajectory_key(sample), []).append(sample)
    for old in folder.glob(f"{slug}-*.yaml"):
        old.unlink()
    if not groups:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    out: list[Regression] = []
    ordered = sorted(groups.values(), key=lambda g: (-len(g), g[0].index))
    for n, group in enumerate(ordered, start=1):
        first = group[0]
        path = folder / f"{slug}-{n}.yaml"
        if any(k.startswith("judge.") and not held for k, held in first.checks.items()):
            text = _judged(first, folder / f"{slug}-{n}.cassette.yaml", source)
        else:
            text = distill_yaml(first.cassette, scenario=source)
        path.write_text(_header(first, group, source) + text, encoding="utf-8")
        out.append(
            Regression(
                path=str(path),
                count=len(group),
                samples=[s.index for s in group],
                failed=[k for k, held in first.checks.items() if not held],
            )
        )
    return out
