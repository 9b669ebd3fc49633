"""How the server reads a tool result back (``read_request``), in the shapes each SDK
writes it (issue 22, item 8): the text is what the tool returned, non-ASCII characters kept,
whichever API and wrapping carried it."""

from __future__ import annotations

from typing import Any

import pytest

from openprogram_sim.wire import read_request

RESULT = "sunny, 21°C"


def _chat(content: Any) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    return {
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": content},
        ]
    }


def _responses(output: Any) -> dict[str, Any]:
    return {
        "input": [
            {"role": "user", "content": "Weather?"},
            {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": output},
        ]
    }


def _anthropic(content: Any, is_error: bool = False) -> dict[str, Any]:
    result = {"type": "tool_result", "tool_use_id": "c1", "content": content}
    if is_error:
        result["is_error"] = True
    return {
        "messages": [
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c1", "name": "weather", "input": {}}],
            },
            {"role": "user", "content": [result]},
        ]
    }


def _gemini(response: Any) -> dict[str, Any]:
    return {
        "contents": [
            {"role": "user", "parts": [{"text": "Weather?"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {}}}]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "weather", "response": response}}],
            },
        ]
    }


def _bedrock(content: list[Any], status: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"toolUseId": "c1", "content": content}
    if status:
        result["status"] = status
    return {
        "messages": [
            {"role": "user", "content": [{"text": "Weather?"}]},
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "c1", "name": "weather", "input": {}}}],
            },
            {"role": "user", "content": [{"toolResult": result}]},
        ]
    }


CASES = [
    # api, body, text, is_error (None: the wire carries no flag)
    ("openai-chat", _chat(RESULT), RESULT, None),
    ("openai-chat", _chat([{"type": "text", "text": RESULT}]), RESULT, None),
    ("openai-responses", _responses(RESULT), RESULT, None),
    ("openai-responses", _responses([{"type": "input_text", "text": RESULT}]), RESULT, None),
    ("anthropic", _anthropic(RESULT), RESULT, False),
    ("anthropic", _anthropic([{"type": "text", "text": RESULT}], is_error=True), RESULT, True),
    # our adapter, and the API's documented keys
    ("gemini", _gemini({"output": RESULT}), RESULT, False),
    ("gemini", _gemini({"error": "no station in Zürich"}), "no station in Zürich", True),
    ("gemini", _gemini({"output": {"temp": "21°C"}}), '{"temp": "21°C"}', False),
    # google-genai's automatic function calling: {"result": the function's return value}
    ("gemini", _gemini({"result": RESULT}), RESULT, False),
    (
        "gemini",
        _gemini({"result": {"sky": "sunny", "temp": "21°C"}}),
        '{"sky": "sunny", "temp": "21°C"}',
        False,
    ),
    ("gemini", _gemini({"result": 21}), "21", False),
    ("gemini", _gemini({"result": ["Zürich", "Genève"]}), '["Zürich", "Genève"]', False),
    # ... and its MCP adapter: {"result": [content parts]}
    ("gemini", _gemini({"result": [{"type": "text", "text": RESULT}]}), RESULT, False),
    # anything else is the output as a whole (as the API reads it)
    ("gemini", _gemini({"city": "Zürich", "temp": 21}), '{"city": "Zürich", "temp": 21}', False),
    (
        "gemini",
        _gemini({"result": RESULT, "source": "met"}),
        '{"result": "sunny, 21°C", "source": "met"}',
        False,
    ),
    ("bedrock", _bedrock([{"text": RESULT}]), RESULT, False),
    ("bedrock", _bedrock([{"json": {"temp": "21°C"}}]), '{"temp": "21°C"}', False),
    ("bedrock", _bedrock([{"text": "no station"}], status="error"), "no station", True),
]


@pytest.mark.parametrize(("api", "body", "text", "is_error"), CASES)
def test_a_tool_result_reads_as_the_text_the_tool_returned(
    api: str, body: dict[str, Any], text: str, is_error: bool | None
) -> None:
    last = read_request(api, body, index=2)["last_message"]
    expected: dict[str, Any] = {"role": "toolResult", "text": text, "tool_name": "weather"}
    if is_error is not None:
        expected["is_error"] = is_error
    assert last == expected
