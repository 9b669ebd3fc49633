"""Per-round cost against history length: ``Runtime.aexec`` with the scripted model, its
exec continuing a history of 10 and of 5,000 messages.

Each exec is ROUNDS model calls (ROUNDS-1 rounds that call one trivial tool, then a text
reply), given ``history=`` a conversation of HISTORY messages (a user turn, then tool
rounds: a reply with one call and its result). Two figures per length:

- **per round**: the time from one model call to the next (the model records
  ``time.perf_counter()`` as each call asks for its turn), the median over the rounds of
  an exec: everything the loop and the model do per round, the history's cost included
  wherever it is paid per round (a copy of the messages on each call, say);
- **per exec**: the whole ``aexec`` call divided by its rounds: the per-round figure plus
  what each exec pays once (checking the history, copying it into the run's agent).

The lengths run interleaved (an exec at 10, then one at 5,000, and again), and the ratio
is taken per pair, so load on a shared machine lands on both alike. Reported: the best
and the median of REPEATS, and the ratio 5,000 / 10 (best over best, median of the
per-pair ratios).

    python bench/history_cost.py            # prints a table
    python bench/history_cost.py --json     # machine-readable
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
from collections.abc import Awaitable
from typing import Any

from openprogram import Runtime, ToolRegistry
from openprogram.types import (
    AnyMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from openprogram_sim.models import ScriptedModel, ScriptedRequest, Turn

ROUNDS = 10
REPEATS = 30
LENGTHS = (10, 5000)


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

TURNS = [Turn.coerce({"tool_calls": [{"add": {"a": i, "b": 1}}]}) for i in range(ROUNDS - 1)]
TURNS.append(Turn.coerce({"text": "The answer is 10."}))


def conversation(length: int) -> list[AnyMessage]:
    """``length`` messages: a user turn, then tool rounds (a call and its result), ending
    on a finished text reply, as a previous exec leaves them."""
    messages: list[AnyMessage] = [UserMessage.of("Start counting.")]
    n = 0
    while len(messages) < length - 1:
        call = ToolCall(f"h{n}", "add", {"a": n, "b": 1})
        messages.append(AssistantMessage([call], stop_reason="toolUse"))
        messages.append(ToolResultMessage(call.id, "add", [TextContent(str(n + 1))]))
        n += 1
    messages.append(AssistantMessage([TextContent(f"Counted to {n}.")]))
    assert len(messages) == length, (len(messages), length)
    return messages


class TimedModel(ScriptedModel):
    """The scripted model, noting when each call asks for its turn."""

    def __init__(self) -> None:
        super().__init__(TURNS, seed=0)
        self.stamps: list[float] = []

    def _next_turn(self, request: ScriptedRequest) -> Turn | Awaitable[Turn]:
        self.stamps.append(time.perf_counter())
        return super()._next_turn(request)


async def one_exec(history: list[AnyMessage]) -> tuple[float, float]:
    """(us per round between model calls: the median, us per round of the whole exec)."""
    model = TimedModel()
    runtime = Runtime(provider=model, registry=ToolRegistry())
    start = time.perf_counter()
    await runtime.aexec("Count to ten more.", tools=[ADD], history=history)
    total = time.perf_counter() - start
    assert model.calls == ROUNDS, model.calls
    assert len(model.requests[-1].messages) == len(history) + 2 * ROUNDS - 1
    gaps = [b - a for a, b in zip(model.stamps, model.stamps[1:], strict=False)]
    return statistics.median(gaps) * 1e6, total / ROUNDS * 1e6


async def measure(repeats: int = REPEATS) -> dict[int, dict[str, list[float]]]:
    histories = {n: conversation(n) for n in LENGTHS}
    for history in histories.values():  # warm-up
        for _ in range(3):
            await one_exec(history)
    out: dict[int, dict[str, list[float]]] = {n: {"round": [], "exec": []} for n in LENGTHS}
    for _ in range(repeats):
        for n, history in histories.items():
            per_round, per_exec = await one_exec(history)
            out[n]["round"].append(per_round)
            out[n]["exec"].append(per_exec)
    return out


def summarize(samples: dict[int, dict[str, list[float]]]) -> dict[str, Any]:
    short, long = LENGTHS
    rows: dict[str, Any] = {}
    for kind in ("round", "exec"):
        a, b = samples[short][kind], samples[long][kind]
        rows[kind] = {
            f"best_us_{short}": min(a),
            f"best_us_{long}": min(b),
            f"median_us_{short}": statistics.median(a),
            f"median_us_{long}": statistics.median(b),
            "ratio_best": min(b) / min(a),
            "ratio_median": statistics.median(y / x for x, y in zip(a, b, strict=True)),
        }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args()
    rows = summarize(asyncio.run(measure(args.repeats)))
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({**rows, "load_average": load, "python": sys.version.split()[0]}))
        return
    short, long = LENGTHS
    print(f"Runtime.aexec per round against history length, {ROUNDS} rounds/exec, "
          f"Python {platform.python_version()}, load average {load:.2f}")  # fmt: skip
    print(f"  {'':10s} {'at ' + str(short):>17s} {'at ' + str(long):>17s}  {'ratio':>13s}")
    print(f"  {'':10s} {'best / median':>17s} {'best / median':>17s}  {'best / median':>13s}")
    for kind, row in rows.items():
        print(
            f"  per {kind:6s} {row[f'best_us_{short}']:7.1f} / {row[f'median_us_{short}']:7.1f}"
            f" {row[f'best_us_{long}']:7.1f} / {row[f'median_us_{long}']:7.1f}"
            f"  {row['ratio_best']:5.2f} / {row['ratio_median']:5.2f}"
        )


if __name__ == "__main__":
    main()
