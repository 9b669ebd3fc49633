"""``boto3``'s bedrock-runtime client (``endpoint_url``, fake credentials) against the wire
server: Converse and ConverseStream (AWS event-stream)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import closing
from types import ModuleType
from typing import Any

import pytest
from serve_support import CALL_ARGS, SEARCH_SCHEMA, TEXT, turns

from openprogram_sim.wire import WireServer, serve

# `boto3` and `botocore` are the fixtures (tests/conftest.py) that import the SDK when a test
# asks for them.

MODEL = "us.amazon.nova-micro-v1:0"
TOOLS = {"tools": [{"toolSpec": {"name": "search", "inputSchema": {"json": SEARCH_SCHEMA}}}]}
HI = [{"role": "user", "content": [{"text": "Why are there tides?"}]}]


@pytest.fixture(scope="module")
def server() -> Iterator[WireServer]:
    with serve(turns(1)) as running:
        yield running


@pytest.fixture
def client(boto3: ModuleType, botocore: ModuleType) -> Callable[..., Any]:
    def make(server: WireServer, session: str | None = None) -> Any:
        return boto3.client(
            "bedrock-runtime",
            endpoint_url=server.base_url("bedrock", session),
            region_name="us-east-1",
            aws_access_key_id="test-access-key",
            aws_secret_access_key="test-secret-key",
            config=botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"}),
        )

    return make


def _stream(c: Any, **extra: Any) -> dict[str, Any]:
    """A ConverseStream folded into Converse's shape: content blocks, stop reason, usage."""
    blocks: dict[int, dict[str, Any]] = {}
    out: dict[str, Any] = {}
    stream = c.converse_stream(modelId=MODEL, messages=HI, **extra)["stream"]
    with closing(stream):
        for event in stream:
            _fold(event, blocks, out)
    out["content"] = [blocks[i] for i in sorted(blocks)]
    return out


def _fold(event: dict[str, Any], blocks: dict[int, dict[str, Any]], out: dict[str, Any]) -> None:
    if "contentBlockStart" in event:
        start = event["contentBlockStart"]
        use = start["start"]["toolUse"]
        blocks[start["contentBlockIndex"]] = {"toolUse": {**use, "input": ""}}
    elif "contentBlockDelta" in event:
        delta = event["contentBlockDelta"]
        block = blocks.setdefault(delta["contentBlockIndex"], {})
        for key, value in delta["delta"].items():
            if key == "toolUse":
                block["toolUse"]["input"] += value["input"]
            elif key == "text":
                block["text"] = block.get("text", "") + value
            elif "text" in value:
                block["reasoning"] = block.get("reasoning", "") + value["text"]
    elif "messageStop" in event:
        out["stopReason"] = event["messageStop"]["stopReason"]
    elif "metadata" in event:
        out["usage"] = event["metadata"]["usage"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_converse_reconstructs_the_script(
    server: WireServer, client: Callable[..., Any], stream: bool
) -> None:
    import json

    session = f"bedrock-{stream}"
    c = client(server, session)
    if stream:
        first, second = _stream(c, toolConfig=TOOLS), _stream(c)
        use = first["content"][1]["toolUse"]
        reasoning = first["content"][0]["reasoning"]
        text = second["content"][0]["text"]
        arguments = json.loads(use["input"])
    else:
        first = c.converse(modelId=MODEL, messages=HI, toolConfig=TOOLS)
        second = c.converse(modelId=MODEL, messages=HI)
        content = first["output"]["message"]["content"]
        use = content[1]["toolUse"]
        reasoning = content[0]["reasoningContent"]["reasoningText"]["text"]
        text = second["output"]["message"]["content"][0]["text"]
        arguments = use["input"]
    c.close()
    assert reasoning == "I should search first."
    assert (use["name"], arguments) == ("search", CALL_ARGS)
    assert first["stopReason"] == "tool_use"
    assert first["usage"]["inputTokens"] == 11
    assert (text, second["stopReason"]) == (TEXT, "end_turn")
    server.assert_consumed(session)


def test_a_429_is_a_throttling_exception(client: Callable[..., Any]) -> None:
    script = [{"stop_reason": "error", "error": "Too many requests", "wire": {"status": 429}}]
    with serve(script) as s:
        c = client(s)
        with pytest.raises(c.exceptions.ThrottlingException) as caught:
            c.converse(modelId=MODEL, messages=HI)
        c.close()
    assert caught.value.response["Error"]["Message"] == "Too many requests"


@pytest.mark.parametrize(
    ("status", "code"), [(None, "internalServerException"), (424, "modelStreamErrorException")]
)
def test_an_in_stream_failure_is_an_event_stream_error(
    botocore: ModuleType, client: Callable[..., Any], status: int | None, code: str
) -> None:
    wire = {"error_mode": "stream", "status": status}
    script = [{"text": TEXT, "stop_reason": "error", "error": "model stream broke", "wire": wire}]
    with serve(script) as s:
        c = client(s)
        with pytest.raises(
            botocore.exceptions.EventStreamError, match="model stream broke"
        ) as caught:
            _stream(c)
        c.close()
    assert caught.value.response["Error"]["Code"] == code
