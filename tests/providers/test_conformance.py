"""Every recorded exchange in tests/conformance: our parse must equal what the provider's
official SDK made of the same body, and our tool_choice fields must equal the ones the real
API accepted."""

from __future__ import annotations

from typing import Any

import pytest

from openprogram.providers import parse_response, tool_choice_fields
from openprogram.types import AssistantMessage, TextContent, ThinkingContent


def _summary(message: AssistantMessage, *, with_ids: bool, usage_keys: list[str]) -> dict[str, Any]:
    texts = [b.text for b in message.content if isinstance(b, TextContent) and b.text]
    thoughts = [b.thinking for b in message.content if isinstance(b, ThinkingContent)]
    thoughts = [t for t in thoughts if t]
    calls = [
        {"id": c.id, "name": c.name, "arguments": c.arguments}
        if with_ids
        else {"name": c.name, "arguments": c.arguments}
        for c in message.tool_calls
    ]
    return {
        "text": message.text,
        "text_blocks": texts,
        "thinking": "".join(thoughts) or None,
        "thinking_blocks": thoughts,
        "tool_calls": calls,
        "stop_reason": message.stop_reason,
        "usage": {key: getattr(message.usage, key) for key in usage_keys},
    }


def _expected(expected: dict[str, Any], *, with_ids: bool) -> dict[str, Any]:
    calls = [
        {"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
        if with_ids
        else {"name": c["name"], "arguments": c["arguments"]}
        for c in expected["tool_calls"]
    ]
    return {
        "text": expected["text"],
        "text_blocks": expected["text_blocks"],
        "thinking": expected["thinking"],
        "thinking_blocks": expected["thinking_blocks"],
        "tool_calls": calls,
        "stop_reason": expected["stop_reason"],
        "usage": expected["usage"],
    }


def test_parse_matches_official_sdk(conformance_case: Any) -> None:
    case = conformance_case
    expected = case.expected
    message = parse_response(
        case.api, case.body, content_type=case.content_type, status=case.status
    )
    # Gemini sent no functionCall.id in any recording; the adapter makes ids up.
    with_ids = case.api != "gemini"
    assert _summary(message, with_ids=with_ids, usage_keys=list(expected["usage"])) == _expected(
        expected, with_ids=with_ids
    )
    assert message.api == case.api
    if "redacted_thinking_blocks" in expected:
        redacted = [b for b in message.content if isinstance(b, ThinkingContent) and b.redacted]
        assert len(redacted) == expected["redacted_thinking_blocks"]
    if case.api == "gemini":
        assert all(call.id for call in message.tool_calls)
    if "error" in expected:
        assert message.error_message is not None
        assert expected["error"]["message"] in message.error_message
        assert str(expected["error"]["status"]) in message.error_message
    elif expected["stop_reason"] == "error":  # e.g. a safety stop: the reason is explained
        assert message.error_message
    else:
        assert message.error_message is None


# --------------------------------------------------------------------------- tool_choice

# What each matrix case asked for, in our vocabulary. tools_plus_output (2 of 3 tools
# allowed) has no equivalent: it is checked only where the API expressed it as "required".
_MATRIX = {
    "auto": "auto",
    "none": "none",
    "required": "required",
    "list_single": {"type": "function", "name": "get_weather"},
    "none_with_output": {"type": "function", "name": "final_result"},
}


def _forced(name: str) -> dict[str, str]:
    return {"type": "function", "name": name}


def _recorded_choice(api: str, body: dict[str, Any]) -> tuple[Any, bool | None]:
    """The choice a recorded request expressed, read with the table of
    tests/conformance/README.md (independently of the adapters); None if it has no
    equivalent in our vocabulary."""
    if api in ("openai-chat", "openai-responses"):
        tc = body.get("tool_choice")
        parallel = body.get("parallel_tool_calls")
        if isinstance(tc, str):
            return tc, parallel
        if isinstance(tc, dict) and tc.get("type") == "function":
            return _forced(tc["function"]["name"] if api == "openai-chat" else tc["name"]), parallel
        return None, parallel
    if api == "anthropic":
        tc = body["tool_choice"]
        parallel = False if tc.get("disable_parallel_tool_use") else None
        if tc["type"] == "tool":
            return _forced(tc["name"]), parallel
        return {"auto": "auto", "any": "required", "none": "none"}[tc["type"]], parallel
    config = body.get("toolConfig") or {}
    if api == "gemini":
        fcc = config["functionCallingConfig"]
        names = fcc.get("allowedFunctionNames")
        if fcc["mode"] == "ANY" and names:
            return (_forced(names[0]) if len(names) == 1 else None), None
        return {"AUTO": "auto", "ANY": "required", "NONE": "none"}[fcc["mode"]], None
    tc = config.get("toolChoice")  # bedrock
    if tc is None:
        return "none", None  # Converse has no "none": no toolConfig at all
    if "tool" in tc:
        return _forced(tc["tool"]["name"]), None
    return {"auto": "auto", "any": "required"}[next(iter(tc))], None


def _choice_part(api: str, fields: dict[str, Any]) -> Any:
    """The part of a request body that carries the tool choice (and the parallel flag)."""
    if api in ("openai-chat", "openai-responses"):
        return fields.get("tool_choice"), fields.get("parallel_tool_calls")
    if api == "anthropic":
        return fields.get("tool_choice")
    config = fields.get("toolConfig") or {}
    if api == "gemini":
        return config.get("functionCallingConfig")
    return config.get("toolChoice")


def test_tool_choice_fields_match_recorded_request(tool_choice_case: Any) -> None:
    case = tool_choice_case
    body = case.request_body
    choice, parallel = _recorded_choice(case.api, body)
    matrix = case.tag_value("tool_choice_matrix")
    if matrix in _MATRIX:
        assert choice == _MATRIX[matrix], "the reading of the recorded request is wrong"
    if choice is None:
        pytest.skip("the recorded choice (a subset of tools) has no tool_choice equivalent")
    fields = tool_choice_fields(case.api, choice, parallel)
    assert _choice_part(case.api, fields) == _choice_part(case.api, body)
    if case.api == "bedrock" and choice == "none":
        assert "toolConfig" not in body and "toolConfig" not in fields


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses", "anthropic"])
def test_parallel_false_is_sent(api: str) -> None:
    fields = tool_choice_fields(api, "auto", False)
    if api == "anthropic":
        assert fields == {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}
    else:
        assert fields == {"tool_choice": "auto", "parallel_tool_calls": False}


def test_unknown_api_lists_the_five() -> None:
    with pytest.raises(
        ValueError, match="openai-chat, openai-responses, anthropic, gemini, bedrock"
    ):
        tool_choice_fields("cohere", "auto", None)
    with pytest.raises(ValueError, match="unknown api 'cohere'"):
        parse_response("cohere", b"{}", content_type="application/json")


def test_bad_tool_choice_is_rejected() -> None:
    with pytest.raises(ValueError, match="tool_choice"):
        tool_choice_fields("openai-chat", "sometimes", None)
