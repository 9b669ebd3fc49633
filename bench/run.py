"""Every benchmark row in one run, side by side: ``python bench/run.py [--json] [--quick]``.

Each part runs in a fresh Python process (so one part's imports and heap do not slow the
next) and reports one JSON object; this script prints one table and, with ``--json``, one
JSON object as the last line of its output. Rows:

- ``floor_us_per_round`` / ``loop_minimal_us_per_round`` / ``loop_us_per_round`` /
  ``pydantic_ai_us_per_round``: the loop's overhead per round (``bench/loop_overhead.py``):
  a bare hand-written loop, ``Agent`` with a minimal provider, ``Runtime.aexec`` with the
  scripted model, pydantic-ai's ``Agent.run`` (null when pydantic-ai is not installed);
  ``loop_x_floor`` / ``loop_minimal_x_floor``: those two against the bare loop measured
  interleaved with them (best over best; ``*_median``: the median of per-repeat ratios);
- ``history_*``: ``Runtime.aexec`` continuing a history of 10 and of 5,000 messages
  (``bench/history_cost.py``): ``history_round_us_*`` the time from one model call to the
  next, ``history_round_ratio`` 5,000 against 10; ``history_exec_*`` the whole exec per
  round (what an exec pays once for its history included);
- ``nested_*``: a chain of nested execs (``bench/nested_exec.py``): microseconds per level
  with a sync tool calling ``exec`` and with an async tool awaiting ``aexec``, their ratio,
  and the threads the sync chain started beyond those alive before it;
- ``scenarios_per_s``: load + validate + run + check, in-process on one core, over a library
  of 1,200 scenario files (``scenarios/`` copied until there are that many);
- ``cli_library_s``: ``openprogram-sim run scenarios/`` wall time, start-up included (best
  of 3);
- ``plugin_overhead_ms_per_item``: what a ``pytest --openprogram-scenarios`` item costs beyond
  a trivial test item and the scenario's own in-process time (same count, same run);
- ``fuzz_examples_per_s``: ``openprogram-sim fuzz`` examples per second on one core;
- ``tools_fuzz_runs_per_s``: ``openprogram-sim fuzz --registry`` over a registry of three
  simple tools, each run in the sandbox process, with the default workers (2);
  ``tools_fuzz_ratio_to_loop``: that against the loop campaign's rate measured in the same
  part, back to back;
- ``rss_growth_pct``: resident memory after 1,000 runs of a 50-round scenario against after
  100;
- ``serve_*``: the wire server (``bench/serve_throughput.py``): streamed 10-piece replies
  per second against a hello-world floor on the same stack; ``serve_x_aimock_c*`` /
  ``serve_x_floor_c*`` (``bench/serve_peers.py``): replies per second at 1, 10 and 50
  keep-alive clients against aimock and against the floor, measured by a raw client;
- ``cassette_*``: cassette replay, when ``bench/cassette_replay.py`` exists.

Timing on a shared machine is noisy: compare the rows of one run, not runs of different
days; every part keeps the best of a few repeats. The one-minute load average is taken as
each part starts (``load_by_part``) and at the end; ``--markdown`` prints the run as one
table with them, and ``--record`` puts that table at the top of ``bench/README.md``'s runs.

Bytecode caches are on for every part, as on a user's machine, even where the environment
turns them off (``PYTHONDONTWRITEBYTECODE``, set on this project's CI machines): without
them every CLI run and pytest session compiles each module it imports again, and pytest's
assertion rewriting re-parses every module of the plugin's distribution (the engine and the
harness), which took about 0.5 ms a scenario item out of a 1,200-item session.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
BIN = Path(sys.executable).parent
LIBRARY_SIZE = 1200


def _library(target: Path, size: int) -> list[Path]:
    """``scenarios/`` copied into ``target`` until it holds ``size`` files."""
    source = sorted((ROOT / "scenarios").rglob("*.yaml"))
    helpers = sorted(p for p in (ROOT / "scenarios").rglob("*.py") if "__pycache__" not in p.parts)
    files: list[Path] = []
    copy = 0
    while len(files) < size:
        for path in source:
            if len(files) == size:
                break
            dest = target / f"c{copy}" / path.relative_to(ROOT / "scenarios")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
            files.append(dest)
        for path in helpers:  # the modules python: tools import (scenarios/setup/library_notes.py)
            dest = target / f"c{copy}" / path.relative_to(ROOT / "scenarios")
            if dest.parent.exists():
                shutil.copyfile(path, dest)
        copy += 1
    return files


# --------------------------------------------------------------------------- parts


def part_loop(quick: bool) -> dict[str, Any]:
    import asyncio

    sys.path.insert(0, str(BENCH))
    import loop_overhead

    if quick:
        loop_overhead.REPEATS = 5
    stats = loop_overhead.summarize(asyncio.run(loop_overhead.measure()))
    pick = {
        "floor": "bare hand-written loop",
        "loop_minimal": "openprogram Agent.prompt (minimal provider)",
        "loop": "openprogram Runtime.aexec (ScriptedModel)",
        "pydantic_ai": "pydantic-ai Agent.run (FunctionModel)",
    }
    rows: dict[str, Any] = {}
    for key, name in pick.items():
        row = stats.get(name)
        rows[f"{key}_us_per_round"] = round(row["best_us"], 2) if row else None
        if key in ("loop", "loop_minimal") and row:
            rows[f"{key}_x_floor"] = round(row["x_floor_best"], 1)
            rows[f"{key}_x_floor_median"] = round(row["x_floor_median"], 1)
    return rows


def part_history(quick: bool) -> dict[str, Any]:
    import asyncio

    sys.path.insert(0, str(BENCH))
    import history_cost

    rows = history_cost.summarize(asyncio.run(history_cost.measure(8 if quick else 30)))
    per_round, per_exec = rows["round"], rows["exec"]
    return {
        "history_round_us_10": round(per_round["best_us_10"], 2),
        "history_round_us_5000": round(per_round["best_us_5000"], 2),
        "history_round_ratio": round(per_round["ratio_best"], 2),
        "history_round_ratio_median": round(per_round["ratio_median"], 2),
        "history_exec_us_per_round_10": round(per_exec["best_us_10"], 2),
        "history_exec_us_per_round_5000": round(per_exec["best_us_5000"], 2),
        "history_exec_ratio": round(per_exec["ratio_best"], 2),
    }


def part_nested(quick: bool) -> dict[str, Any]:
    import asyncio

    sys.path.insert(0, str(BENCH))
    import nested_exec

    row = nested_exec.summarize(*asyncio.run(nested_exec.measure(10 if quick else 40)))
    return {
        "nested_sync_us_per_level": round(row["sync_best_us"], 2),
        "nested_async_us_per_level": round(row["async_best_us"], 2),
        "nested_sync_ratio": round(row["ratio_best"], 2),
        "nested_sync_ratio_median": round(row["ratio_median"], 2),
        "nested_sync_extra_threads": row["extra_threads"],
    }


def part_scenarios(quick: bool) -> dict[str, Any]:
    from openprogram_sim.play import check_outcome, run_scenario
    from openprogram_sim.scenario import load_scenario

    size = 300 if quick else LIBRARY_SIZE
    with tempfile.TemporaryDirectory() as tmp:
        files = _library(Path(tmp), size)
        for path in files[:60]:  # warm-up: first-use imports and compiled validators
            check_outcome(run_scenario(load_scenario(path)))
        best = float("inf")
        failed = 0
        for _ in range(2 if quick else 3):
            start = time.perf_counter()
            for path in files:
                failed += not check_outcome(run_scenario(load_scenario(path))).passed
            best = min(best, time.perf_counter() - start)
    if failed:
        raise SystemExit(f"{failed} scenario runs failed")
    return {"scenarios_per_s": round(size / best), "scenario_ms": round(best / size * 1000, 3)}


def part_cli(quick: bool) -> dict[str, Any]:
    times = []
    for _ in range(2 if quick else 3):
        start = time.perf_counter()
        done = subprocess.run(
            [str(BIN / "openprogram-sim"), "run", "scenarios/"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    files = len(list((ROOT / "scenarios").rglob("*.yaml")))
    return {"cli_library_s": round(min(times), 3), "cli_library_files": files}


def _pytest(folder: Path, *args: str) -> tuple[float, float]:
    """One pytest session in a fresh process: (its CPU seconds, user and system, read from
    the children's rusage; its wall seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         *args],
        cwd=folder,
        capture_output=True,
        text=True,
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(done.stdout[-3000:])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, elapsed


OWN_COST = """
import sys, time
from pathlib import Path
start, wall = time.process_time(), time.perf_counter()
from openprogram_sim.play import check_outcome, run_scenario
from openprogram_sim.scenario import load_scenario
for path in Path(sys.argv[1]).read_text().splitlines():
    check_outcome(run_scenario(load_scenario(path)))
print(time.process_time() - start, time.perf_counter() - wall)
"""


def _own_cost(folder: Path, listing: Path) -> tuple[float, float]:
    """The scenario files ``listing`` names loaded, run and checked in a fresh process in
    ``folder``, without the plugin: (its CPU seconds from the import of what runs them on,
    its wall seconds)."""
    done = subprocess.run(
        [sys.executable, "-c", OWN_COST, str(listing)], cwd=folder, capture_output=True,
        text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    cpu, wall = done.stdout.split()
    return float(cpu), float(wall)


def part_plugin(quick: bool) -> dict[str, Any]:
    """The plugin's cost per scenario item beyond a trivial item and the scenario's own
    in-process cost, on the CPU clock: each session's CPU time (one process, no workers, so
    the CPU it used is the time it took on a core of its own), which a shared machine's load
    disturbs far less than wall time (that difference of wall times came out anywhere from
    -1.6 to 1.4 ms at load 2 to 3.6). The sessions alternate, best of each; the wall figures
    are kept beside (``*_wall_*``)."""
    size = 300 if quick else LIBRARY_SIZE
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "scen").mkdir()
        files = _library(base / "scen" / "scenarios", size)
        (base / "trivial").mkdir()
        (base / "trivial" / "test_trivial.py").write_text(
            f"import pytest\n\n@pytest.mark.parametrize('i', range({size}))\n"
            "def test_item(i):\n    assert i >= 0\n"
        )
        # the scenarios' own cost, to take out: load, run and check each file in a fresh
        # process, with the import of what runs them (the session pays it as well), on
        # the CPU clock; alternating with the sessions, best of each (one measurement of
        # it swung the overhead by 0.5 ms under load). Best of five, not three: on a
        # shared 2-core machine a process's CPU time comes out up to 20-30% high while the
        # other core is busy (six rounds at load 2.5 gave 1.82-2.89 s for the own cost,
        # 4.76-7.04 s for the scenario session, 2.17-3.09 s for the trivial one), and the
        # overhead is a difference of ~1 s out of those: one of the three 5% high moved it
        # by 0.25 ms an item. The best of five of each is nearer its uncontended time.
        listing = base / "files.txt"
        listing.write_text("".join(f"{path}\n" for path in files))
        own_runs: list[tuple[float, float]] = []
        scen: list[tuple[float, float]] = []
        trivial: list[tuple[float, float]] = []
        for _ in range(2 if quick else 5):
            own_runs.append(_own_cost(base / "scen", listing))
            scen.append(_pytest(base / "scen", "--openprogram-scenarios"))
            trivial.append(_pytest(base / "trivial"))
    own = min(c for c, _ in own_runs) / size
    own_wall = min(w for _, w in own_runs) / size
    per_scenario = min(c for c, _ in scen) / size
    per_trivial = min(c for c, _ in trivial) / size
    wall_scenario = min(w for _, w in scen) / size
    wall_trivial = min(w for _, w in trivial) / size
    return {
        "plugin_overhead_ms_per_item": round((per_scenario - per_trivial - own) * 1000, 3),
        "plugin_scenario_item_ms": round(per_scenario * 1000, 3),
        "plugin_trivial_item_ms": round(per_trivial * 1000, 3),
        "plugin_overhead_wall_ms_per_item": round(
            (wall_scenario - wall_trivial - own_wall) * 1000, 3
        ),
    }


def part_fuzz(quick: bool) -> dict[str, Any]:
    from openprogram_sim.fuzz import run_campaign

    examples = 500 if quick else 3000
    run_campaign(100, seed=1, workers=1, regressions=None)  # warm-up
    best = 0.0
    for seed in (2, 3) if quick else (2, 3, 4):
        result = run_campaign(examples, seed=seed, workers=1, regressions=None)
        if result.failure is not None:
            raise SystemExit(f"the fuzz campaign found a violation: {result.failure.violations}")
        best = max(best, result.runs_per_second)
    return {"fuzz_examples_per_s": round(best)}


SIMPLE_TOOLS = '''
from openprogram import ToolRegistry, function

registry = ToolRegistry()


@function(registry=registry)
def add(a: int, b: int) -> int:
    """Adds.

    Args:
        a: A number.
        b: Another.
    """
    return a + b


@function(registry=registry)
def echo(text: str) -> str:
    """Echoes.

    Args:
        text: What to echo.
    """
    return text


@function(registry=registry)
def upper(text: str, times: int = 1) -> str:
    """Upper-cases.

    Args:
        text: The text.
        times: How many times.
    """
    return text.upper() * max(0, min(times, 3))
'''


def part_tools_fuzz(quick: bool) -> dict[str, Any]:
    from openprogram_sim.fuzz import ToolTarget, run_campaign, run_tool_campaign
    from openprogram_sim.fuzz.tools import DEFAULT_WORKERS

    examples = 1000 if quick else 3000
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "bench_simple_tools.py").write_text(SIMPLE_TOOLS)
        target = ToolTarget.load(registry="bench_simple_tools:registry", pythonpath=[tmp])
        workers = min(DEFAULT_WORKERS, os.cpu_count() or 1)
        tools_best = loop_best = 0.0
        for seed in (2, 3) if quick else (2, 3, 4):
            result = run_tool_campaign(target, examples, seed=seed, workers=workers,
                                       regressions=None)  # fmt: skip
            if result.failure is not None:
                raise SystemExit(f"the tools campaign broke: {result.failure.violations}")
            tools_best = max(tools_best, result.runs_per_second)
            loop = run_campaign(examples, seed=seed, workers=1, regressions=None)
            loop_best = max(loop_best, loop.runs_per_second)
    return {
        "tools_fuzz_runs_per_s": round(tools_best),
        "tools_fuzz_workers": workers,
        "tools_fuzz_loop_examples_per_s": round(loop_best),
        "tools_fuzz_ratio_to_loop": round(tools_best / loop_best, 2) if loop_best else None,
    }


