"""OpenAI Responses (``POST /v1/responses``).

The reply is a list of output items (``reasoning``, ``message``, ``function_call``). Streams
are SSE with ``event:`` names: items open with ``response.output_item.added``, grow through
``*.delta`` events and close with ``response.output_item.done``; the stream ends with
``response.completed`` / ``response.incomplete`` (or fails: ``response.failed``, ``error``).
A tool call's id is its ``call_id`` (what ``function_call_output`` quotes); the item id
(``fc_...``) is kept as the call's ``signature``. A reasoning item is kept, as JSON, in the
``signature`` of its first thinking block, so it can be sent back in the next request.

Example::

    provider = OpenAIResponsesProvider("gpt-5-mini")  # key from OPENAI_API_KEY
"""

from __future__ import annotations

import json
from typing import Any

from openprogram.providers._errors import details_for_codes
from openprogram.providers._http import HTTPProvider, sendable_messages
from openprogram.providers._parsing import WireParser, to_int
from openprogram.providers._sse import SSEEvent
from openprogram.providers.base import Context, StreamOptions, ToolChoice, check_tool_choice
from openprogram.providers.builder import MessageBuilder, parse_arguments
from openprogram.types import (
    AnyMessage,
    AssistantMessage,
    ErrorDetails,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    UserMessage,
)

__all__ = [
    "API",
    "OpenAIResponsesProvider",
    "build_request",
    "parse_response",
    "tool_choice_fields",
]

API = "openai-responses"
_LABEL = "OpenAI Responses"


def tool_choice_fields(tool_choice: ToolChoice, parallel_tool_calls: bool | None) -> dict[str, Any]:
    """The request fields for ``tool_choice``; ``parallel_tool_calls`` is sent when not
    ``None``."""
    choice = check_tool_choice(tool_choice)
    fields: dict[str, Any] = {}
    if isinstance(choice, dict):
        fields["tool_choice"] = {"type": "function", "name": choice["name"]}
    else:
        fields["tool_choice"] = choice
    if parallel_tool_calls is not None:
        fields["parallel_tool_calls"] = parallel_tool_calls
    return fields


# --------------------------------------------------------------------------- request


def build_request(
    context: Context, options: StreamOptions, *, model: str, stream: bool, max_tokens: int | None
) -> dict[str, Any]:
    """The JSON body of one ``/v1/responses`` call."""
    items: list[dict[str, Any]] = []
    for message in sendable_messages(context.messages):
        items.extend(_items(message))
    body: dict[str, Any] = {"model": model, "input": items, "stream": stream}
    if context.system_prompt:
        body["instructions"] = context.system_prompt
    if max_tokens is not None:
        body["max_output_tokens"] = max_tokens
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if context.tools:
        # strict defaults to true on this API, which would reject ordinary schemas.
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "strict": False,
            }
            for t in context.tools
        ]
        body.update(tool_choice_fields(options.tool_choice, options.parallel_tool_calls))
    return body


def _data_url(image: ImageContent) -> str:
    return f"data:{image.mime_type};base64,{image.data}"


def _input_content(blocks: list[TextContent | ImageContent]) -> str | list[dict[str, Any]]:
    if all(isinstance(b, TextContent) for b in blocks):
        return "".join(b.text for b in blocks if isinstance(b, TextContent))
    return [
        {"type": "input_text", "text": b.text}
        if isinstance(b, TextContent)
        else {"type": "input_image", "image_url": _data_url(b), "detail": "auto"}
        for b in blocks
    ]


def _items(message: AnyMessage) -> list[dict[str, Any]]:
    if isinstance(message, UserMessage):
        return [{"role": "user", "content": _input_content(list(message.content))}]
    if isinstance(message, AssistantMessage):
        items: list[dict[str, Any]] = []
        for block in message.content:
            item = _assistant_item(block)
            if item is not None and item not in items:
                items.append(item)
        return items
    # function_call_output takes a string, or input_text / input_image parts.
    output = _input_content(list(message.content))
    return [{"type": "function_call_output", "call_id": message.tool_call_id, "output": output}]


