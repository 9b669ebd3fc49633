"""The README's worked example: another framework's agent (pydantic-ai's ``Agent`` with
its OpenAI model) against the wire server, its requests checked by the scenario's
``expect.requests``; the same file also passes on openprogram's own loop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx2
import pytest

from openprogram_sim.cli import main

# `pydantic_ai` is the fixture (tests/conftest.py) that imports it when a test asks for it.

SCENARIO = Path(__file__).parent / "data" / "weather_agent.yaml"


async def ask_weather_agent(
    pydantic_ai: ModuleType, base_url: str, instructions: str, weather: str
) -> str:
    """A pydantic-ai agent with one tool, its OpenAI model pointed at ``base_url``."""
    async with httpx2.AsyncClient() as http:
        provider = pydantic_ai.providers.openai.OpenAIProvider(
            base_url=base_url, api_key="test", http_client=http
        )
        model = pydantic_ai.models.openai.OpenAIChatModel("gpt-4o-mini", provider=provider)
        agent = pydantic_ai.Agent(model, instructions=instructions)

        @agent.tool_plain
        def get_weather(city: str) -> str:
            """The current weather in a city."""
            return weather

        result = await agent.run("What's the weather in Paris?")
        return result.output


def test_a_pydantic_ai_agent_against_the_scenario(
    pydantic_ai: ModuleType, openprogram_serve: Any
) -> None:
    server = openprogram_serve(SCENARIO)
    url = server.base_url("openai")

    ask = ask_weather_agent(pydantic_ai, url, "You are a weather assistant.", "sunny, 21°C")
    output = asyncio.run(ask)

    assert output == "It is sunny in Paris, 21°C."
    server.assert_consumed()  # every scripted turn was asked for
    report = server.check()  # expect.requests against what pydantic-ai sent
    assert report.passed, report.render()


def test_a_wrong_request_fails_the_check(pydantic_ai: ModuleType, openprogram_serve: Any) -> None:
    server = openprogram_serve(SCENARIO)
    url = server.base_url("openai")
    asyncio.run(ask_weather_agent(pydantic_ai, url, "You are a travel assistant.", "rainy"))
    report = server.check()
    titles = [f.title for f in report.failures]
    assert titles == [
        "request 1 (depth 0, round 1) differs",
        "request 2 (depth 0, round 2) differs",
    ]
    assert "system_prompt" in report.render() and "rainy" in report.render()


def test_the_same_scenario_passes_on_openprograms_loop(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(SCENARIO)]) == 0, capsys.readouterr().out
