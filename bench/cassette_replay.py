"""Replayed 10-round sessions per second: openprogram's cassette replay through the real
adapter, beside plain vcrpy replaying the same cassette to a bare httpx client.

A 10-round session (nine rounds with a tool call, then a text answer; every reply
streamed) is recorded once through the Anthropic adapter against the wire server. Then,
in the same process, taking turns run by run:

- **openprogram**: ``Cassette(path).load()``, ``cassette.provider()``, and the scenario run
  on it: the loop, the tools, the adapter parsing each streamed reply, the trace; every
  request matched on method, path and JSON body;
- **plain vcrpy**: ``vcr.VCR(record_mode="none").use_cassette(path)`` (its own matchers and
  httpx stubs, our serializer registered), the ten recorded requests sent by one
  ``httpx.Client`` and each body read whole: no loop, no parsing.

Both load the cassette file for every session, as a test does; the goal (at least as fast)
is on these two. A third row, for reference, is plain vcrpy with the cassette opened once
for all sessions (``allow_playback_repeats``): the bare cost of its ten requests, without
the cost of opening a cassette (its patching). Each figure is the best of ``--runs`` timed
runs of ``--sessions`` sessions after a warm-up. Prints a table, then one JSON line.

    python bench/cassette_replay.py [--sessions 200] [--runs 5] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROUNDS = 10
MODEL = "anthropic:claude-sonnet-4-5"


def _scenario_text() -> str:
    turns = "".join(f"  - tool_calls: [{{lookup: {{q: 'fact {i}'}}}}]\n" for i in range(1, ROUNDS))
    return f"""\
scenario: ten rounds of lookups, then the answer
tools:
  lookup:
    description: Look a fact up.
    parameters: {{type: object, properties: {{q: {{type: string}}}}, required: [q]}}
    returns: "a fact, with a sentence or two of detail about it"
exec:
  content: "Look up nine facts, then sum them up."
  tools: [lookup]
model:
{turns}  - text: "Nine facts, summed up: each was looked up in turn and read closely."
"""


def record(folder: Path) -> tuple[Path, Any]:
    """The session recorded once over loopback; its path and the scenario."""
    from openprogram_sim.cassettes import Cassette
    from openprogram_sim.play import arun_scenario, serve_scenario
    from openprogram_sim.scenario import parse_scenario

    scenario = parse_scenario(_scenario_text(), str(folder / "session.yaml"))
    path = folder / "session.cassette.yaml"
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-bench-" + "x" * 40)

    async def go() -> None:
        with Cassette(path, record_mode="once") as cassette:
            async with cassette.client() as client:
                url = server.adapter_url("anthropic")
                provider = cassette.provider(MODEL, base_url=url, client=client)
                outcome = await arun_scenario(scenario, provider)
                assert outcome.error is None, outcome.error
            cassette.describe(model=MODEL)

    with serve_scenario(scenario) as server:
        asyncio.run(go())
    return path, scenario


def ours(path: Path, scenario: Any, sessions: int) -> float:
    from openprogram_sim.cassettes import Cassette
    from openprogram_sim.play import arun_scenario

    async def go() -> float:
        started = time.perf_counter()
        for _ in range(sessions):
            cassette = Cassette(path).load()
            outcome = await arun_scenario(scenario, cassette.provider())
            if outcome.error is not None or cassette.problems():
                raise SystemExit(f"replay failed: {outcome.error} {cassette.problems()}")
        return time.perf_counter() - started

    return asyncio.run(go())


def plain_vcrpy(path: Path, sessions: int) -> float:
    import httpx
    import vcr

    from openprogram_sim.cassettes import SERIALIZER, Cassette

    recorded = [(r.method, r.uri, r.body) for r, _ in Cassette(path).load().vcr.data]
    assert len(recorded) == ROUNDS
    plain = vcr.VCR(record_mode="none")
    plain.register_serializer("openprogram", SERIALIZER)
    started = time.perf_counter()
    with httpx.Client() as client:
        for _ in range(sessions):
            with plain.use_cassette(str(path), serializer="openprogram") as cassette:
                for method, uri, body in recorded:
                    client.request(method, uri, content=body).read()
                if not cassette.all_played:
                    raise SystemExit("plain vcrpy left interactions unplayed")
    return time.perf_counter() - started


def plain_vcrpy_opened_once(path: Path, sessions: int) -> float:
    import httpx
    import vcr

    from openprogram_sim.cassettes import SERIALIZER, Cassette

    recorded = [(r.method, r.uri, r.body) for r, _ in Cassette(path).load().vcr.data]
    plain = vcr.VCR(record_mode="none")
    plain.register_serializer("openprogram", SERIALIZER)
    with (
        httpx.Client() as client,
        plain.use_cassette(str(path), serializer="openprogram", allow_playback_repeats=True),
    ):
        started = time.perf_counter()
        for _ in range(sessions):
            for method, uri, body in recorded:
                client.request(method, uri, content=body).read()
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="30 sessions, 2 runs")
    args = parser.parse_args()
    sessions, runs = (30, 2) if args.quick else (args.sessions, args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        path, scenario = record(Path(tmp))
        size = path.stat().st_size
        ours(path, scenario, 3)  # warm-up
        plain_vcrpy(path, 3)
        plain_vcrpy_opened_once(path, 3)
        best = {"openprogram": float("inf"), "vcrpy": float("inf"), "vcrpy_once": float("inf")}
        for _ in range(runs):  # taking turns: a busy moment falls on all
            best["openprogram"] = min(best["openprogram"], ours(path, scenario, sessions))
            best["vcrpy"] = min(best["vcrpy"], plain_vcrpy(path, sessions))
            best["vcrpy_once"] = min(best["vcrpy_once"], plain_vcrpy_opened_once(path, sessions))
    rate = {k: sessions / v for k, v in best.items()}
    rows = [
        ("openprogram: cassette -> adapter -> loop", rate["openprogram"]),
        ("plain vcrpy: cassette -> bare httpx client", rate["vcrpy"]),
        ("  (reference: its cassette opened only once)", rate["vcrpy_once"]),
    ]
    print(f"10-round sessions replayed ({sessions} per run, best of {runs}; cassette {size:,} B)")
    print(f"{'':44} {'sessions/s':>11} {'ms/session':>11}")
    for name, value in rows:
        print(f"{name:44} {value:11.1f} {1000 / value:11.2f}")
    ratio = rate["openprogram"] / rate["vcrpy"]
    print(f"openprogram / plain vcrpy: {ratio:.2f}x (goal: >= 1)")
    print(
        json.dumps(
            {
                "bench": "cassette_replay",
                "sessions_per_s": round(rate["openprogram"], 1),
                "vcrpy_sessions_per_s": round(rate["vcrpy"], 1),
                "vcrpy_opened_once_sessions_per_s": round(rate["vcrpy_once"], 1),
                "ratio": round(ratio, 2),
                "bytes": size,
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    sys.exit(main())