def _rss_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def part_rss(quick: bool) -> dict[str, Any]:
    import gc

    from openprogram_sim.play import run_scenario
    from openprogram_sim.scenario import parse_scenario

    turns = "\n".join("  - tool_calls: [{add: {a: 1, b: 2}}]" for _ in range(49))
    text = (
        "scenario: fifty rounds\n"
        "tools:\n  add: {returns: 3}\n"
        "exec: {content: go, tools: [add]}\n"
        f"model:\n{turns}\n  - text: done\n"
    )
    scenario = parse_scenario(text, "fifty.yaml")
    for _ in range(100):
        assert run_scenario(scenario).rounds == 50
    gc.collect()
    after_100 = _rss_kb()
    for _ in range(300 if quick else 900):
        run_scenario(scenario)
    gc.collect()
    after_1000 = _rss_kb()
    return {
        "rss_growth_pct": round((after_1000 - after_100) / after_100 * 100, 2),
        "rss_after_100_kb": after_100,
        "rss_after_1000_kb": after_1000,
    }


def _script(path: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(path), *args], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def part_serve(quick: bool) -> dict[str, Any]:
    data = _script(BENCH / "serve_throughput.py", "--runs", "1" if quick else "3")
    rps = data["rps"]
    return {
        "serve_streamed_rps_1": rps["wire/1"],
        "serve_streamed_rps_10": rps["wire/10"],
        "serve_floor_rps_1": rps["hello/1"],
        "serve_floor_rps_10": rps["hello/10"],
    }