def _assistant_item(block: TextContent | ThinkingContent | ToolCall) -> dict[str, Any] | None:
    if isinstance(block, ToolCall):
        arguments = block.arguments
        item = {
            "type": "function_call",
            "call_id": block.id,
            "name": block.name,
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        }
        if block.signature and block.signature.startswith("fc"):
            item["id"] = block.signature
        return item
    if isinstance(block, TextContent):
        if not block.text:
            return None
        if not (block.signature and block.signature.startswith("msg")):
            return {"role": "assistant", "content": block.text}
        part = {"type": "output_text", "text": block.text, "annotations": []}
        return {
            "type": "message",
            "role": "assistant",
            "id": block.signature,
            "status": "completed",
            "content": [part],
        }
    return _reasoning_item(block.signature)


def _reasoning_item(signature: str | None) -> dict[str, Any] | None:
    # Only our own reasoning items can go back; other providers' thinking is dropped.
    try:
        item = json.loads(signature or "")
    except ValueError:
        return None
    if isinstance(item, dict) and item.get("type") == "reasoning":
        return item
    return None


# --------------------------------------------------------------------------- response


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    cached = to_int((raw.get("input_tokens_details") or {}).get("cached_tokens"))
    reasoning = to_int((raw.get("output_tokens_details") or {}).get("reasoning_tokens"))
    return Usage(
        input=to_int(raw.get("input_tokens")) - cached,
        output=to_int(raw.get("output_tokens")),
        cache_read=cached,
        reasoning=reasoning,
    )


def _error_text(error: Any, default: str) -> str:
    if not isinstance(error, dict):
        return default
    code = error.get("code") or error.get("type")
    message = error.get("message") or default
    return f"({code}) {message}" if code else str(message)


def _error_details(error: Any) -> ErrorDetails:
    if not isinstance(error, dict):
        return details_for_codes()
    return details_for_codes(error.get("code"), error.get("type"))


_Key = tuple[str, str, int]


