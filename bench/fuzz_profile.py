"""The loop fuzz campaign's rate on one core, by the wall clock and by the CPU clock, and
where its time goes: ``python bench/fuzz_profile.py [--examples N] [--profile] [--json]``.

``bench/run.py``'s ``fuzz_examples_per_s`` is the best wall-clock rate of three seeds; on
a shared machine the wall clock counts the time other processes held the core, so this
script reports the CPU rate beside it (examples per CPU second of this process: what one
free core would give), each seed's figures with the load average. ``--profile`` prints
cProfile's top entries (by own time and by cumulative time) over one more campaign.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import time

from openprogram_sim.fuzz import run_campaign


def measure(examples: int, seeds: tuple[int, ...]) -> dict[str, object]:
    run_campaign(100, seed=1, workers=1, regressions=None)  # warm-up, as bench/run.py
    rows = []
    for seed in seeds:
        load = os.getloadavg()[0]
        cpu = time.process_time()
        result = run_campaign(examples, seed=seed, workers=1, regressions=None)
        cpu = time.process_time() - cpu
        if result.failure is not None:
            raise SystemExit(f"the fuzz campaign found a violation: {result.failure.violations}")
        rows.append(
            {
                "seed": seed,
                "examples_per_s": round(result.runs_per_second),
                "examples_per_cpu_s": round(examples / cpu),
                "load": round(load, 2),
            }
        )
    return {
        "examples": examples,
        "seeds": rows,
        "best_examples_per_s": max(r["examples_per_s"] for r in rows),
        "best_examples_per_cpu_s": max(r["examples_per_cpu_s"] for r in rows),
    }


def profile(examples: int, top: int = 30) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    run_campaign(examples, seed=2, workers=1, regressions=None)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=3000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.examples, (2, 3, 4))
    for row in result["seeds"]:  # type: ignore[attr-defined]
        print(row)
    if args.profile:
        print(profile(args.examples))
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
