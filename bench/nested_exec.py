"""Nested exec per level: a sync tool calling ``runtime.exec`` against an async tool
awaiting ``runtime.aexec``.

A chain DEPTH levels deep: each run's first reply calls ``dive``, whose body opens an exec
one level deeper (inheriting the tools), until the deepest run answers with text; then each
run above it answers too. The model is scripted (no network), so what is measured is the
cost of opening a nested run: microseconds per level, the whole chain divided by its
DEPTH + 1 runs. The sync and async chains run interleaved (one of each, again and again)
and the ratio is taken per pair. Also reported: the most threads alive at once while the
sync chain ran, beyond those alive before it (a thread per level shows as DEPTH).

    python bench/nested_exec.py            # prints a table
    python bench/nested_exec.py --json     # machine-readable
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from openprogram import Runtime, ToolRegistry
from openprogram_sim.models import ScriptedModel, Turn

DEPTH = 8
REPEATS = 40

TURNS = [Turn.coerce({"tool_calls": [{"dive": {}}]}) for _ in range(DEPTH)]
TURNS += [Turn.coerce({"text": "up"}) for _ in range(DEPTH + 1)]


def chain(kind: str, peak: list[int]) -> Callable[[], Any]:
    """One chain of ``kind`` (sync or async), ready to run (returns a coroutine)."""
    model = ScriptedModel(TURNS, seed=0)
    runtime = Runtime(provider=model, registry=ToolRegistry())

    def sync_dive() -> str:
        peak[0] = max(peak[0], threading.active_count())
        return str(runtime.exec("dive"))

    async def async_dive() -> str:
        return str(await runtime.aexec("dive"))

    spec = {"name": "dive", "description": "Go deeper.", "parameters": {"type": "object"}}
    tool = {"spec": spec, "execute": sync_dive if kind == "sync" else async_dive}

    async def run() -> None:
        assert await runtime.aexec("go", tools=[tool]) == "up"
        assert model.calls == len(TURNS), model.calls

    return run


async def one(kind: str, peak: list[int]) -> float:
    run = chain(kind, peak)
    start = time.perf_counter()
    await run()
    return (time.perf_counter() - start) / (DEPTH + 1) * 1e6


async def measure(repeats: int = REPEATS) -> tuple[dict[str, list[float]], int]:
    peak = [0]
    for _ in range(3):  # warm-up
        await one("sync", peak)
        await one("async", peak)
    before = threading.active_count()
    peak[0] = before
    samples: dict[str, list[float]] = {"sync": [], "async": []}
    for _ in range(repeats):
        for kind in samples:
            samples[kind].append(await one(kind, peak))
    return samples, peak[0] - before


def summarize(samples: dict[str, list[float]], threads: int) -> dict[str, Any]:
    sync, awaited = samples["sync"], samples["async"]
    return {
        "sync_best_us": min(sync),
        "sync_median_us": statistics.median(sync),
        "async_best_us": min(awaited),
        "async_median_us": statistics.median(awaited),
        "ratio_best": min(sync) / min(awaited),
        "ratio_median": statistics.median(s / a for s, a in zip(sync, awaited, strict=True)),
        "extra_threads": threads,
        "depth": DEPTH,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args()
    row = summarize(*asyncio.run(measure(args.repeats)))
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({**row, "load_average": load, "python": sys.version.split()[0]}))
        return
    print(f"nested exec per level, a chain {DEPTH} deep, Python {platform.python_version()}, "
          f"load average {load:.2f}")  # fmt: skip
    print(f"  sync tool calling exec    {row['sync_best_us']:8.1f} us best "
          f"{row['sync_median_us']:8.1f} us median")  # fmt: skip
    print(f"  async tool awaiting aexec {row['async_best_us']:8.1f} us best "
          f"{row['async_median_us']:8.1f} us median")  # fmt: skip
    print(f"  ratio sync / async        {row['ratio_best']:8.2f} best {row['ratio_median']:8.2f} "
          "median of pairs")  # fmt: skip
    print(f"  threads beyond those before, at most: {row['extra_threads']}")


if __name__ == "__main__":
    main()
