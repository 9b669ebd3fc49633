"""The loop's own overhead per round, side by side with pydantic-ai's agent and a bare loop.

Each run is ROUNDS model calls: ROUNDS-1 rounds that call one trivial tool, then a text
reply. The model is scripted (no network, no tokens), so what is measured is the engine:
streaming the reply through its events, validating arguments, running the tool, feeding the
result back. Reported: microseconds per round, the best of REPEATS batches (on a shared
machine the fastest batch is the one least disturbed by other work) and the median.

    python bench/loop_overhead.py            # prints a table
    python bench/loop_overhead.py --json     # machine-readable

pydantic-ai is optional (``pip install -e '.[bench]'``); without it its row is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
RUNS_PER_BATCH = 20
REPEATS = 25


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


async def _measure(run: Callable[[], Awaitable[int]]) -> tuple[float, float]:
    rounds = await run()  # warm-up, and a check that the run did what we think
    assert rounds == ROUNDS, f"expected {ROUNDS} rounds, got {rounds}"
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(RUNS_PER_BATCH):
            await run()
        samples.append((time.perf_counter() - start) / (RUNS_PER_BATCH * ROUNDS) * 1e6)
    return min(samples), statistics.median(samples)


SUBJECTS: dict[str, Callable[[], Callable[[], Awaitable[int]] | None]] = {
    "bare hand-written loop": _bare,
    "openprogram Agent.prompt (minimal provider)": _openprogram_minimal,
    "openprogram Agent.prompt (ScriptedModel)": _openprogram_agent,
    "openprogram Runtime.aexec (ScriptedModel)": lambda: _openprogram(listen=False),
    "openprogram Runtime.aexec (ScriptedModel, trace recorder)": lambda: _openprogram(listen=True),
    "pydantic-ai Agent.run (FunctionModel)": _pydantic_ai,
}


async def main_async() -> dict[str, tuple[float, float]]:
    results = {}
    for name, make in SUBJECTS.items():
        run = make()
        if run is not None:
            results[name] = await _measure(run)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(main_async())
    if args.json:
        data = {k: {"best_us": b, "median_us": m} for k, (b, m) in results.items()}
        print(json.dumps({"us_per_round": data, "python": sys.version.split()[0]}))
        return
    print(f"loop overhead per round, {ROUNDS} rounds/run, Python {platform.python_version()}")
    bare = results["bare hand-written loop"][0]
    peer = results.get("pydantic-ai Agent.run (FunctionModel)", (0.0, 0.0))[0]
    print(f"  {'':58s} {'best':>9s} {'median':>9s}  {'x bare':>7s}  {'peer/x':>7s}")
    for name, (best, median) in results.items():
        ratio = f"{peer / best:7.0f}" if peer else "      -"
        print(f"  {name:58s} {best:7.1f}us {median:7.1f}us  {best / bare:7.1f}  {ratio}")
    print("  (x bare: times the bare loop; peer/x: how many times faster than pydantic-ai)")


if __name__ == "__main__":
    main()