def part_serve_peers(quick: bool) -> dict[str, Any]:
    """``openprogram-sim serve`` against aimock and the same-stack floor
    (``bench/serve_peers.py``): streamed OpenAI chat replies through a raw keep-alive client
    at 1/10/50 connections, rates and CPU per reply; ``aimock`` says why when it is not
    available (Node or the package missing)."""
    data = _script(BENCH / "serve_peers.py", "--json", *(["--quick"] if quick else []))
    return {k: v for k, v in data.items() if k not in ("bench", "python", "cpus")}


def part_cassette(quick: bool) -> dict[str, Any]:
    script = BENCH / "cassette_replay.py"
    if not script.exists():
        return {}
    data = _script(script, *(["--quick"] if quick else []))
    return {f"cassette_{k}": v for k, v in data.items() if k not in ("bench", "python", "cpus")}


def part_memory(quick: bool) -> dict[str, Any]:
    """Memory flat with the work (``bench/memory.py``): peak RSS of ``openprogram-sim run``
    over 1,000 and 10,000 scenario files, and the wire server's RSS after 10,000 and 100,000
    requests across 1,000 sessions, each in a fresh process (``--quick``: every count / 10,
    same keys); ``*_ratio`` the larger against the smaller."""
    data = _script(BENCH / "memory.py", "--json", *(["--quick"] if quick else []))
    keys = ("run_rss_1k_mib", "run_rss_10k_mib", "run_rss_ratio",
            "serve_rss_10k_mib", "serve_rss_100k_mib", "serve_rss_ratio")  # fmt: skip
    return {k: data[k] for k in keys}


