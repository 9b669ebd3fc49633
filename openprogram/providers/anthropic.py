"""Anthropic Messages (``POST /v1/messages``).

Streams are SSE with ``event:`` names: ``message_start``, content blocks (``text``,
``thinking`` with a signature, ``redacted_thinking``, ``tool_use`` whose input arrives as
``input_json_delta`` pieces), ``message_delta`` (stop reason, cumulative usage) and
``message_stop``. An ``event: error`` inside a 200 stream (e.g. ``overloaded_error``) and a
stream without ``message_stop`` are failed calls.

Example::

    provider = AnthropicProvider("claude-sonnet-4-5")  # key from ANTHROPIC_API_KEY
"""

from __future__ import annotations

import json
from typing import Any, Literal

from openprogram.providers._errors import details_for_codes
from openprogram.providers._http import (
    HTTPProvider,
    sendable_messages,
    tool_call_text,
    tool_result_text,
    user_content,
)
from openprogram.providers._parsing import WireParser, to_int
from openprogram.providers._sse import SSEEvent
from openprogram.providers.base import Context, StreamOptions, ToolChoice, check_tool_choice
from openprogram.providers.builder import MessageBuilder
from openprogram.types import (
    AnyMessage,
    AssistantMessage,
    ErrorDetails,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
)

__all__ = [
    "API",
    "AnthropicProvider",
    "DEFAULT_MAX_TOKENS",
    "build_request",
    "parse_response",
    "tool_choice_fields",
]

API = "anthropic"
_LABEL = "Anthropic"
DEFAULT_MAX_TOKENS = 4096
"""Sent when no limit is given: the Messages API requires ``max_tokens``."""

_STOP: dict[str, Literal["stop", "length", "toolUse"]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}


def tool_choice_fields(tool_choice: ToolChoice, parallel_tool_calls: bool | None) -> dict[str, Any]:
    """The ``tool_choice`` object. ``parallel_tool_calls=False`` becomes
    ``disable_parallel_tool_use: true`` inside it (not applicable to ``none``)."""
    choice = check_tool_choice(tool_choice)
    value: dict[str, Any]
    if isinstance(choice, dict):
        value = {"type": "tool", "name": choice["name"]}
    else:
        value = {"type": {"auto": "auto", "required": "any", "none": "none"}[choice]}
    if parallel_tool_calls is False and value["type"] != "none":
        value["disable_parallel_tool_use"] = True
    return {"tool_choice": value}


# --------------------------------------------------------------------------- request


def build_request(
    context: Context, options: StreamOptions, *, model: str, stream: bool, max_tokens: int | None
) -> dict[str, Any]:
    """The JSON body of one ``/v1/messages`` call.

    Without tools, earlier tool calls and results are sent as text: the API rejects
    ``tool_use``/``tool_result`` blocks in a request that defines no tools, and the
    definitions are not ours to invent (the Bedrock adapter does the same).
    """
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens if max_tokens is not None else DEFAULT_MAX_TOKENS,
        "messages": _messages(context.messages, as_text=not context.tools),
        "stream": stream,
    }
    if context.system_prompt:
        body["system"] = context.system_prompt
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if context.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in context.tools
        ]
        body.update(tool_choice_fields(options.tool_choice, options.parallel_tool_calls))
    return body


