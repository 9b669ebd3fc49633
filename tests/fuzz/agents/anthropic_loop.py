"""A small agent on the plain ``anthropic`` SDK (Messages, streamed) whose retry loop catches
only the API's answers (an HTTP error status, an in-stream error event): a stream cut mid-body,
which the SDK raises as the HTTP library's ``RemoteProtocolError`` (before anthropic 2.17) or
as its own ``APIConnectionError`` wrapping it (from 2.17), escapes (``anthropic_loop:agent``).
``anthropic_loop:fixed`` retries that too."""

from __future__ import annotations

import time
from typing import Any

import anthropic

TOOLS = [
    {
        "name": "search",
        "description": "Search the web.",
        "input_schema": {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
        },
    }
]


def _reply(client: anthropic.Anthropic, messages: list[Any], transport_errors: bool) -> Any:
    retried: tuple[type[BaseException], ...] = (anthropic.APIStatusError,)
    if transport_errors:
        retried = (Exception,)  # whatever the SDK or its HTTP library raises when a body is cut
    for attempt in range(5):
        try:
            with client.messages.stream(
                model="claude-sonnet-4-5", max_tokens=256, messages=messages, tools=TOOLS
            ) as stream:
                return stream.get_final_message()
        except anthropic.RateLimitError as exc:
            time.sleep(float(exc.response.headers.get("retry-after", "0")))
        except retried:
            if attempt == 4:
                raise
            time.sleep(0.01)
    raise RuntimeError("no reply after 5 attempts")


def run(endpoints: Any, transport_errors: bool) -> str:
    with anthropic.Anthropic(
        base_url=endpoints.anthropic, api_key=endpoints.api_key, max_retries=0
    ) as client:
        return _loop(client, transport_errors)


def _loop(client: anthropic.Anthropic, transport_errors: bool) -> str:
    messages: list[Any] = [{"role": "user", "content": "Find the tides."}]
    for _ in range(12):
        reply = _reply(client, messages, transport_errors)
        calls = [b for b in reply.content if b.type == "tool_use"]
        if not calls:
            return "".join(b.text for b in reply.content if b.type == "text")
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in reply.content],
            }
        )
        results = [
            {
                "type": "tool_result",
                "tool_use_id": c.id,
                "content": "3 results" if c.name == "search" else f"no tool named {c.name}",
                "is_error": c.name != "search",
            }
            for c in calls
        ]
        messages.append({"role": "user", "content": results})
    raise RuntimeError("no answer after 12 rounds")


def agent(endpoints: Any) -> str:
    return run(endpoints, transport_errors=False)


def fixed(endpoints: Any) -> str:
    return run(endpoints, transport_errors=True)