class _Parser(WireParser):
    terminal = "response.completed"
    label = _LABEL

    def __init__(self, builder: MessageBuilder, content_type: str) -> None:
        super().__init__(builder, content_type)
        self._open: dict[str, list[_Key]] = {}  # item id -> its open text/thinking blocks
        self._calls: set[str] = set()  # item ids of started function calls

    # -- stream --------------------------------------------------------------------------

    def on_sse(self, event: SSEEvent) -> None:
        data = json.loads(event.data)
        kind = data.get("type") or event.event
        if kind == "response.output_item.added":
            self._item_added(data["item"])
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            self._grow("text", data["item_id"], data.get("content_index", 0), data["delta"])
        elif kind == "response.reasoning_summary_text.delta":
            self._grow("summary", data["item_id"], data.get("summary_index", 0), data["delta"])
        elif kind == "response.reasoning_text.delta":
            self._grow("reasoning", data["item_id"], data.get("content_index", 0), data["delta"])
        elif kind == "response.function_call_arguments.delta":
            if data["item_id"] in self._calls and data.get("delta"):
                self.emit(self.builder.toolcall_delta(data["delta"], data["item_id"]))
        elif kind == "response.output_item.done":
            self._item_done(data["item"])
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._complete(data["response"])
        elif kind == "error":
            self.fail(
                f"{_LABEL} stream error: {_error_text(data, 'unknown error')}",
                details=_error_details(data),
            )

    def _item_added(self, item: dict[str, Any]) -> None:
        if item.get("type") == "function_call":
            item_id = item["id"]
            start = self.builder.toolcall_start(
                item["call_id"], item["name"], item_id, signature=item_id
            )
            self.emit(start)
            self._calls.add(item_id)

    def _grow(self, kind: str, item_id: str, index: int, delta: str) -> None:
        key: _Key = (kind, item_id, index)
        if key not in self._open.setdefault(item_id, []):
            self._open[item_id].append(key)
            if kind == "text":
                self.emit(self.builder.text_start(key))
            else:
                self.emit(self.builder.thinking_start(key))
        if not delta:
            return
        if kind == "text":
            self.emit(self.builder.text_delta(delta, key))
        else:
            self.emit(self.builder.thinking_delta(delta, key))

    # -- items, whole (non-stream bodies, and anything a stream did not deliver piecewise)

    def _item_done(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        item_id = item.get("id") or f"item_{len(self.builder.message.content)}"
        if kind == "function_call":
            self._call_done(item_id, item)
        elif kind == "message":
            for index, part in enumerate(item.get("content") or []):
                self._fill("text", item_id, index, part.get("text") or part.get("refusal"))
            self._close(item_id, signature=item_id)
        elif kind == "reasoning":
            for index, part in enumerate(item.get("summary") or []):
                self._fill("summary", item_id, index, part.get("text"))
            for index, part in enumerate(item.get("content") or []):
                self._fill("reasoning", item_id, index, part.get("text"))
            self._reasoning_signature(item_id, item)
            self._close(item_id)

    def _fill(self, kind: str, item_id: str, index: int, text: str | None) -> None:
        # A block the stream already opened has its text; only missing ones are filled in.
        if (kind, item_id, index) not in self._open.get(item_id, []) and text:
            self._grow(kind, item_id, index, text)

    def _reasoning_signature(self, item_id: str, item: dict[str, Any]) -> None:
        keys = self._open.setdefault(item_id, [])
        if not keys:
            # Encrypted-only reasoning: an empty redacted block carries the item.
            key: _Key = ("summary", item_id, 0)
            keys.append(key)
            self.emit(self.builder.thinking_start(key, redacted=True))
        kept = {k: item[k] for k in ("type", "id", "summary", "encrypted_content") if k in item}
        self.builder.thinking_signature(json.dumps(kept), keys[0])

    def _close(self, item_id: str, signature: str | None = None) -> None:
        for key in self._open.pop(item_id, []):
            if key[0] == "text":
                self.emit(self.builder.text_end(key, signature=signature))
            else:
                self.emit(self.builder.thinking_end(key))

    def _call_done(self, item_id: str, item: dict[str, Any]) -> None:
        arguments = item.get("arguments") or ""
        if item_id not in self._calls:
            self._item_added({**item, "id": item_id})
            if arguments:
                self.emit(self.builder.toolcall_delta(arguments, item_id))
        self._calls.discard(item_id)
        self.emit(self.builder.toolcall_end(item_id, arguments=parse_arguments(arguments)))

    def _complete(self, response: dict[str, Any]) -> None:
        self.builder.message.model = response.get("model") or self.builder.message.model
        usage = _usage(response.get("usage"))
        status = response.get("status")
        reason = (response.get("incomplete_details") or {}).get("reason")
        if status == "completed":
            self.done(None, usage)
        elif status == "incomplete" and reason != "content_filter":
            self.done("length", usage)
        elif status == "incomplete":
            self.fail(
                f"{_LABEL}: the reply was stopped by the content filter",
                usage,
                details=ErrorDetails(reason="other"),
            )
        else:
            error = _error_text(response.get("error"), "no error details")
            self.fail(
                f"{_LABEL}: response {status}: {error}",
                usage,
                details=_error_details(response.get("error")),
            )

    def on_json(self, body: Any) -> None:
        if isinstance(body, dict) and body.get("error") and not body.get("output"):
            self.fail(
                f"{_LABEL} error: {_error_text(body['error'], 'unknown error')}",
                details=_error_details(body["error"]),
            )
            return
        if not (isinstance(body, dict) and isinstance(body.get("output"), list)):
            self.fail_no_reply(body, "'output'")
            return
        if "status" not in body:
            self.fail_no_reply(body, "'status'")
            return
        for item in body.get("output") or []:
            self._item_done(item)
        self._complete(body)


class OpenAIResponsesProvider(HTTPProvider):
    """OpenAI Responses over httpx2. Key: ``OPENAI_API_KEY``; base URL ``base_url=``, else
    ``OPENAI_BASE_URL``, else ``https://api.openai.com/v1`` (as the openai SDK takes it:
    ``/responses`` is joined to it as given)."""

    api = API
    label = _LABEL
    request_mapping = staticmethod(build_request)
    parser_class = _Parser
    env_vars = ("OPENAI_API_KEY",)
    default_base_url = "https://api.openai.com/v1"
    base_url_env = "OPENAI_BASE_URL"

    def endpoint(self) -> str:
        return f"{self.base_url}/responses"


parse_response = OpenAIResponsesProvider.parse_response
"""A recorded ``/v1/responses`` response (JSON, SSE or an error body) as an
:class:`~openprogram.types.AssistantMessage`."""
