"""How the costs grow with the work: the curves of issue 28, each measured again in one run.

Four curves, each in a fresh Python process, each point measured interleaved with the other
points of its curve (repeat r of every point, then repeat r+1), so load on a shared machine
lands on all of them alike:

- **serve**: streamed OpenAI chat replies per second at 1, 10 and 50 keep-alive clients, for
  ``openprogram-sim serve``, the hello-world floor on its stack and aimock when present
  (``bench/serve_peers.py``, whose docstring says how);
- **memory**: the peak RSS of ``openprogram-sim run`` over 1,000, 3,000 and 10,000 scenario
  files, and the wire server's RSS after 10,000, 25,000, 50,000 and 100,000 requests over
  1,000 sessions (``bench/memory.py``'s measures);
- **history**: ``Runtime.aexec``'s cost per round (model call to model call, the scripted
  model) continuing a history of 10, 100, 1,000 and 5,000 messages
  (``bench/history_cost.py``'s measure);
- **nesting**: the cost per level of a chain of nested execs 1, 2, 4, 8 and 16 deep, a sync
  tool calling ``exec`` beside an async tool awaiting ``aexec`` (``bench/nested_exec.py``'s).

It prints the curves as the Markdown tables of ``bench/README.md``'s scaling section, each
headed with the load average before and after it; ``--json`` ends with one JSON object.
``--quick`` divides the memory counts by 10 and takes fewer repeats.

    python bench/scaling.py [--quick] [--json] [--only CURVE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
HISTORY_LENGTHS = (10, 100, 1000, 5000)
DEPTHS = (1, 2, 4, 8, 16)
RUN_COUNTS = (1000, 3000, 10000)
SERVE_COUNTS = (10000, 25000, 50000, 100000)
SESSIONS = 1000


def curve_history(quick: bool) -> dict[str, Any]:
    sys.path.insert(0, str(BENCH))
    import history_cost

    history_cost.LENGTHS = HISTORY_LENGTHS
    samples = asyncio.run(history_cost.measure(8 if quick else 30))
    return {
        "history_lengths": list(HISTORY_LENGTHS),
        "history_round_us": [round(min(samples[n]["round"]), 2) for n in HISTORY_LENGTHS],
        "history_round_us_median": [
            round(statistics.median(samples[n]["round"]), 2) for n in HISTORY_LENGTHS
        ],
        "history_exec_us": [round(min(samples[n]["exec"]), 2) for n in HISTORY_LENGTHS],
    }


def curve_nesting(quick: bool) -> dict[str, Any]:
    sys.path.insert(0, str(BENCH))
    import nested_exec

    from openprogram_sim.models import Turn

    repeats = 8 if quick else 30
    per_depth: dict[int, dict[str, list[float]]] = {d: {"sync": [], "async": []} for d in DEPTHS}
    turns = {
        d: [Turn.coerce({"tool_calls": [{"dive": {}}]}) for _ in range(d)]
        + [Turn.coerce({"text": "up"}) for _ in range(d + 1)]
        for d in DEPTHS
    }
    peak = [0]

    async def one(depth: int, kind: str) -> float:
        nested_exec.DEPTH, nested_exec.TURNS = depth, turns[depth]
        return await nested_exec.one(kind, peak)

    async def measure() -> None:
        for depth in DEPTHS:  # warm-up
            for kind in ("sync", "async"):
                await one(depth, kind)
        for _ in range(repeats):
            for depth in DEPTHS:
                for kind in ("sync", "async"):
                    per_depth[depth][kind].append(await one(depth, kind))

    asyncio.run(measure())
    return {
        "nesting_depths": list(DEPTHS),
        "nesting_sync_us_per_level": [round(min(per_depth[d]["sync"]), 1) for d in DEPTHS],
        "nesting_async_us_per_level": [round(min(per_depth[d]["async"]), 1) for d in DEPTHS],
        "nesting_ratio": [
            round(min(per_depth[d]["sync"]) / min(per_depth[d]["async"]), 2) for d in DEPTHS
        ],
    }


def curve_memory(quick: bool) -> dict[str, Any]:
    sys.path.insert(0, str(BENCH))
    import memory

    scale = 10 if quick else 1
    runs = [n // scale for n in RUN_COUNTS]
    serves = [n // scale for n in SERVE_COUNTS]
    rss, _ = memory.serve_rss(tuple(serves), SESSIONS // scale)
    return {
        "run_scenarios": runs,
        "run_rss_mib": [round(memory.run_rss(n), 1) for n in runs],
        "serve_requests": serves,
        "serve_sessions": SESSIONS // scale,
        "serve_rss_mib": [round(x, 1) for x in rss],
    }


def curve_serve(quick: bool) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(BENCH / "serve_peers.py"), "--json", *(["--quick"] if quick else [])],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"bench/serve_peers.py failed:\n{done.stderr[-2000:]}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    clients = [1, 10, 50]
    out: dict[str, Any] = {"serve_clients": clients, "serve_stack": data.get("serve_stack")}
    for who in ("serve", "serve_floor", "aimock"):
        if f"{who}_rps_c1" in data:
            out[f"{who}_rps"] = [data[f"{who}_rps_c{c}"] for c in clients]
            out[f"{who}_cpu_us"] = [data[f"{who}_cpu_us_c{c}"] for c in clients]
    if "aimock_rps" not in out:
        out["aimock"] = data.get("aimock")
    return out


CURVES: dict[str, Callable[[bool], dict[str, Any]]] = {
    "serve": curve_serve,
    "memory": curve_memory,
    "history": curve_history,
    "nesting": curve_nesting,
}


def _curve_in_subprocess(name: str, quick: bool) -> dict[str, Any]:
    args = [sys.executable, __file__, "--curve", name, *(["--quick"] if quick else [])]
    started = time.perf_counter()
    load = os.getloadavg()[0]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"curve {name} failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
    data = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    data[f"{name}_load_average"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    data[f"{name}_seconds"] = round(time.perf_counter() - started, 1)
    return data


def _cell(value: Any) -> str:
    return f"{value:,}" if isinstance(value, (int, float)) else str(value)


def _table(corner: str, columns: list[Any], rows: list[tuple[str, list[Any]]]) -> list[str]:
    lines = [f"| {corner} | " + " | ".join(_cell(c) for c in columns) + " |"]
    lines.append("|---|" + "---:|" * len(columns))
    lines += [
        f"| {label} | " + " | ".join(_cell(v) for v in values) + " |" for label, values in rows
    ]
    return lines


def _ratios(a: list[float], b: list[float]) -> list[float]:
    return [round(x / y, 2) for x, y in zip(a, b, strict=True)]


def markdown(data: dict[str, Any]) -> str:
    """The curves as Markdown tables, each headed with the load average before and after it."""
    out: list[str] = []

    def head(name: str, title: str) -> None:
        before, after = data[f"{name}_load_average"]
        out.extend(["", f"**{title}** (load average {before} → {after}):", ""])

    if "serve_clients" in data:
        head("serve", f"Streamed replies per second by clients ({data['serve_stack']})")
        rows: list[tuple[str, list[Any]]] = []
        names = {"serve": "`openprogram-sim serve`", "serve_floor": "hello-world floor"}
        for who, label in {**names, "aimock": "aimock"}.items():
            if f"{who}_rps" in data:
                rows.append((f"{label}, replies/s", data[f"{who}_rps"]))
                rows.append((f"{label}, CPU µs a reply", data[f"{who}_cpu_us"]))
        if "aimock_rps" in data:
            rows.append(("serve ÷ aimock", _ratios(data["serve_rps"], data["aimock_rps"])))
        rows.append(("serve ÷ floor", _ratios(data["serve_rps"], data["serve_floor_rps"])))
        out += _table("clients", data["serve_clients"], rows)
        if "aimock" in data:
            out += ["", str(data["aimock"])]
    if "run_scenarios" in data:
        head("memory", "Memory against the work")
        runs = [("peak RSS, MiB", data["run_rss_mib"])]
        out += _table("`openprogram-sim run` over N files", data["run_scenarios"], runs)
        out.append("")
        corner = f"server after N requests over {data['serve_sessions']:,} sessions"
        out += _table(corner, data["serve_requests"], [("RSS, MiB", data["serve_rss_mib"])])
    if "history_lengths" in data:
        head("history", "`Runtime.aexec` per round against the history it continues")
        rows = [
            ("µs a round (best)", data["history_round_us"]),
            ("µs a round (median)", data["history_round_us_median"]),
            ("the whole exec, µs a round (best)", data["history_exec_us"]),
        ]
        out += _table("messages of history", data["history_lengths"], rows)
    if "nesting_depths" in data:
        head("nesting", "Nested exec, cost per level against depth")
        rows = [
            ("sync tool calling `exec`, µs a level", data["nesting_sync_us_per_level"]),
            ("async tool awaiting `aexec`, µs a level", data["nesting_async_us_per_level"]),
            ("sync ÷ async", data["nesting_ratio"]),
        ]
        out += _table("depth", data["nesting_depths"], rows)
    return "\n".join(out).strip("\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON object")
    parser.add_argument("--quick", action="store_true", help="smaller counts, fewer repeats")
    parser.add_argument("--only", action="append", choices=list(CURVES), help="these curves")
    parser.add_argument("--curve", choices=list(CURVES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    if args.curve:
        print(json.dumps(CURVES[args.curve](args.quick)))
        return
    data: dict[str, Any] = {}
    for name in args.only or CURVES:
        data.update(_curve_in_subprocess(name, args.quick))
    data.update(bench="scaling", python=platform.python_version(), cpus=os.cpu_count(),
                quick=args.quick)  # fmt: skip
    print(markdown(data))
    if args.json:
        print(json.dumps(data))


if __name__ == "__main__":
    main()