def _messages(history: list[AnyMessage], *, as_text: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    sendable = list(sendable_messages(history))
    for index, message in enumerate(sendable):
        if isinstance(message, ToolResultMessage):
            blocks = _tool_result(message, as_text)
            # Every result of one reply must sit in the single user message that follows it.
            if out and out[-1]["role"] == "user" and out[-1].get("_results"):
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": "user", "content": blocks, "_results": True})
        elif isinstance(message, AssistantMessage):
            content = [_assistant_block(b, as_text) for b in message.content]
            content = [b for b in content if b is not None]
            if content:
                out.append({"role": "assistant", "content": content})
        else:
            said = user_content(message, last=index == len(sendable) - 1)
            if said:
                out.append({"role": "user", "content": [_user_block(b) for b in said]})
    for entry in out:
        entry.pop("_results", None)
    return out


def _user_block(block: TextContent | ImageContent) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    source = {"type": "base64", "media_type": block.mime_type, "data": block.data}
    return {"type": "image", "source": source}


def _assistant_block(
    block: TextContent | ThinkingContent | ToolCall, as_text: bool
) -> dict[str, Any] | None:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, ToolCall) and as_text:
        return {"type": "text", "text": tool_call_text(block)}
    if isinstance(block, ToolCall):
        arguments = block.arguments if isinstance(block.arguments, dict) else {}
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
    if block.redacted:
        return {"type": "redacted_thinking", "data": block.signature} if block.signature else None
    # Thinking without a signature (another provider's) cannot be replayed to Anthropic.
    if not block.signature:
        return None
    return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}


def _tool_result(message: ToolResultMessage, as_text: bool) -> list[dict[str, Any]]:
    if as_text:
        images = [_user_block(b) for b in message.content if isinstance(b, ImageContent)]
        return [{"type": "text", "text": tool_result_text(message)}, *images]
    # The API rejects an empty text block (a tool that returned None has one); `content`
    # itself is optional, so a result with nothing to show goes without it.
    content = [_user_block(b) for b in message.content if not isinstance(b, TextContent) or b.text]
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "is_error": message.is_error,
    }
    if content:
        block["content"] = content
    return [block]


# --------------------------------------------------------------------------- response


def _usage(raw: Any, usage: Usage) -> Usage:
    """``usage`` updated with the counts present in ``raw`` (message_delta repeats some)."""
    if not isinstance(raw, dict):
        return usage
    pick = {
        "input": "input_tokens",
        "output": "output_tokens",
        "cache_read": "cache_read_input_tokens",
        "cache_write": "cache_creation_input_tokens",
    }
    values = {
        k: to_int(raw[v]) if raw.get(v) is not None else getattr(usage, k) for k, v in pick.items()
    }
    return Usage(**values)