def part_agent_fuzz(quick: bool) -> dict[str, Any]:
    """``fuzz --agent``: fuzzed sessions per second, an in-process agent and a command."""
    sys.path.insert(0, str(BENCH))
    import agent_fuzz

    return dict(agent_fuzz.measure(quick))


PARTS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "loop": part_loop,
    "history": part_history,
    "nested": part_nested,
    "scenarios": part_scenarios,
    "cli": part_cli,
    "plugin": part_plugin,
    "fuzz": part_fuzz,
    "tools_fuzz": part_tools_fuzz,
    "agent_fuzz": part_agent_fuzz,
    "memory": part_memory,
    "rss": part_rss,
    "serve": part_serve,
    "serve_peers": part_serve_peers,
    "cassette": part_cassette,
}


# --------------------------------------------------------------------------- report

GOALS = {
    "loop_x_floor": ("≤ 20x", lambda v: v <= 20),
    "loop_minimal_x_floor": ("≤ 10x", lambda v: v <= 10),
    "history_round_ratio": ("≤ 1.3x", lambda v: v <= 1.3),
    "nested_sync_ratio": ("≤ 2x", lambda v: v <= 2),
    "nested_sync_extra_threads": ("0", lambda v: v == 0),
    "scenarios_per_s": ("≥ 1,000", lambda v: v >= 1000),
    "cli_library_s": ("< 1 s", lambda v: v < 1),
    "plugin_overhead_ms_per_item": ("≤ 0.7 ms", lambda v: v <= 0.7),  # issue 28 (was < 1 ms)
    "fuzz_examples_per_s": ("≥ 1,300", lambda v: v >= 1300),  # issue 28 (was ≥ 1,000)
    "tools_fuzz_runs_per_s": ("≥ 300", lambda v: v >= 300),
    "tools_fuzz_ratio_to_loop": ("≥ 0.4", lambda v: v >= 0.4),
    "rss_growth_pct": ("< 10 %", lambda v: v < 10),
    "run_rss_ratio": ("≤ 2x", lambda v: v <= 2),
    "serve_rss_ratio": ("≤ 1.5x", lambda v: v <= 1.5),
    # issue 28 goal 1: each client count against aimock and the same stack's floor
    **{f"serve_x_aimock_c{c}": ("≥ 1.5x", lambda v: v >= 1.5) for c in (1, 10, 50)},
    **{f"serve_x_floor_c{c}": ("≥ 0.8x", lambda v: v >= 0.8) for c in (1, 10, 50)},
}


