"""The loop's own overhead per round, side by side with pydantic-ai's agent and a bare loop.

Each run is ROUNDS model calls: ROUNDS-1 rounds that call one trivial tool, then a text
reply. The model is scripted (no network, no tokens), so what is measured is the engine:
streaming the reply through its events, validating arguments, running the tool, feeding the
result back. Reported: microseconds per round, the best of REPEATS batches (on a shared
machine the fastest batch is the one least disturbed by other work) and the median, and
each subject's ratio to the bare loop. The subjects' batches are interleaved (repeat r of
every subject, then repeat r+1), so load on a shared machine lands on all of them alike
(pydantic-ai, a thousand times slower, runs its repeats after them).

    python bench/loop_overhead.py            # prints a table
    python bench/loop_overhead.py --json     # machine-readable

pydantic-ai is optional (``pip install -e '.[bench]'``); without it its row is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from openprogram import Agent, Runtime, ToolRegistry
from openprogram.providers import Context, MessageBuilder, StreamOptions
from openprogram_sim.models import ScriptedModel, Turn
from openprogram_sim.trace import TraceRecorder

ROUNDS = 10
RUNS_PER_BATCH = 10
REPEATS = 40


def add(a: int, b: int) -> int:
    return a + b


ADD = {
    "spec": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
    "execute": add,
}

# Built once: the benchmark measures running the loop, not parsing the script.
TURNS = [Turn.coerce({"tool_calls": [{"add": {"a": i, "b": 1}}]}) for i in range(ROUNDS - 1)]
TURNS.append(Turn.coerce({"text": "The answer is 10."}))


def _openprogram(listen: bool) -> Callable[[], Awaitable[int]]:
    async def run() -> int:
        model = ScriptedModel(TURNS)
        runtime = Runtime(provider=model, registry=ToolRegistry())
        if listen:
            runtime.subscribe(TraceRecorder())
        await runtime.aexec("Count to ten.", tools=[ADD])
        return model.calls

    return run


class ReplayProvider:
    """The cheapest model the Provider protocol allows: each call yields a prebuilt start
    and done event, so what is left to measure is the engine itself (the bare loop's model
    is just as cheap)."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, Any]] = []
        for turn in TURNS:
            b = MessageBuilder(api="replay", model="replay")
            start = b.start()
            if turn.text:
                b.text_start()
                b.text_delta(turn.text)
                b.text_end()
            for call in turn.tool_calls:
                b.toolcall_start(f"call_{len(self.events)}", call.name)
                b.toolcall_delta(call.json_text)
                b.toolcall_end()
            self.events.append((start, b.done()))
        self.calls = 0

    async def stream(self, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
        start, done = self.events[self.calls % ROUNDS]
        self.calls += 1
        yield start
        yield done


def _openprogram_minimal() -> Callable[[], Awaitable[int]]:
    provider = ReplayProvider()

    async def run() -> int:
        provider.calls = 0
        agent = Agent(provider, tools=[ADD])
        await agent.prompt("Count to ten.")
        return provider.calls

    return run


def _openprogram_agent() -> Callable[[], Awaitable[int]]:
    async def run() -> int:
        model = ScriptedModel(TURNS)
        agent = Agent(model, tools=[ADD])
        await agent.prompt("Count to ten.")
        return model.calls

    return run


def _bare() -> Callable[[], Awaitable[int]]:
    """A hand-written loop: the least any engine can do."""
    tools = {"add": add}

    async def model(history: list[dict[str, Any]], n: int) -> dict[str, Any]:
        if n < ROUNDS - 1:
            return {"role": "assistant", "tool_calls": [{"name": "add", "args": {"a": n, "b": 1}}]}
        return {"role": "assistant", "text": "The answer is 10.", "tool_calls": []}

    async def run() -> int:
        history: list[dict[str, Any]] = [{"role": "user", "text": "Count to ten."}]
        calls = 0
        while True:
            message = await model(history, calls)
            calls += 1
            history.append(message)
            if not message["tool_calls"]:
                return calls
            for call in message["tool_calls"]:
                history.append({"role": "tool", "text": str(tools[call["name"]](**call["args"]))})

    return run


def _pydantic_ai() -> Callable[[], Awaitable[int]] | None:
    try:
        from pydantic_ai import Agent as PAgent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel
    except ImportError:
        return None

    def respond(messages: list[Any], info: AgentInfo) -> ModelResponse:
        n = sum(1 for m in messages if isinstance(m, ModelResponse))
        if n < ROUNDS - 1:
            return ModelResponse(parts=[ToolCallPart("add", {"a": n, "b": 1})])
        return ModelResponse(parts=[TextPart("The answer is 10.")])

    agent = PAgent(FunctionModel(respond))
    agent.tool_plain(add)

    async def run() -> int:
        result = await agent.run("Count to ten.")
        return sum(1 for m in result.all_messages() if isinstance(m, ModelResponse))

    return run


async def _batch(run: Callable[[], Awaitable[int]]) -> float:
    """Microseconds per round over one batch of RUNS_PER_BATCH runs."""
    start = time.perf_counter()
    for _ in range(RUNS_PER_BATCH):
        await run()
    return (time.perf_counter() - start) / (RUNS_PER_BATCH * ROUNDS) * 1e6


SUBJECTS: dict[str, Callable[[], Callable[[], Awaitable[int]] | None]] = {
    "bare hand-written loop": _bare,
    "openprogram Agent.prompt (minimal provider)": _openprogram_minimal,
    "openprogram Agent.prompt (ScriptedModel)": _openprogram_agent,
    "openprogram Runtime.aexec (ScriptedModel)": lambda: _openprogram(listen=False),
    "openprogram Runtime.aexec (ScriptedModel, trace recorder)": lambda: _openprogram(listen=True),
    "pydantic-ai Agent.run (FunctionModel)": _pydantic_ai,
}

FLOOR = "bare hand-written loop"
PEERS = ("pydantic-ai Agent.run (FunctionModel)",)


async def measure() -> dict[str, list[float]]:
    """Every subject's batches, interleaved: repeat r of each subject runs right after
    repeat r of the one before it, so a burst of load on the shared machine hits them all
    alike and the ratios of one repeat compare like with like (the peer, pydantic-ai, runs
    its repeats after them)."""
    runs = {}
    for name, make in SUBJECTS.items():
        run = make()
        if run is not None:
            rounds = await run()  # warm-up, and a check that the run did what we think
            assert rounds == ROUNDS, f"{name}: expected {ROUNDS} rounds, got {rounds}"
            runs[name] = run
    samples: dict[str, list[float]] = {name: [] for name in runs}
    peers = {name: runs.pop(name) for name in PEERS if name in runs}
    for _ in range(REPEATS):
        for name, run in runs.items():
            samples[name].append(await _batch(run))
    # The peer runs on its own afterwards: a batch of it takes a thousand times one of the
    # bare loop, and the caches it leaves cold would land on whichever subject came next.
    for name, run in peers.items():
        for _ in range(REPEATS):
            samples[name].append(await _batch(run))
    return samples


def summarize(samples: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Per subject: the best and the median batch (us per round), and its ratio to the
    floor: best over best, and the median of the per-repeat ratios."""
    floor = samples[FLOOR]
    out = {}
    for name, values in samples.items():
        out[name] = {
            "best_us": min(values),
            "median_us": statistics.median(values),
            "x_floor_best": min(values) / min(floor),
            "x_floor_median": statistics.median(v / f for v, f in zip(values, floor, strict=True)),
        }
    return out


async def main_async() -> dict[str, tuple[float, float]]:
    """(best, median) us per round per subject (see :func:`measure`)."""
    stats = summarize(await measure())
    return {k: (v["best_us"], v["median_us"]) for k, v in stats.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    stats = summarize(asyncio.run(measure()))
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"us_per_round": stats, "load_average": load,
                          "python": sys.version.split()[0]}))  # fmt: skip
        return
    print(f"loop overhead per round, {ROUNDS} rounds/run, Python {platform.python_version()}, "
          f"load average {load:.2f}")  # fmt: skip
    peer = stats.get("pydantic-ai Agent.run (FunctionModel)", {}).get("best_us", 0.0)
    print(f"  {'':58s} {'best':>9s} {'median':>9s}  {'x floor':>15s}  {'peer/x':>7s}")
    for name, row in stats.items():
        best, median = row["best_us"], row["median_us"]
        ratio = f"{peer / best:7.0f}" if peer else "      -"
        x = f"{row['x_floor_best']:6.1f} / {row['x_floor_median']:6.1f}"
        print(f"  {name:58s} {best:7.1f}us {median:7.1f}us  {x:>15s}  {ratio}")
    print("  (x floor: times the bare loop, best over best / median of the per-repeat ratios;")
    print("   peer/x: how many times faster than pydantic-ai)")


if __name__ == "__main__":
    main()
