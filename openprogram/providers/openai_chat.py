"""OpenAI Chat Completions (``POST /v1/chat/completions``), and compatible servers.

Streams are SSE ``data:`` chunks ending in ``data: [DONE]``; tool-call arguments arrive as
JSON text pieces keyed by ``index``. Usage comes in a last chunk because the request sets
``stream_options.include_usage``.

Example::

    provider = OpenAIChatProvider("gpt-4o-mini")  # key from OPENAI_API_KEY
"""

from __future__ import annotations

import json
from typing import Any, Literal

from openprogram.providers._errors import details_for_codes
from openprogram.providers._http import HTTPProvider, sendable_messages
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
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

__all__ = [
    "API",
    "OpenAIChatProvider",
    "build_request",
    "parse_response",
    "tool_choice_fields",
]

API = "openai-chat"
_LABEL = "OpenAI"

_STOP: dict[str, Literal["stop", "length", "toolUse"]] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
}


def tool_choice_fields(tool_choice: ToolChoice, parallel_tool_calls: bool | None) -> dict[str, Any]:
    """The request fields for ``tool_choice``; ``parallel_tool_calls`` is sent when not
    ``None``."""
    choice = check_tool_choice(tool_choice)
    fields: dict[str, Any] = {}
    if isinstance(choice, dict):
        fields["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        fields["tool_choice"] = choice
    if parallel_tool_calls is not None:
        fields["parallel_tool_calls"] = parallel_tool_calls
    return fields


# --------------------------------------------------------------------------- request


def build_request(
    context: Context, options: StreamOptions, *, model: str, stream: bool, max_tokens: int | None
) -> dict[str, Any]:
    """The JSON body of one ``/chat/completions`` call."""
    messages: list[dict[str, Any]] = []
    if context.system_prompt:
        messages.append({"role": "system", "content": context.system_prompt})
    messages.extend(_messages(context.messages))
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if max_tokens is not None:
        body["max_completion_tokens"] = max_tokens
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if context.tools:
        body["tools"] = [_tool(spec) for spec in context.tools]
        body.update(tool_choice_fields(options.tool_choice, options.parallel_tool_calls))
    return body


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def _image_part(image: ImageContent) -> dict[str, Any]:
    url = f"data:{image.mime_type};base64,{image.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_content(blocks: list[TextContent | ImageContent]) -> str | list[dict[str, Any]]:
    if all(isinstance(b, TextContent) for b in blocks):
        return "".join(b.text for b in blocks if isinstance(b, TextContent))
    return [
        {"type": "text", "text": b.text} if isinstance(b, TextContent) else _image_part(b)
        for b in blocks
    ]


def _arguments_text(arguments: Any) -> str:
    # Malformed arguments were kept as the model's raw text: send that text back unchanged.
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _messages(history: list[AnyMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []  # image parts of the current batch's results
    for message in sendable_messages(history):
        if isinstance(message, ToolResultMessage):
            out.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
            )
            images.extend(_result_images(message))
            continue
        if images:
            out.append({"role": "user", "content": images})
            images = []
        out.append(_message(message))
    if images:
        out.append({"role": "user", "content": images})
    return out


def _message(message: UserMessage | AssistantMessage) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "content": _user_content(list(message.content))}
    out: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": _arguments_text(call.arguments)},
        }
        for call in message.tool_calls
    ]
    if calls:
        out["tool_calls"] = calls
    return out


def _result_images(message: ToolResultMessage) -> list[dict[str, Any]]:
    """A tool message carries text only, so its images go in one user message after all
    the tool messages of the batch (the API wants an assistant message's tool calls
    answered by the messages right after it), each labelled with its call."""
    shots = [b for b in message.content if isinstance(b, ImageContent)]
    if not shots:
        return []
    label = f"Images from the result of {message.tool_name} (call {message.tool_call_id}):"
    return [{"type": "text", "text": label}, *map(_image_part, shots)]


# --------------------------------------------------------------------------- response


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    cached = to_int((raw.get("prompt_tokens_details") or {}).get("cached_tokens"))
    reasoning = to_int((raw.get("completion_tokens_details") or {}).get("reasoning_tokens"))
    return Usage(
        input=to_int(raw.get("prompt_tokens")) - cached,
        output=to_int(raw.get("completion_tokens")),
        cache_read=cached,
        reasoning=reasoning,
    )


