"""After an abort mid-batch, the next prompt's request through a real adapter answers every
tool call (OpenAI rejects one that has no tool message): the loop gives each call that never
ran its "aborted" result, so the history keeps one result per call."""

from __future__ import annotations

import asyncio

from _support import tool
from wire_support import make_provider

from openprogram import Agent
from openprogram.agent import ABORTED_TEXT
from openprogram_sim.wire import ScriptedWire


def test_the_next_request_after_an_abort_answers_every_call() -> None:
    wire = ScriptedWire([{"tool_calls": [{"first": {}}, {"second": {}}]}, {"text": "fresh start"}])
    provider = make_provider("openai-chat", wire, stream=True)
    box: dict[str, Agent] = {}

    def first() -> str:
        box["agent"].abort()
        return "aborting"

    agent = Agent(provider, tools=[tool("first", first), tool("second", lambda: "never")])
    box["agent"] = agent

    async def main() -> tuple[str, str]:
        one = await agent.prompt("go")
        two = await agent.prompt("again")
        await provider.client.aclose()
        return one.reason, two.reason

    assert asyncio.run(main()) == ("aborted", "stop")
    body = wire.requests[1].body
    assistant = next(m for m in body["messages"] if m["role"] == "assistant")
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["first", "second"]
    tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [c["id"] for c in assistant["tool_calls"]]
    assert [m["content"] for m in tool_messages] == ["aborting", ABORTED_TEXT]
    wire.assert_consumed()