class _Parser(WireParser):
    terminal = "message_stop"
    label = _LABEL

    def __init__(self, builder: MessageBuilder, content_type: str) -> None:
        super().__init__(builder, content_type)
        self._usage = Usage()
        self._stop_reason: str | None = None
        self._kinds: dict[int, Literal["text", "thinking", "toolcall"]] = {}

    # -- stream --------------------------------------------------------------------------

    def on_sse(self, event: SSEEvent) -> None:
        data = json.loads(event.data)
        kind = data.get("type") or event.event
        if kind == "message_start":
            message = data.get("message") or {}
            self.builder.message.model = message.get("model") or self.builder.message.model
            self._usage = _usage(message.get("usage"), self._usage)
        elif kind == "content_block_start":
            self._block_start(data["index"], data["content_block"])
        elif kind == "content_block_delta":
            self._block_delta(data["index"], data["delta"])
        elif kind == "content_block_stop":
            self._block_stop(data["index"])
        elif kind == "message_delta":
            self._stop_reason = (data.get("delta") or {}).get("stop_reason") or self._stop_reason
            self._usage = _usage(data.get("usage"), self._usage)
        elif kind == "message_stop":
            self._finish()
        elif kind == "error":
            self._fail_error(data.get("error"))

    def _fail_error(self, error: Any) -> None:
        error = error if isinstance(error, dict) else {"message": str(error)}
        kind = error.get("type") or "error"
        self.fail(
            f"{_LABEL} stream error ({kind}): {error.get('message', '')}",
            self._usage,
            details=details_for_codes(kind),
        )

    def _block_start(self, index: int, block: dict[str, Any]) -> None:
        kind = block.get("type")
        if kind == "text":
            self.emit(self.builder.text_start(index))
            self._kinds[index] = "text"
            if block.get("text"):
                self.emit(self.builder.text_delta(block["text"], index))
        elif kind in ("thinking", "redacted_thinking"):
            redacted = kind == "redacted_thinking"
            self.emit(self.builder.thinking_start(index, redacted=redacted))
            self._kinds[index] = "thinking"
            signature = block.get("data") if redacted else block.get("signature")
            if signature:
                self.builder.thinking_signature(signature, index)
            if block.get("thinking"):
                self.emit(self.builder.thinking_delta(block["thinking"], index))
        elif kind == "tool_use":
            self.emit(self.builder.toolcall_start(block["id"], block["name"], index))
            self._kinds[index] = "toolcall"
        # Server tool blocks (web search, code execution...) are not ours to run: skipped.

    def _block_delta(self, index: int, delta: dict[str, Any]) -> None:
        kind = delta.get("type")
        if index not in self._kinds:
            return
        if kind == "text_delta":
            self.emit(self.builder.text_delta(delta["text"], index))
        elif kind == "thinking_delta":
            self.emit(self.builder.thinking_delta(delta["thinking"], index))
        elif kind == "signature_delta":
            self.builder.thinking_signature(delta["signature"], index)
        elif kind == "input_json_delta" and delta.get("partial_json"):
            self.emit(self.builder.toolcall_delta(delta["partial_json"], index))

    def _block_stop(self, index: int, arguments: Any = None) -> None:
        kind = self._kinds.pop(index, None)
        if kind == "text":
            self.emit(self.builder.text_end(index))
        elif kind == "thinking":
            self.emit(self.builder.thinking_end(index))
        elif kind == "toolcall":
            self.emit(self.builder.toolcall_end(index, arguments=arguments))

    def _finish(self) -> None:
        reason = self._stop_reason
        if reason == "refusal":
            self.fail(
                f"{_LABEL}: the model refused to answer (stop_reason refusal)",
                self._usage,
                details=ErrorDetails(reason="other"),
            )
        else:
            self.done(_STOP.get(reason or "end_turn", "stop"), self._usage)

    # -- whole body ----------------------------------------------------------------------

    def on_json(self, body: Any) -> None:
        if isinstance(body, dict) and body.get("type") == "error":
            self._fail_error(body.get("error"))
            return
        if not (isinstance(body, dict) and isinstance(body.get("content"), list)):
            self.fail_no_reply(body, "'content'")
            return
        if "stop_reason" not in body:
            self.fail_no_reply(body, "'stop_reason'")
            return
        self.builder.message.model = body.get("model") or self.builder.message.model
        self._usage = _usage(body.get("usage"), self._usage)
        for index, block in enumerate(body.get("content") or []):
            self._whole_block(index, block)
        self._stop_reason = body.get("stop_reason")
        self._finish()

    def _whole_block(self, index: int, block: dict[str, Any]) -> None:
        # The same events a stream would give: start, one delta with everything, stop.
        self._block_start(index, {k: v for k, v in block.items() if k != "input"})
        if block.get("type") == "tool_use":
            arguments = block.get("input") or {}
            self._block_delta(
                index, {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
            )
            self._block_stop(index, arguments)
        else:
            self._block_stop(index)


class AnthropicProvider(HTTPProvider):
    """Anthropic Messages over httpx2. Key: ``ANTHROPIC_API_KEY`` (sent as ``x-api-key``);
    base URL ``base_url=``, else ``ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com``.
    The root, as the anthropic SDK takes it, is joined as ``{root}/v1/messages``; a base
    URL ending in ``/v1`` as ``{base}/messages``."""

    api = API
    label = _LABEL
    request_mapping = staticmethod(build_request)
    parser_class = _Parser
    env_vars = ("ANTHROPIC_API_KEY",)
    default_base_url = "https://api.anthropic.com"
    base_url_env = "ANTHROPIC_BASE_URL"
    api_version = "v1"

    def endpoint(self) -> str:
        return f"{self.base_url}/messages"

    def api_headers(self) -> dict[str, str]:
        return {"anthropic-version": "2023-06-01"}

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key}


parse_response = AnthropicProvider.parse_response
"""A recorded ``/v1/messages`` response (JSON, SSE or an error body) as an
:class:`~openprogram.types.AssistantMessage`."""