def _part_in_subprocess(name: str, quick: bool) -> dict[str, Any]:
    args = [sys.executable, __file__, "--part", name, *(["--quick"] if quick else [])]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"part {name} failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}", file=sys.stderr)
        return {}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:,}"


def markdown(rows: dict[str, Any], parts: dict[str, dict[str, Any]]) -> str:
    """One run as the Markdown table ``bench/README.md`` keeps: a heading with the commit,
    the date and the load average over the run, then a row per figure with its part's load
    average when the part started (a run takes minutes; the load moves)."""
    lines = [
        f"### {rows['date']}, commit `{rows['commit']}`, load average {rows['load_average']}"
        f" → {rows['load_average_after']}{' (quick)' if rows.get('quick') else ''}",
        "",
        f"Python {rows['python']}, {rows['cpus']} cpus.",
        "",
        "| part | row | value | goal | | load |",
        "|---|---|---:|---|---|---:|",
    ]
    for part, info in parts.items():
        for key in info["keys"]:
            value = rows[key]
            if isinstance(value, (list, dict)):
                continue
            goal, ok = GOALS.get(key, ("", None))
            verdict = "" if ok is None or value is None else ("met" if ok(value) else "**not met**")
            lines.append(
                f"| {part} | `{key}` | {_shown(value)} | {goal} | {verdict} | {info['load']} |"
            )
    return "\n".join(lines)


