"""Where a fuzz run's time goes: generating a scenario (two ways) and running it.

    python bench/fuzz_throughput.py [--n 2000]

- ``strategies``: the public strategy (``strategies.scenario_dicts()``), one Hypothesis
  draw per choice (about 80 per scenario): the best shrinking, the slowest generation.
- ``bytes``: what ``openprogram-sim fuzz`` does: one byte string per scenario, read by the
  same builders.
- ``run``: running the scenario through the real runner on one reused event loop, with
  the invariants checked (``asyncio.run`` per run shown for comparison).

Single process; numbers are per scenario. Timing on a shared machine is noisy: compare
the rows of one run, not runs of different days.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from openprogram_sim.fuzz import check_invariants, run_generated, strategies
from openprogram_sim.fuzz.loop import scenario_from_bytes
from openprogram_sim.play import arun_scenario
from openprogram_sim.scenario import Scenario


def _per(label: str, n: int, seconds: float) -> None:
    print(f"{label:<34} {seconds / n * 1e3:8.3f} ms   {n / seconds:8.0f} /s")


def bench_strategies(n: int) -> None:
    seen: list[Any] = []

    @hypothesis_seed(1)
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategies.scenario_dicts())
    def draw(data: dict[str, Any]) -> None:
        seen.append(data)

    start = time.perf_counter()
    draw()
    _per("generate: public strategy", len(seen), time.perf_counter() - start)


def bench_bytes(blobs: list[bytes]) -> list[dict[str, Any]]:
    start = time.perf_counter()
    out = [scenario_from_bytes(b) for b in blobs]
    _per("generate: bytes (builders only)", len(blobs), time.perf_counter() - start)
    return out


def bench_runs(dicts: list[dict[str, Any]]) -> None:
    scenarios = [Scenario.model_validate(d) for d in dicts]
    loop = asyncio.new_event_loop()
    start = time.perf_counter()
    for s in scenarios:
        assert check_invariants(run_generated(s, loop=loop)) == []
    _per("run + invariants, one event loop", len(scenarios), time.perf_counter() - start)
    few = scenarios[: max(1, len(scenarios) // 4)]
    start = time.perf_counter()
    for s in few:
        asyncio.run(arun_scenario(s))
    _per("run, asyncio.run per run", len(few), time.perf_counter() - start)
    loop.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    n = parser.parse_args().n
    print(f"fuzz throughput, {n} scenarios, pid {os.getpid()}")
    rng = random.Random(7)
    blobs = [rng.randbytes(160) for _ in range(n)]
    bench_strategies(max(1, n // 4))
    dicts = bench_bytes(blobs)
    bench_runs(dicts)


if __name__ == "__main__":
    main()
