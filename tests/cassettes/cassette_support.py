"""Helpers for the cassette tests: the five APIs' adapters, live-looking secrets, the
session every end-to-end test records, and a recorder over the wire server."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from openprogram_sim.cassettes import Cassette
from openprogram_sim.play import RunOutcome, arun_scenario
from openprogram_sim.scenario import Scenario, parse_scenario

MODELS = {
    "openai-chat": "openai:gpt-4o-mini",
    "openai-responses": "openai-responses:gpt-5-mini",
    "anthropic": "anthropic:claude-sonnet-4-5",
    "gemini": "gemini:gemini-2.5-flash",
    "bedrock": "bedrock:us.amazon.nova-micro-v1:0",
}
APIS = list(MODELS)

# Live-looking credentials: each has the shape of a real one (the scrubber must not need
# to know them), and none is real.
SECRETS = {
    "OPENAI_API_KEY": "sk-proj-" + "T3stK3yOpenAI0123456789abcdefXYZ" * 2,
    "ANTHROPIC_API_KEY": "sk-ant-api03-" + "Q1w2E3r4T5y6U7i8O9p0" * 4 + "-AAAAAA",
    "GEMINI_API_KEY": "AIzaSyA" + "bcdefGHIJKLmnopqRSTUvwxyz01234",
    "AWS_ACCESS_KEY_ID": "AKIA" + "J7QK2XW4ZP3M5N6R",
    "AWS_SECRET_ACCESS_KEY": "kP9/xR2mQ7+vL4nW8sT1" + "yB6cZ3dF5gH0jK2lM4nO",
}

SESSION = """\
scenario: the model looks the city up, then answers
system_prompt: "You are a weather assistant."
tools:
  get_weather:
    description: The current weather in a city.
    parameters:
      type: object
      properties: {city: {type: string}}
      required: [city]
    returns: ["sunny, 21°C", "rain, 12°C"]
exec:
  content: "Weather in Paris and in Brest?"
  tools: [get_weather]
model:
  - thinking: "Two cities: two lookups."
    tool_calls: [{get_weather: {city: Paris}}, {get_weather: {city: Brest}}]
    usage: {input: 31, output: 9}
  - text: "Paris: sunny, 21°C. Brest: rain, 12°C. Take an umbrella to Brest."
    usage: {input: 58, output: 17}
expect:
  result: "Paris: sunny, 21°C. Brest: rain, 12°C. Take an umbrella to Brest."
  model_calls: 2
"""


def session(text: str = SESSION, path: str = "session.yaml") -> Scenario:
    return parse_scenario(text, path)


def with_cassette(cassette: str, model: str, text: str = SESSION, **extra: str) -> str:
    """``text`` with its ``model:`` turns replaced by ``model: {cassette: ..., model: ...}``
    (and ``extra`` keys of that mapping, written as given)."""
    start, end = text.index("model:\n"), text.index("expect:")
    fields = ", ".join(
        [f"cassette: {cassette}", f"model: '{model}'"] + [f"{k}: {v}" for k, v in extra.items()]
    )
    return text[:start] + f"model: {{{fields}}}\n" + text[end:]


def set_secrets(monkeypatch: pytest.MonkeyPatch, *, bedrock_sigv4: bool = True) -> None:
    """The live-looking keys in the environment (Bedrock signs with SigV4 from them)."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("CI", raising=False)


def record(
    scenario: Scenario, api: str, server: Any, path: Path, *, mode: str = "once"
) -> RunOutcome:
    """Run ``scenario`` through ``api``'s real adapter against the wire server, recording
    the HTTP session to ``path``."""

    async def go() -> RunOutcome:
        with Cassette(path, record_mode=mode) as cassette:
            async with cassette.client() as client:
                provider = cassette.provider(
                    MODELS[api], base_url=server.adapter_url(api), client=client
                )
                outcome = await arun_scenario(scenario, provider)
            cassette.describe(model=MODELS[api])
        return outcome

    return asyncio.run(go())


def written_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def assert_no_secret_on_disk(root: Path) -> None:
    """No file under ``root`` holds any of :data:`SECRETS`, in any encoding a file might
    use for it."""
    for file in written_files(root):
        data = file.read_bytes()
        for name, value in SECRETS.items():
            for form in (value.encode(), value.replace("/", "\\/").encode()):
                assert form not in data, f"{name} is in {file}"


class SocketBlocked(AssertionError):
    pass


def block_sockets(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Make every outgoing connection fail loudly; returns the attempts made."""
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise SocketBlocked(f"a socket was opened to {address} during a replay")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts
