"""Helpers for the wire tests: real adapters over a ScriptedWire, and scenario runs with any
provider (the scenario runner's own setup, with the provider swapped)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from openprogram import Runtime, ToolRegistry
from openprogram.providers.base import Context, Provider, StreamOptions
from openprogram.types import AssistantMessage, UserMessage
from openprogram_sim.runner import _Build, _steering_listener
from openprogram_sim.scenario import Scenario
from openprogram_sim.trace import TraceRecorder
from openprogram_sim.wire import APIS, ScriptedWire

MODES = [(api, stream) for api in APIS for stream in (True, False)]
MODE_IDS = [f"{api}-{'stream' if stream else 'json'}" for api, stream in MODES]


def make_provider(api: str, wire: ScriptedWire, *, stream: bool) -> Any:
    """The real adapter for ``api``, talking to ``wire`` through an httpx MockTransport.
    The caller closes ``provider.client``."""
    client = wire.client()
    if api == "openai-chat":
        from openprogram.providers.openai_chat import OpenAIChatProvider

        return OpenAIChatProvider("gpt-4o-mini", api_key="test", client=client, stream=stream)
    if api == "openai-responses":
        from openprogram.providers.openai_responses import OpenAIResponsesProvider

        return OpenAIResponsesProvider("gpt-5-mini", api_key="test", client=client, stream=stream)
    if api == "anthropic":
        from openprogram.providers.anthropic import AnthropicProvider

        return AnthropicProvider("claude-sonnet-4-5", api_key="test", client=client, stream=stream)
    if api == "gemini":
        from openprogram.providers.gemini import GeminiProvider

        return GeminiProvider("gemini-2.5-flash", api_key="test", client=client, stream=stream)
    from openprogram.providers.bedrock import BedrockProvider

    return BedrockProvider(
        "us.amazon.nova-micro-v1:0",
        bearer_token="test",
        region="us-east-1",
        client=client,
        stream=stream,
    )


async def one_call(provider: Any, options: StreamOptions | None = None) -> AssistantMessage:
    """Stream one reply from ``provider`` and return the final message."""
    context = Context("", [UserMessage.of("hi")], [])
    final: AssistantMessage | None = None
    try:
        async for event in provider.stream(context, options or StreamOptions()):
            if event.type == "done":
                final = event.message
            elif event.type == "error":
                final = event.error
    finally:
        await provider.client.aclose()
    assert final is not None, "the provider ended without a done or error event"
    return final


@dataclass(slots=True)
class Run:
    trace: list[dict[str, Any]]
    result: Any
    error: BaseException | None
    seconds: float


async def run_scenario_with(scenario: Scenario, provider: Provider) -> Run:
    """Run ``scenario`` exactly as :func:`openprogram_sim.runner.arun_scenario` does (fresh
    registry with its tools, steering listeners, follow-ups), with ``provider`` as the
    model."""
    box: dict[str, Runtime] = {}
    build = _Build(scenario, box)
    registry = ToolRegistry(build.entries.values())
    for set_name, members in scenario.toolsets.items():
        registry.define_toolset(set_name, members)
    runtime = Runtime(provider=provider, registry=registry, system_prompt=scenario.system_prompt)
    box["runtime"] = runtime
    recorder = TraceRecorder()
    runtime.subscribe(recorder)
    if scenario.steering:
        runtime.subscribe(_steering_listener(scenario, runtime))
    for follow in scenario.follow_ups:
        runtime.follow_up(follow.text)
    start = time.perf_counter()
    result: Any = None
    error: BaseException | None = None
    try:
        result = await runtime.aexec(scenario.exec.content, **build.exec_kwargs(scenario.exec))
    except Exception as exc:
        error = exc
    return Run(recorder.trace, result, error, time.perf_counter() - start)
