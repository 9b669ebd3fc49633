"""Helpers for the wire tests: the real adapters over a ScriptedWire. Scenario runs with an
adapter as the model go through the runner's own seam, ``run_scenario(scenario, provider)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openprogram.providers import Context, StreamOptions
from openprogram.types import AssistantMessage, UserMessage
from openprogram_sim.wire import APIS, ScriptedWire

MODES = [(api, stream) for api in APIS for stream in (True, False)]
MODE_IDS = [f"{api}-{'stream' if stream else 'json'}" for api, stream in MODES]


def make_provider(api: str, wire: ScriptedWire, *, stream: bool) -> Any:
    """The real adapter for ``api``, talking to ``wire`` through an httpx2 MockTransport.
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


def search_tool(execute: Callable[[str], str]) -> dict[str, Any]:
    """A ``search(q)`` tool entry (``"Search."``) that runs ``execute``."""
    return {
        "spec": {
            "name": "search",
            "description": "Search.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
        "execute": execute,
    }
