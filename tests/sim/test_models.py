"""The scripted models: real stream events, recorded requests, faults, virtual latency."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _support import tool

from openprogram import Runtime, ToolRegistry
from openprogram.providers import Context, StreamOptions
from openprogram.tools import ToolSpec
from openprogram.types import UserMessage
from openprogram_sim.models import (
    AutoModel,
    FunctionModel,
    ScriptedModel,
    ScriptedRequest,
    Turn,
    VirtualClock,
    example_value,
)
from openprogram_sim.trace import TraceRecorder


def stream_types(model: ScriptedModel, options: StreamOptions | None = None) -> list[Any]:
    async def collect() -> list[Any]:
        ctx = Context("", [UserMessage.of("hi")], [ToolSpec("search")])
        return [e async for e in model.stream(ctx, options or StreamOptions(round=1))]

    return asyncio.run(collect())


def test_a_turn_streams_like_a_provider() -> None:
    model = ScriptedModel(
        [{"thinking": "hmm", "text": "abcdefgh", "tool_calls": [{"search": {"q": "xyz"}}]}],
        chunk_size=4,
    )
    events = stream_types(model)
    assert [e.type for e in events] == [
        "start",
        "thinking_start", "thinking_delta", "thinking_end",
        "text_start", "text_delta", "text_delta", "text_end",
        "toolcall_start", "toolcall_delta", "toolcall_delta", "toolcall_delta", "toolcall_end",
        "done",
    ]  # fmt: skip
    deltas = [e.delta for e in events if e.type == "toolcall_delta"]
    assert deltas == ['{"q"', ': "x', 'yz"}']  # partial JSON, as real providers stream it
    done = events[-1]
    assert done.reason == "toolUse"
    assert done.message.tool_calls[0].arguments == {"q": "xyz"}
    assert model.requests[0].tools == ["search"] and model.unconsumed == []
    model.assert_consumed()


def test_requests_record_what_was_sent_and_unconsumed_turns_are_reported() -> None:
    model = ScriptedModel(["one", "two", "three"])
    runtime = Runtime(provider=model, registry=ToolRegistry(), system_prompt="sys")
    runtime.exec("go", tools=[tool("t", lambda: 1)], tool_choice="required")
    request = model.requests[0]
    assert isinstance(request, ScriptedRequest)
    assert (request.index, request.depth, request.round, request.tools) == (1, 0, 1, ["t"])
    assert (request.tool_choice, request.system_prompt) == ("required", "sys")
    assert [t.text for t in model.unconsumed] == ["two", "three"]
    with pytest.raises(AssertionError, match="2 of 3 scripted turns were never requested"):
        model.assert_consumed()


def test_turn_validation_names_the_bad_key() -> None:
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['txt'\] in scripted turn"):
        Turn.coerce({"txt": "x"})
    with pytest.raises(ValueError, match=r"must be \{name: arguments\}"):
        Turn.coerce({"tool_calls": [{"a": 1, "b": 2}]})
    with pytest.raises(TypeError, match="a scripted turn must be"):
        Turn.coerce(3)  # type: ignore[arg-type]


def test_latency_runs_on_a_virtual_clock() -> None:
    clock = VirtualClock()
    model = ScriptedModel(
        [{"text": "slow", "latency": 30.0}, {"text": "x", "latency": 2.5}], clock=clock
    )
    runtime = Runtime(provider=model, registry=ToolRegistry())
    runtime.follow_up("more")
    assert runtime.exec("go", tools=[]) == "x"
    assert clock.now == 32.5
    with pytest.raises(ValueError, match="negative"):
        asyncio.run(clock.sleep(-1))


def test_cancel_mid_stream_yields_an_aborted_error_event() -> None:
    cancel = asyncio.Event()
    cancel.set()
    events = stream_types(ScriptedModel([{"text": "abc"}]), StreamOptions(cancel=cancel))
    assert [e.type for e in events] == ["start", "error"]
    assert events[-1].reason == "aborted"


def test_function_model_reacts_to_the_request() -> None:
    def reply(request: ScriptedRequest) -> Any:
        if request.round == 1:
            return {"tool_calls": [{"echo": {"text": request.messages[0].text}}]}
        return f"saw {len(request.messages)} messages, last {request.messages[-1].text!r}"

    model = FunctionModel(reply)
    runtime = Runtime(provider=model, registry=ToolRegistry())
    echo = tool("echo", lambda text: text.upper(), {"text": {"type": "string"}})
    assert runtime.exec("hello", tools=[echo]) == "saw 3 messages, last 'HELLO'"
    assert model.calls == 2 and model.unconsumed == []


def test_function_model_may_be_async() -> None:
    async def reply(request: ScriptedRequest) -> str:
        await asyncio.sleep(0)
        return "async reply"

    runtime = Runtime(provider=FunctionModel(reply), registry=ToolRegistry())
    assert runtime.exec("x", tools=[]) == "async reply"


def test_auto_model_calls_every_offered_tool_once_with_schema_arguments() -> None:
    seen: list[tuple[str, Any]] = []

    def record(name: str) -> Any:
        return lambda **kw: seen.append((name, kw)) or "ok"

    tools = [
        tool(
            "search", record("search"), {"q": {"type": "string"}, "n": {"type": "integer"}}, ["q"]
        ),
        tool(
            "mode",
            record("mode"),
            {"m": {"enum": ["fast", "slow"]}, "f": {"type": "boolean"}},
            ["m", "f"],
        ),
        tool("empty", record("empty")),
    ]
    model = AutoModel()
    runtime = Runtime(provider=model, registry=ToolRegistry())
    rec = TraceRecorder()
    runtime.subscribe(rec)
    assert runtime.exec("smoke", tools=tools) == "All tools called."
    assert seen == [("search", {"q": "x"}), ("mode", {"m": "fast", "f": True}), ("empty", {})]
    assert not any(e.get("is_error") for e in rec.trace if e["type"] == "tool_execution_end")
    assert model.calls == 2


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "string", "minLength": 3}, "xxx"),
        ({"type": "number", "minimum": 2}, 2.0),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 2}, [1, 1]),
        ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, 1),
        ({"type": ["null", "boolean"]}, True),
        ({"const": 7}, 7),
        (
            {"properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}},
            {"a": {"b": "x"}},
        ),
    ],
)
def test_example_values_satisfy_their_schema(schema: dict[str, Any], value: Any) -> None:
    assert example_value(schema) == value


def test_a_scripted_call_streams_its_arguments_as_json_and_rejects_what_json_cannot_hold() -> None:
    """A call's streamed text is the JSON of its arguments (a flat object's computed only when
    a stream needs it), a string is sent verbatim, and arguments JSON cannot hold are refused
    when the call is made, as before the text was left until needed."""
    from openprogram_sim.models import TurnToolCall

    flat = TurnToolCall("search", {"q": "ünï", "n": 3, "ok": True, "none": None})
    assert flat.json_text == '{"q": "ünï", "n": 3, "ok": true, "none": null}'
    assert TurnToolCall("search", {"tags": ["a"]}).json_text == '{"tags": ["a"]}'
    assert TurnToolCall("search", "{not json").json_text == "{not json"
    assert flat == TurnToolCall("search", {"q": "ünï", "n": 3, "ok": True, "none": None})
    assert repr(flat) == (
        "TurnToolCall(name='search', arguments={'q': 'ünï', 'n': 3, 'ok': True, 'none': None}, "
        "id=None)"
    )
    with pytest.raises(TypeError, match="not JSON serializable"):
        TurnToolCall("search", {"when": {1, 2}})
