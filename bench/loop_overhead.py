"""The loop's own overhead per round, side by side with pydantic-ai's agent and a bare loop.

Each run is ROUNDS model calls: ROUNDS-1 rounds that call one trivial tool, then a text
reply. The model is scripted (no network, no tokens), so what is measured is the engine:
streaming the reply through its events, validating arguments, running the tool, feeding the
result back. Reported: microseconds per round (median of REPEATS batches).

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
from collections.abc import Awaitable, Callable
from typing import Any

from openprogram import Agent, Runtime, ToolRegistry
from openprogram_sim.scripted import ScriptedModel, Turn
from openprogram_sim.trace import TraceRecorder

ROUNDS = 10
RUNS_PER_BATCH = 50
REPEATS = 7


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


async def _measure(run: Callable[[], Awaitable[int]]) -> float:
    rounds = await run()  # warm-up, and a check that the run did what we think
    assert rounds == ROUNDS, f"expected {ROUNDS} rounds, got {rounds}"
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(RUNS_PER_BATCH):
            await run()
        samples.append((time.perf_counter() - start) / (RUNS_PER_BATCH * ROUNDS))
    return statistics.median(samples) * 1e6


async def main_async() -> dict[str, float]:
    subjects: dict[str, Callable[[], Awaitable[int]] | None] = {
        "bare hand-written loop": _bare(),
        "openprogram Runtime.aexec (no listeners)": _openprogram(listen=False),
        "openprogram Runtime.aexec (trace recorder)": _openprogram(listen=True),
        "openprogram Agent.prompt": _openprogram_agent(),
        "pydantic-ai Agent.run (FunctionModel)": _pydantic_ai(),
    }
    return {name: await _measure(run) for name, run in subjects.items() if run is not None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(main_async())
    if args.json:
        print(json.dumps({"us_per_round": results, "python": sys.version.split()[0]}))
        return
    print(f"loop overhead per round, {ROUNDS} rounds/run, Python {platform.python_version()}")
    bare = results["bare hand-written loop"]
    for name, us in results.items():
        print(f"  {name:45s} {us:10.1f} us/round   {us / bare:7.1f}x bare")


if __name__ == "__main__":
    main()
