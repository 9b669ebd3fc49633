"""A small agent on the plain ``openai`` SDK (Chat Completions, streamed), with two planted
bugs for ``openprogram-sim fuzz --agent`` to find:

(a) ``results``: in a round with exactly two tool calls it sends back only the first result;
(b) ``retry_after``: on HTTP 429 it retries at once, ignoring ``retry-after``.

Each is fixed when its name is in ``OPENAI_LOOP_FIX`` (comma-separated, e.g.
``OPENAI_LOOP_FIX=results,retry_after``) or given as ``--fix NAME`` on the command line.

As a command: ``python tests/fuzz/agents/openai_loop.py [--fix NAME ...]`` (it reads
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``); in process: ``openai_loop:agent`` (called with
the fuzzer's endpoints), ``openai_loop:fixed`` (both bugs fixed), ``fixed_results`` and
``fixed_retry_after`` (one of them fixed), ``strict`` (both fixed, but a call to a tool it
lacks raises) and ``slow_on_tools`` (both fixed, 2 s per round of calls).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Collection
from typing import Any

import httpx
import openai

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web.",
            "parameters": {
                "type": "object",
                "properties": {"q": {"type": "string"}},
                "required": ["q"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    },
]
FIXES = ("results", "retry_after")

MAX_ROUNDS = 12
MAX_RETRIES = 4


def _execute(name: str, raw: str, strict: bool = False) -> str:
    """Run one tool call; a problem is an error text the model sees (``strict``: a tool
    that does not exist raises)."""
    if strict and name not in ("search", "add"):
        raise KeyError(f"no tool named {name!r}")
    try:
        args = json.loads(raw or "{}")
    except ValueError:
        return f"error: the arguments are not JSON: {raw!r}"
    if not isinstance(args, dict):
        return "error: the arguments are not an object"
    if name == "search":
        if not isinstance(args.get("q"), str):
            return "error: search needs q (a string)"
        return f"3 results for {args['q']!r}"
    if name == "add":
        a, b = args.get("a"), args.get("b")
        if not (isinstance(a, int) and isinstance(b, int)):
            return "error: add needs a and b (integers)"
        return str(a + b)
    return f"error: no tool named {name!r}"


def _wait(error: openai.APIStatusError) -> float:
    """Seconds the answer asked for (``retry-after-ms``, else ``retry-after``)."""
    headers = error.response.headers
    if "retry-after-ms" in headers:
        return float(headers["retry-after-ms"]) / 1000
    try:
        return float(headers.get("retry-after", "0"))
    except ValueError:
        return 0.0


def _reply(client: openai.OpenAI, messages: list[Any]) -> tuple[str, list[dict[str, str]]]:
    """One streamed reply: its text and its tool calls, assembled from the deltas."""
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=messages, tools=TOOLS, stream=True
    )
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            text.append(delta.content)
        for piece in delta.tool_calls or []:
            call = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += piece.id or ""
            if piece.function is not None:
                call["name"] += piece.function.name or ""
                call["arguments"] += piece.function.arguments or ""
    return "".join(text), [calls[i] for i in sorted(calls)]


def _reply_with_retries(
    client: openai.OpenAI, messages: list[Any], fixes: Collection[str]
) -> tuple[str, list[dict[str, str]]]:
    for attempt in range(MAX_RETRIES + 1):
        try:
            return _reply(client, messages)
        except openai.RateLimitError as exc:
            if attempt == MAX_RETRIES:
                raise
            if "retry_after" in fixes:
                time.sleep(_wait(exc))
            # planted bug (b): without the fix, retried at once
        except (openai.APIError, httpx.HTTPError):
            if attempt == MAX_RETRIES:
                raise
            time.sleep(0.01)
    raise AssertionError("unreachable")


def run(
    base_url: str,
    api_key: str,
    fixes: Collection[str] = (),
    *,
    pause: float = 0.0,
    strict: bool = False,
) -> str:
    """Ask the model, run the tools it picks, until it answers with text."""
    # plain HTTP to a loopback server: no certificates to load (loading them costs more
    # than the run); closed when the run ends
    with httpx.Client(timeout=10, verify=False) as http:
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0,
                               http_client=http)  # fmt: skip
        return _loop(client, fixes, pause, strict)


def _loop(client: openai.OpenAI, fixes: Collection[str], pause: float, strict: bool) -> str:
    messages: list[Any] = [{"role": "user", "content": "Find the tides, then add 2 and 3."}]
    for _ in range(MAX_ROUNDS):
        text, calls = _reply_with_retries(client, messages, fixes)
        if not calls:
            return text
        messages.append(
            {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]},
                    }
                    for c in calls
                ],
            }
        )
        time.sleep(pause)
        answered = calls
        if len(calls) == 2 and "results" not in fixes:
            answered = calls[:1]  # planted bug (a): the second result is dropped
        for call in answered:
            result = _execute(call["name"], call["arguments"], strict)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    raise RuntimeError(f"no answer after {MAX_ROUNDS} rounds")


def _env_fixes() -> set[str]:
    return {f.strip() for f in os.environ.get("OPENAI_LOOP_FIX", "").split(",") if f.strip()}


def agent(endpoints: Any) -> str:
    """The in-process form (``openai_loop:agent``): the fixes from ``OPENAI_LOOP_FIX``."""
    return run(endpoints.openai, endpoints.api_key, _env_fixes())


def fixed(endpoints: Any) -> str:
    """Both bugs fixed (``openai_loop:fixed``)."""
    return run(endpoints.openai, endpoints.api_key, FIXES)


def fixed_results(endpoints: Any) -> str:
    """Bug (a) fixed, bug (b) left (``openai_loop:fixed_results``)."""
    return run(endpoints.openai, endpoints.api_key, ("results",))


def fixed_retry_after(endpoints: Any) -> str:
    """Bug (b) fixed, bug (a) left (``openai_loop:fixed_retry_after``)."""
    return run(endpoints.openai, endpoints.api_key, ("retry_after",))


def strict(endpoints: Any) -> str:
    """Both bugs fixed, and a third (``openai_loop:strict``): a call to a tool it does not
    have raises instead of becoming an error result."""
    return run(endpoints.openai, endpoints.api_key, FIXES, strict=True)


def slow_on_tools(endpoints: Any) -> str:
    """Both bugs fixed, but a round of tool calls takes 2 s (``openai_loop:slow_on_tools``,
    for a campaign's ``--timeout``)."""
    return run(endpoints.openai, endpoints.api_key, FIXES, pause=2.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fix", action="append", default=[], choices=FIXES)
    args = parser.parse_args(argv)
    base_url = os.environ["OPENAI_BASE_URL"]
    print(run(base_url, os.environ["OPENAI_API_KEY"], _env_fixes() | set(args.fix)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
