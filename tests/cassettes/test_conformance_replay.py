"""The real recorded traffic of tests/conformance, written as cassettes and replayed through
openprogram's adapters: each reply must come out as the provider's official SDK parsed it
(``expected`` in each file). Streamed bodies are cut into one network chunk per event, so
the replay serves them piece by piece as the service did."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from openprogram.providers import Context, StreamOptions, get_provider
from openprogram.types import TextContent, ThinkingContent, UserMessage
from openprogram_sim.cassettes import SERIALIZER, Cassette, Persister
from openprogram_sim.cassettes._format import EXTRA, body_kind, split_events

CONFORMANCE = Path(__file__).resolve().parent.parent / "conformance"
FILES = sorted(
    entry["file"]
    for entry in json.loads((CONFORMANCE / "index.json").read_text(encoding="utf-8"))["entries"]
)
_PREFIX = {"openai-chat": "openai", "openai-responses": "openai-responses"}


def _cassette(case: dict[str, Any], path: Path) -> None:
    from vcr.request import Request

    response = case["response"]
    body = (
        base64.b64decode(response["body_base64"])
        if "body_base64" in response
        else str(response["body"]).encode()
    )
    headers = {"content-type": [response["content_type"]]}
    kind = body_kind(headers)
    ends = split_events(kind, body) if kind in ("sse", "eventstream") else [len(body)]
    chunks = [[start, 0.001] for start in [0, *ends[:-1]]]
    request = case["request"]
    Persister().save_cassette(
        path,
        {
            "requests": [
                Request(
                    "POST",
                    request["url"],
                    json.dumps(request["body"]).encode(),
                    {"content-type": "application/json"},
                )
            ],
            "responses": [
                {
                    "status": {"code": response["status"], "message": ""},
                    "headers": headers,
                    "body": {"string": body},
                    EXTRA: {"chunks": chunks},
                }
            ],
        },
        SERIALIZER,
    )


def _model(case: dict[str, Any]) -> tuple[str, str]:
    """``provider:model`` and the base URL the recorded request names."""
    api = case["provider"]
    parts = urlsplit(case["request"]["url"])
    path = unquote(parts.path)
    if api == "gemini":
        base, _, rest = path.partition("/models/")
        model = rest.partition(":")[0]
    elif api == "bedrock":
        base, _, rest = path.partition("/model/")
        model = rest.rpartition("/")[0]
    else:
        suffix = {"anthropic": "/messages", "openai-chat": "/chat/completions"}
        base = path.rpartition(suffix.get(api, "/responses"))[0]
        model = str(case["request"]["body"].get("model", "m"))
    return f"{_PREFIX.get(api, api)}:{model}", f"{parts.scheme}://{parts.netloc}{base}"


async def _reply(provider: Any) -> Any:
    context = Context(system_prompt="", messages=[UserMessage.of("hi")], tools=[])
    message = None
    async for event in provider.stream(context, StreamOptions()):
        if event.type == "done":
            message = event.message
        elif event.type == "error":
            message = event.error
    return message


def _summary(message: Any, *, with_ids: bool) -> dict[str, Any]:
    return {
        "text_blocks": [b.text for b in message.content if isinstance(b, TextContent) and b.text],
        "thinking_blocks": [
            b.thinking for b in message.content if isinstance(b, ThinkingContent) and b.thinking
        ],
        "tool_calls": [
            {"name": c.name, "arguments": c.arguments, **({"id": c.id} if with_ids else {})}
            for c in message.tool_calls
        ],
        "stop_reason": message.stop_reason,
    }


def _expected(expected: dict[str, Any], *, with_ids: bool) -> dict[str, Any]:
    return {
        "text_blocks": expected["text_blocks"],
        "thinking_blocks": expected["thinking_blocks"],
        "tool_calls": [
            {
                "name": c["name"],
                "arguments": c["arguments"],
                **({"id": c["id"]} if with_ids else {}),
            }
            for c in expected["tool_calls"]
        ],
        "stop_reason": expected["stop_reason"],
    }


@pytest.mark.parametrize("file", FILES)
def test_recorded_traffic_replays_through_the_adapter(file: str, tmp_path: Path) -> None:
    case = json.loads((CONFORMANCE / file).read_text(encoding="utf-8"))
    path = tmp_path / "c.yaml"
    _cassette(case, path)
    # our adapter builds its own request, not pydantic-ai's: match on method and path
    cassette = Cassette(path, ignore=["$"]).load()
    model, base_url = _model(case)
    credential = "bearer_token" if case["provider"] == "bedrock" else "api_key"
    options: dict[str, Any] = {credential: "replay", "base_url": base_url}
    if case["provider"] == "bedrock":
        options["region"] = "us-east-1"
    provider = get_provider(model, client=cassette.client(), stream=case["stream"], **options)
    message = asyncio.run(_reply(provider))
    assert cassette.problems() == []
    with_ids = case["provider"] != "gemini"  # Gemini sent no ids: the adapter makes them
    expected = case["expected"]
    assert _summary(message, with_ids=with_ids) == _expected(expected, with_ids=with_ids)
    usage = {k: getattr(message.usage, k) for k in expected["usage"]}
    assert usage == expected["usage"]
    if "error" in expected:
        assert expected["error"]["message"] in message.error_message
