"""Types round-trip through JSON; the provider seam resolves by name; events stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pydantic
import pytest

from openprogram import (
    AssistantMessage,
    ConfigurationError,
    ProviderNotFoundError,
    Runtime,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolRegistry,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from openprogram.events import EventStream
from openprogram.providers import (
    Context,
    MessageBuilder,
    Provider,
    StreamOptions,
    get_provider,
    register_provider,
)
from openprogram.types import (
    ImageContent,
    message_from_dict,
    message_from_json,
    message_to_dict,
    message_to_json,
    messages_from_json,
    messages_to_json,
)

MESSAGES = [
    UserMessage([TextContent("hi"), ImageContent("aGVsbG8=", "image/png")], timestamp=1),
    AssistantMessage(
        [
            ThinkingContent("hmm", signature="sig"),
            TextContent("calling"),
            ToolCall("call_1", "add", {"a": 1}),
        ],
        stop_reason="toolUse",
        usage=Usage(10, 5, 1, 0, 2),
        api="scripted",
        model="m",
        timestamp=2,
    ),
    ToolResultMessage("call_1", "add", [TextContent("2")], is_error=False, timestamp=3),
    ToolResultMessage(
        "call_2", "add", [TextContent("skipped")], is_error=True, timestamp=3, skipped=True
    ),
    AssistantMessage([], stop_reason="error", error_message="boom", timestamp=4),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.role)
def test_messages_round_trip_through_json(message: Any) -> None:
    assert message_from_json(message_to_json(message)) == message
    data = message_to_dict(message)
    json.dumps(data)  # plain JSON
    assert message_from_dict(data) == message


def test_message_lists_round_trip_and_tags_are_explicit() -> None:
    text = messages_to_json(MESSAGES)
    assert messages_from_json(text) == MESSAGES
    data = json.loads(text)
    assert [m["role"] for m in data] == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "assistant",
    ]
    assert [b["type"] for b in data[1]["content"]] == ["thinking", "text", "toolCall"]
    assert [m["skipped"] for m in data[2:4]] == [False, True]


def test_a_tool_result_saved_before_the_skipped_flag_loads_as_not_skipped() -> None:
    data = message_to_dict(MESSAGES[2])
    del data["skipped"]
    loaded = message_from_dict(data)
    assert isinstance(loaded, ToolResultMessage)
    assert loaded.skipped is False


def test_loading_bad_json_names_the_field() -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        message_from_dict({"role": "assistant", "content": [{"type": "toolCall", "name": "x"}]})
    assert "id" in str(info.value)


def test_message_helpers() -> None:
    assistant = MESSAGES[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.text == "calling"
    assert [c.name for c in assistant.tool_calls] == ["add"]
    assert (Usage(1, 2) + Usage(3, 4, 5)).total_tokens == 15
    assert UserMessage.of("x").text == "x"


class EchoProvider:
    def __init__(self, model_id: str, **options: Any) -> None:
        self.model_id = model_id
        self.options = options

    async def stream(self, context: Context, options: StreamOptions) -> AsyncIterator[Any]:
        b = MessageBuilder(api="echo", model=self.model_id)
        yield b.start()
        yield b.text_start()
        yield b.text_delta(f"{self.model_id} heard {context.messages[-1].text}")
        yield b.text_end()
        yield b.done()


def test_runtime_resolves_a_provider_by_model_string() -> None:
    register_provider("echo", EchoProvider)
    runtime = Runtime(model="echo:m1", registry=ToolRegistry(), flavour="x")
    assert isinstance(runtime.provider, EchoProvider)
    assert runtime.provider.options == {"flavour": "x"}
    assert isinstance(runtime.provider, Provider)
    assert runtime.exec("hello") == "m1 heard hello"


def test_provider_lookup_errors_say_what_to_do() -> None:
    with pytest.raises(ProviderNotFoundError, match=r"no provider named 'nope'.*register_provider"):
        get_provider("nope:model")
    with pytest.raises(ConfigurationError, match=r"must look like 'provider:model_id'"):
        get_provider("gpt-4o")
    with pytest.raises(TypeError, match="needs a model string"):
        Runtime()
    with pytest.raises(ValueError, match="must be non-empty and contain no ':'"):
        register_provider("a:b", EchoProvider)


def test_builder_handles_interleaved_blocks_and_malformed_arguments() -> None:
    b = MessageBuilder(api="t", model="m")
    b.toolcall_start("c1", "f", key=0)
    b.toolcall_start("c2", "g", key=1)
    b.toolcall_delta('{"x":', key=0)
    b.toolcall_delta("[1,", key=1)
    b.toolcall_delta(" 1}", key=0)
    end1 = b.toolcall_end(key=1)
    end0 = b.toolcall_end(key=0)
    assert end0.tool_call.arguments == {"x": 1}
    assert end1.tool_call.arguments == "[1,"  # kept as sent; the loop reports it
    b.text_start()
    b.text_delta("tail")
    assert [e.type for e in b.close_open_blocks()] == ["text_end"]
    done = b.done()
    assert done.reason == "toolUse" and done.message.text == "tail"


def test_event_stream_delivers_events_then_result_or_failure() -> None:
    async def main() -> None:
        ok: EventStream[int, str] = EventStream()
        ok.push(1)
        ok.push(2)
        ok.end("done")
        ok.push(3)  # ignored after end
        assert [e async for e in ok] == [1, 2]
        assert await ok.result() == "done"
        bad: EventStream[int, str] = EventStream()
        bad.push(1)
        bad.fail(KeyError("x"))
        seen = []
        with pytest.raises(KeyError):
            async for e in bad:
                seen.append(e)
        assert seen == [1]

    asyncio.run(main())


def test_a_message_text_joins_its_text_blocks_only() -> None:
    from openprogram.types import (
        AssistantMessage,
        TextContent,
        ThinkingContent,
        ToolCall,
        ToolResultMessage,
        UserMessage,
    )

    assert AssistantMessage([]).text == ""
    assert AssistantMessage([TextContent("one")]).text == "one"
    assert AssistantMessage([ToolCall("c1", "search", {})]).text == ""
    mixed = [ThinkingContent("hm"), TextContent("a"), TextContent("b")]
    assert AssistantMessage(mixed).text == "ab"
    assert UserMessage([TextContent("hi")]).text == "hi"
    assert UserMessage([]).text == ""
    assert ToolResultMessage("c1", "search", [TextContent("r")]).text == "r"
    assert ToolResultMessage("c1", "search", [TextContent("r"), TextContent("s")]).text == "rs"