RUNS_MARK = "<!-- bench/run.py --record puts each run here, newest first -->"


def record(table: str, readme: Path = BENCH / "README.md") -> None:
    """Put ``table`` at the top of the README's runs (below :data:`RUNS_MARK`)."""
    text = readme.read_text(encoding="utf-8")
    if RUNS_MARK not in text:
        raise SystemExit(f"{readme}: no line {RUNS_MARK!r} to put the run below; add it back")
    head, _, tail = text.partition(RUNS_MARK)
    readme.write_text(f"{head}{RUNS_MARK}\n\n{table}\n\n{tail.lstrip()}", encoding="utf-8")


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON object")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    parser.add_argument("--part", choices=list(PARTS), help=argparse.SUPPRESS)
    parser.add_argument("--only", action="append", choices=list(PARTS), help="run these parts")
    parser.add_argument(
        "--markdown", action="store_true", help="also print the run's Markdown table"
    )
    parser.add_argument(
        "--record", action="store_true", help="put the run's table into bench/README.md's runs"
    )
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # see the module docstring
    sys.dont_write_bytecode = False
    if args.part:
        print(json.dumps(PARTS[args.part](args.quick)))
        return
    rows: dict[str, Any] = {}
    parts: dict[str, dict[str, Any]] = {}
    started = _load()
    for name in args.only or PARTS:
        load = _load()
        got = _part_in_subprocess(name, args.quick)
        rows.update(got)
        parts[name] = {"load": load, "keys": list(got)}
    meta = {
        "commit": _commit(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": started,
        "load_average_after": _load(),
        "load_by_part": {name: info["load"] for name, info in parts.items()},
        "quick": args.quick,
    }
    print(f"openprogram benchmarks, commit {meta['commit']}, Python {meta['python']}, "
          f"{meta['cpus']} cpus, load average {meta['load_average']} → "
          f"{meta['load_average_after']}")  # fmt: skip
    for key, value in rows.items():
        goal, ok = GOALS.get(key, ("", None))
        verdict = "" if ok is None or value is None else ("met" if ok(value) else "NOT met")
        shown = "null" if value is None else f"{value:,}" if isinstance(value, int) else value
        print(f"  {key:<34} {shown!s:>12}   {goal:<10} {verdict}")
    rows.update(meta)
    if args.markdown or args.record:
        table = markdown(rows, parts)
        if args.markdown:
            print(table)
        if args.record:
            record(table)
            print(f"the run's table is in {BENCH / 'README.md'}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