class _Parser(WireParser):
    terminal = "data: [DONE]"
    label = _LABEL

    def __init__(self, builder: MessageBuilder, content_type: str) -> None:
        super().__init__(builder, content_type)
        self._finish_reason: str | None = None
        self._usage = Usage()
        self._calls: dict[int, tuple[int, str]] = {}  # wire index -> (builder key, id)
        self._serial = 0
        self._choices = False  # a choice arrived: the answer is a reply

    # -- stream --------------------------------------------------------------------------

    def on_sse(self, event: SSEEvent) -> None:
        if event.data.strip() == "[DONE]":
            self._finish()
            return
        chunk = json.loads(event.data)
        if isinstance(chunk, dict) and chunk.get("error"):
            self._fail_chunk(chunk["error"])
            return
        if chunk.get("usage"):
            # Later chunks may carry "usage": null (moderation); keep the last real one.
            self._usage = _usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            self._choices = True
            if choice.get("index", 0) == 0:
                self._delta(choice.get("delta") or {})
                self._finish_reason = choice.get("finish_reason") or self._finish_reason

    def _fail_chunk(self, error: Any) -> None:
        fields = error if isinstance(error, dict) else {"message": str(error)}
        code = fields.get("code") or fields.get("type")
        self.fail(
            f"{_LABEL} stream error{f' ({code})' if code else ''}: {fields.get('message')}",
            self._usage,
            details=details_for_codes(fields.get("code"), fields.get("type")),
        )

    def _delta(self, delta: dict[str, Any]) -> None:
        # Compatible servers (vLLM, DeepSeek, OpenRouter) stream reasoning in these fields.
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._text("thinking", reasoning)
        if delta.get("content"):
            self._text("text", delta["content"])
        for call in delta.get("tool_calls") or []:
            self._call_delta(call)

    def _text(self, kind: Literal["text", "thinking"], piece: str) -> None:
        if kind == "text":
            if not self.builder.is_open("text", "text"):
                self.emit(self.builder.text_start("text"))
            self.emit(self.builder.text_delta(piece, "text"))
        else:
            if not self.builder.is_open("thinking", "thinking"):
                self.emit(self.builder.thinking_start("thinking"))
            self.emit(self.builder.thinking_delta(piece, "thinking"))

    def _call_delta(self, call: dict[str, Any]) -> None:
        index = call.get("index", 0)
        function = call.get("function") or {}
        call_id = call.get("id")
        current = self._calls.get(index)
        # Some compatible servers reuse index 0 for every call: a new id opens a new call.
        if current is None or (call_id and call_id != current[1]):
            if current is not None:
                self.emit(self.builder.toolcall_end(current[0]))
            self._serial += 1
            current = (self._serial, call_id or f"call_{self._serial}")
            self._calls[index] = current
            start = self.builder.toolcall_start(current[1], function.get("name") or "", current[0])
            self.emit(start)
        arguments = function.get("arguments")
        if arguments:
            self.emit(self.builder.toolcall_delta(arguments, current[0]))

    def _finish(self) -> None:
        reason = self._finish_reason
        if not self._choices:
            self.fail(f"{_LABEL}: the stream is not a reply: no chunk had 'choices'")
        elif reason == "content_filter":
            self.fail(
                f"{_LABEL}: the reply was stopped by the content filter",
                self._usage,
                details=ErrorDetails(reason="other"),
            )
        else:
            self.done(_STOP.get(reason or "stop", "stop"), self._usage)

    def on_end(self) -> None:
        # Some compatible servers omit [DONE]; a finish_reason is as good an ending.
        if self._finish_reason is not None:
            self._finish()

    # -- whole body ----------------------------------------------------------------------

    def on_json(self, body: Any) -> None:
        if isinstance(body, dict) and body.get("error"):
            self._fail_chunk(body["error"])
            return
        if not (
            isinstance(body, dict) and isinstance(body.get("choices"), list) and body["choices"]
        ):
            self.fail_no_reply(body, "'choices'")
            return
        self._choices = True
        self.builder.message.model = body.get("model") or self.builder.message.model
        self._usage = _usage(body.get("usage"))
        choice = body["choices"][0]
        message = dict(choice.get("message") or {})
        # A whole body lists its calls; the streaming path keys them by "index", which a
        # non-streamed body need not carry: the list position is the index.
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            message["tool_calls"] = [
                {"index": i, **c} if isinstance(c, dict) and "index" not in c else c
                for i, c in enumerate(calls)
            ]
        self._delta(message)
        self._finish_reason = choice.get("finish_reason")
        self._finish()


class OpenAIChatProvider(HTTPProvider):
    """Chat Completions over httpx2. Key: ``OPENAI_API_KEY``; base URL ``base_url=``, else
    ``OPENAI_BASE_URL``, else ``https://api.openai.com/v1`` (as the openai SDK takes it:
    ``/chat/completions`` is joined to it as given)."""

    api = API
    label = _LABEL
    request_mapping = staticmethod(build_request)
    parser_class = _Parser
    env_vars = ("OPENAI_API_KEY",)
    default_base_url = "https://api.openai.com/v1"
    base_url_env = "OPENAI_BASE_URL"

    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"


parse_response = OpenAIChatProvider.parse_response
"""A recorded ``/chat/completions`` response (JSON, SSE or an error body) as an
:class:`~openprogram.types.AssistantMessage`."""
