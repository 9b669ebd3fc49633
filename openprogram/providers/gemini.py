"""Google Gemini ``generateContent`` / ``streamGenerateContent?alt=sse`` adapter.

Wire facts this module relies on (see ``docs/providers.md``):

* The key travels in the ``x-goog-api-key`` header, never in the URL, so it cannot leak
  through logged URLs. It comes from ``GEMINI_API_KEY``, else ``GOOGLE_API_KEY``.
* A function call arrives whole (``functionCall.args`` is an object, never partial JSON),
  so each call yields one ``toolcall_delta`` holding its arguments as JSON text.
* The Gemini API sends no ``functionCall.id``: the adapter makes one up and sends it back
  with the call and its ``functionResponse`` (the API accepts ids there).
* ``thoughtSignature`` values are kept on the block they came with (``TextContent``,
  ``ThinkingContent`` or ``ToolCall`` ``.signature``) and echoed back unchanged, but only
  on messages that came from Gemini: another provider's signature means nothing here.
* There is no tool-use finish reason: ``STOP`` with function calls is ``toolUse``.
* There is no parallel-calls knob: ``parallel_tool_calls`` is ignored (see
  :func:`tool_choice_fields`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal, TypeAlias

from openprogram.events import ProviderEvent
from openprogram.providers._errors import details_for_codes
from openprogram.providers._http import HTTPProvider, sendable_messages, user_content
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
    ToolResultMessage,
    ToolSpec,
    Usage,
)

__all__ = [
    "API",
    "DEFAULT_BASE_URL",
    "GeminiProvider",
    "build_request",
    "parse_response",
    "tool_choice_fields",
]

API = "gemini"
_LABEL = "Gemini"
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
KEY_ENV_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

_Kind: TypeAlias = Literal["text", "thinking"]

_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}


# --------------------------------------------------------------------------- request


def tool_choice_fields(tool_choice: ToolChoice, parallel_tool_calls: bool | None) -> dict[str, Any]:
    """The request-body fields for ``tool_choice``: a ``toolConfig`` object.

    ``"auto"`` → mode ``AUTO``, ``"required"`` → ``ANY``, ``"none"`` → ``NONE``, and
    ``{"type": "function", "name": X}`` → ``ANY`` with ``allowedFunctionNames: [X]``.

    ``parallel_tool_calls`` is accepted and ignored: Gemini has no such knob, and the
    nearest emulation (dropping every call but the first) would silently discard what the
    model asked for. The loop runs the calls of one reply one after another anyway.

    >>> tool_choice_fields({"type": "function", "name": "f"}, False)
    {'toolConfig': {'functionCallingConfig': {'mode': 'ANY', 'allowedFunctionNames': ['f']}}}
    """
    choice = check_tool_choice(tool_choice)
    if isinstance(choice, dict):
        config: dict[str, Any] = {"mode": "ANY", "allowedFunctionNames": [choice["name"]]}
    else:
        config = {"mode": _MODES[choice]}
    return {"toolConfig": {"functionCallingConfig": config}}


def build_request(
    context: Context, options: StreamOptions, *, model: str, stream: bool, max_tokens: int | None
) -> dict[str, Any]:
    """The JSON body for one call (``model`` and ``stream`` go in the URL, not here).

    ``options.max_tokens`` wins over ``max_tokens`` (the provider's default). Tool choice
    fields are sent only when tools are offered.
    """
    body: dict[str, Any] = {"contents": _contents(context.messages)}
    if context.system_prompt:
        body["systemInstruction"] = {"parts": [{"text": context.system_prompt}]}
    if context.tools:
        body["tools"] = [{"functionDeclarations": [_declaration(t) for t in context.tools]}]
        body.update(tool_choice_fields(options.tool_choice, options.parallel_tool_calls))
    config: dict[str, Any] = {}
    limit = options.max_tokens if options.max_tokens is not None else max_tokens
    if limit is not None:
        config["maxOutputTokens"] = limit
    if options.temperature is not None:
        config["temperature"] = options.temperature
    if config:
        body["generationConfig"] = config
    return body


def _declaration(spec: ToolSpec) -> dict[str, Any]:
    # parametersJsonSchema takes plain JSON Schema; the older `parameters` field takes an
    # OpenAPI subset that rejects e.g. additionalProperties, so user schemas go here as is.
    return {
        "name": spec.name,
        "description": spec.description,
        "parametersJsonSchema": spec.parameters,
    }


def _contents(messages: list[AnyMessage]) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = []
    sendable = list(sendable_messages(messages))
    for index, message in enumerate(sendable):
        if isinstance(message, AssistantMessage):
            role, parts = "model", _model_parts(message)
        elif isinstance(message, ToolResultMessage):
            role, parts = "user", _tool_result_parts(message)
        else:
            content = user_content(message, last=index == len(sendable) - 1)
            role, parts = "user", [_user_part(block) for block in content]
        if not parts:
            continue  # Gemini rejects a turn without parts (e.g. an empty failed reply)
        # Tool results and a steering message that follows them form one user turn.
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    return contents


def _user_part(block: TextContent | ImageContent) -> dict[str, Any]:
    if isinstance(block, ImageContent):
        return {"inlineData": {"mimeType": block.mime_type, "data": block.data}}
    return {"text": block.text}


def _model_parts(message: AssistantMessage) -> list[dict[str, Any]]:
    own = message.api == API
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            part: dict[str, Any] = {"text": block.text}
        elif isinstance(block, ThinkingContent):
            if not own or not (block.thinking or block.signature):
                continue  # another model's reasoning cannot be replayed as Gemini thoughts
            part = {"text": block.thinking, "thought": True}
        else:
            args = block.arguments if isinstance(block.arguments, dict) else {}
            part = {"functionCall": {"name": block.name, "args": args, "id": block.id}}
        if own and block.signature:
            part["thoughtSignature"] = block.signature
        if part.get("text") == "" and "thoughtSignature" not in part:
            continue
        parts.append(part)
    return parts


def _tool_result_parts(message: ToolResultMessage) -> list[dict[str, Any]]:
    # Gemini documents "output" for a result and "error" for a failure.
    key = "error" if message.is_error else "output"
    response = {
        "id": message.tool_call_id,
        "name": message.tool_name,
        "response": {key: message.text},
    }
    images = [_user_part(b) for b in message.content if isinstance(b, ImageContent)]
    return [{"functionResponse": response}, *images]


# --------------------------------------------------------------------------- response


class _GeminiParser(WireParser):
    """Gemini chunks (one SSE ``data:`` object each, or one whole JSON body) to events."""

    terminal = "a finishReason"
    label = _LABEL

    def __init__(self, builder: MessageBuilder, content_type: str) -> None:
        super().__init__(builder, content_type)
        self._finish_reason: str | None = None
        self._finish_message = ""
        self._usage = Usage()
        self._calls = 0
        self._call_prefix = ""
        self._replied = False  # a chunk held candidates (or feedback on the prompt)

    def on_sse(self, event: SSEEvent) -> None:
        if event.data.strip():
            self._chunk(json.loads(event.data))

    def on_json(self, body: Any) -> None:
        # Without alt=sse the API answers with a JSON array of chunks; accept it too.
        for chunk in body if isinstance(body, list) else [body]:
            self._chunk(chunk)
            if self.finished:
                return
        if not self._replied:
            self.fail_no_reply(body, "'candidates'")
            return
        self._conclude()

    def finish(self) -> list[ProviderEvent]:
        if self._sse is not None and not self.finished:
            self._handle(self._sse.flush())
            if not self.finished and self._finish_reason is not None:
                self._conclude()
        return super().finish()

    def _chunk(self, chunk: dict[str, Any]) -> None:
        if "error" in chunk:
            error = chunk["error"]
            codes = (error.get("status"), error.get("code")) if isinstance(error, dict) else ()
            self.fail(_error_text(error), self._usage, details=details_for_codes(*codes))
            return
        self._replied = self._replied or "candidates" in chunk or "promptFeedback" in chunk
        if "usageMetadata" in chunk:
            self._usage = _usage(chunk["usageMetadata"])
        self._call_prefix = self._call_prefix or str(chunk.get("responseId") or "")
        if not self.builder.message.model and chunk.get("modelVersion"):
            self.builder.message.model = str(chunk["modelVersion"])
        candidates = chunk.get("candidates") or []
        if not candidates:
            blocked = (chunk.get("promptFeedback") or {}).get("blockReason")
            if blocked:
                self.fail(
                    f"Gemini blocked the prompt (blockReason {blocked})",
                    self._usage,
                    details=ErrorDetails(reason="other"),
                )
            return
        candidate = candidates[0]
        for part in (candidate.get("content") or {}).get("parts") or []:
            self._part(part)
        if candidate.get("finishReason"):
            self._finish_reason = candidate["finishReason"]
            self._finish_message = candidate.get("finishMessage") or ""

    def _part(self, part: dict[str, Any]) -> None:
        signature = part.get("thoughtSignature")
        if "functionCall" in part:
            self._function_call(part["functionCall"], signature)
        elif "text" in part:
            kind: _Kind = "thinking" if part.get("thought") else "text"
            self._text(kind, part["text"], signature)

    def _text(self, kind: _Kind, text: str, signature: str | None) -> None:
        builder = self.builder
        self._close("text" if kind == "thinking" else "thinking")
        if not text and not signature:
            return  # an empty part (the final chunk often has one) would add an empty block
        is_open = builder.is_open(kind)
        if is_open and signature and _signature_of(builder) is not None:
            self.emit(_end(builder, kind))  # one signature per block: start another
            is_open = False
        if not is_open:
            self.emit(builder.thinking_start() if kind == "thinking" else builder.text_start())
        if text:
            delta = builder.thinking_delta if kind == "thinking" else builder.text_delta
            self.emit(delta(text))
        if signature:
            block = builder.message.content[-1]
            assert isinstance(block, (TextContent, ThinkingContent))
            block.signature = signature

    def _close(self, *kinds: _Kind) -> None:
        for kind in kinds:
            if self.builder.is_open(kind):
                self.emit(_end(self.builder, kind))

    def _function_call(self, call: dict[str, Any], signature: str | None) -> None:
        builder = self.builder
        self._close("text", "thinking")
        self._calls += 1
        call_id = call.get("id") or self._make_id()
        args = call.get("args")
        args = args if args is not None else {}
        self.emit(builder.toolcall_start(call_id, call["name"], signature=signature))
        self.emit(builder.toolcall_delta(json.dumps(args, ensure_ascii=False)))
        self.emit(builder.toolcall_end(arguments=args))

    def _make_id(self) -> str:
        # Stable for a given response (a replayed cassette parses to the same ids) and
        # unique across responses; a random stem only when the server sent no responseId.
        stem = self._call_prefix or uuid.uuid4().hex[:16]
        return f"call_{stem}_{self._calls}"

    def _conclude(self) -> None:
        reason = self._finish_reason
        if reason is None:
            return
        if reason == "STOP":
            self.done(None, self._usage)
        elif reason == "MAX_TOKENS":
            self.done("length", self._usage)
        else:
            detail = f": {self._finish_message}" if self._finish_message else ""
            self.fail(
                f"Gemini stopped with finishReason {reason}{detail}",
                self._usage,
                details=ErrorDetails(reason="other"),
            )


def _end(builder: MessageBuilder, kind: _Kind) -> ProviderEvent:
    return builder.thinking_end() if kind == "thinking" else builder.text_end()


def _signature_of(builder: MessageBuilder) -> str | None:
    block = builder.message.content[-1]
    return block.signature if isinstance(block, (TextContent, ThinkingContent)) else None


def _usage(meta: dict[str, Any]) -> Usage:
    cached = to_int(meta.get("cachedContentTokenCount"))
    thoughts = to_int(meta.get("thoughtsTokenCount"))
    return Usage(
        input=to_int(meta.get("promptTokenCount")) - cached,
        output=to_int(meta.get("candidatesTokenCount")) + thoughts,
        cache_read=cached,
        reasoning=thoughts,
    )


def _error_text(error: Any) -> str:
    if not isinstance(error, dict):
        return f"Gemini stream error: {error}"
    code = " ".join(str(error[k]) for k in ("code", "status") if error.get(k))
    head = f"Gemini stream error ({code})" if code else "Gemini stream error"
    return f"{head}: {error.get('message') or 'no message'}"


# --------------------------------------------------------------------------- provider


class GeminiProvider(HTTPProvider):
    """Streams replies from the Gemini API (``generativelanguage.googleapis.com``).

    Args:
        model_id: e.g. ``gemini-2.5-flash`` (a leading ``models/`` is accepted).
        api_key: default ``GEMINI_API_KEY``, else ``GOOGLE_API_KEY``; sent as the
            ``x-goog-api-key`` header. Without a key and without ``base_url``,
            :class:`~openprogram.errors.ConfigurationError` names both variables.
        base_url: default ``GOOGLE_GEMINI_BASE_URL`` (as google-genai reads it), else
            ``https://generativelanguage.googleapis.com``. The root, as google-genai's
            ``http_options`` take it, is joined as ``{root}/v1beta/models/...``; a base
            URL whose path ends in a version (``/v1beta``, ``/v1``) as
            ``{base}/models/...``.
        client, timeout, max_tokens, headers: see
            :class:`~openprogram.providers._http.HTTPProvider`.
        stream: ``streamGenerateContent?alt=sse`` (default) or one ``generateContent`` body.

    Example::

        provider = GeminiProvider("gemini-2.5-flash")
        async for event in provider.stream(context, StreamOptions()):
            ...
    """

    api = API
    label = _LABEL
    request_mapping = staticmethod(build_request)
    parser_class = _GeminiParser
    env_vars = KEY_ENV_VARS
    default_base_url = DEFAULT_BASE_URL
    base_url_env = "GOOGLE_GEMINI_BASE_URL"
    api_version = "v1beta"

    def endpoint(self) -> str:
        model = self.model_id.removeprefix("models/")
        if self.streaming:
            return f"{self.base_url}/models/{model}:streamGenerateContent?alt=sse"
        return f"{self.base_url}/models/{model}:generateContent"

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-goog-api-key": api_key}


parse_response = GeminiProvider.parse_response
"""The normalized assistant message for a whole recorded response body: a JSON body,
a whole ``alt=sse`` stream, or an error body (``status`` >= 400).

>>> parse_response('{"error": {"code": 404, "message": "no such model"}}',
...                content_type="application/json", status=404).error_message
'Gemini API error: HTTP 404 (404): no such model'
"""
