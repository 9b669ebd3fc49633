"""Amazon Bedrock Converse / ConverseStream adapter.

Wire facts this module relies on (see ``docs/providers.md``):

* ``POST /model/{modelId}/converse`` answers one JSON body; ``/converse-stream`` answers the
  binary AWS event-stream framing (``application/vnd.amazon.eventstream``), decoded by
  :mod:`openprogram.providers._eventstream`. Both go through one event handler: a whole
  Converse body is replayed as the stream events it stands for.
* Auth is ``Authorization: Bearer`` with a Bedrock API key (``AWS_BEARER_TOKEN_BEDROCK``),
  else SigV4 signed by botocore (the optional ``aws`` extra) with the usual credential chain.
* ``toolChoice`` has ``auto``, ``any`` and ``tool`` but no ``none``, and there is no parallel
  knob; see :func:`tool_choice_fields` for what is sent instead.
* An error inside a 200 stream is a frame with ``:message-type: exception`` (e.g.
  ``throttlingException``); it ends the reply with ``stop_reason="error"``.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Literal, TypeAlias
from urllib.parse import quote

import httpx2

from openprogram.errors import ConfigurationError
from openprogram.events import ProviderEvent
from openprogram.providers._errors import details_for_codes
from openprogram.providers._eventstream import (
    EventStreamDecoder,
    EventStreamError,
    EventStreamMessage,
)
from openprogram.providers._http import (
    HTTPProvider,
    sendable_messages,
    tool_call_text,
    tool_result_text,
    user_content,
)
from openprogram.providers._parsing import WireParser, parse_body, to_int
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

__all__ = ["API", "BedrockProvider", "build_request", "parse_response", "tool_choice_fields"]

API = "bedrock"
_LABEL = "Bedrock"
TOKEN_ENV_VAR = "AWS_BEARER_TOKEN_BEDROCK"
REGION_ENV_VARS = ("AWS_REGION", "AWS_DEFAULT_REGION")
EVENT_STREAM = "application/vnd.amazon.eventstream"

_Kind: TypeAlias = Literal["text", "thinking", "toolcall"]
_STOP: dict[str, Literal["stop", "length", "toolUse"]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}


# --------------------------------------------------------------------------- request


def tool_choice_fields(tool_choice: ToolChoice, parallel_tool_calls: bool | None) -> dict[str, Any]:
    """The request-body fields for ``tool_choice``: ``toolConfig.toolChoice``.

    ``"auto"`` → ``{"toolConfig": {"toolChoice": {"auto": {}}}}``, ``"required"`` →
    ``{"any": {}}`` and ``{"type": "function", "name": X}`` → ``{"tool": {"name": X}}``;
    :func:`build_request` adds the ``tools`` list next to it in the same ``toolConfig``.

    ``"none"`` → ``{}``, meaning *send no toolConfig at all*: Converse has no "none" choice,
    and leaving the tools out is the only way to stop the model from calling them (it is
    what the recorded real request did). Bedrock then rejects a history holding toolUse or
    toolResult blocks, so :func:`build_request` turns those blocks into plain text for that
    call; the model still sees what was called and what came back.

    ``parallel_tool_calls`` is accepted and ignored: Converse has no such knob, and dropping
    all but the first call would silently discard what the model asked for. The loop runs
    the calls of one reply one after another anyway.

    >>> tool_choice_fields("required", None)
    {'toolConfig': {'toolChoice': {'any': {}}}}
    >>> tool_choice_fields("none", False)
    {}
    """
    choice = check_tool_choice(tool_choice)
    if isinstance(choice, dict):
        return {"toolConfig": {"toolChoice": {"tool": {"name": choice["name"]}}}}
    if choice == "none":
        return {}
    return {"toolConfig": {"toolChoice": {"auto": {}} if choice == "auto" else {"any": {}}}}


def build_request(
    context: Context, options: StreamOptions, *, model: str, stream: bool, max_tokens: int | None
) -> dict[str, Any]:
    """The JSON body for one Converse call (``model`` and ``stream`` go in the URL).

    ``options.max_tokens`` wins over ``max_tokens`` (the provider's default). Without a
    ``toolConfig`` (no tools, or ``tool_choice="none"``), earlier tool calls and results are
    sent as text, because Bedrock refuses toolUse/toolResult blocks without one.
    """
    body: dict[str, Any] = {}
    fields = tool_choice_fields(options.tool_choice, options.parallel_tool_calls)
    if context.tools and fields:
        tools = [_tool_spec(t.name, t.description, t.parameters) for t in context.tools]
        body["toolConfig"] = {"tools": tools, **fields["toolConfig"]}
    body["messages"] = _messages(context.messages, as_text="toolConfig" not in body)
    if context.system_prompt:
        body["system"] = [{"text": context.system_prompt}]
    inference: dict[str, Any] = {}
    limit = options.max_tokens if options.max_tokens is not None else max_tokens
    if limit is not None:
        inference["maxTokens"] = limit
    if options.temperature is not None:
        inference["temperature"] = options.temperature
    if inference:
        body["inferenceConfig"] = inference
    return body


def _tool_spec(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "inputSchema": {"json": parameters}}
    if description:
        spec["description"] = description  # Bedrock rejects an empty description
    return {"toolSpec": spec}


def _messages(messages: list[AnyMessage], *, as_text: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    sendable = list(sendable_messages(messages))
    for index, message in enumerate(sendable):
        if isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message, as_text)
        elif isinstance(message, ToolResultMessage):
            role, blocks = "user", [_tool_result_block(message, as_text)]
        else:
            content = user_content(message, last=index == len(sendable) - 1)
            role, blocks = "user", [_user_block(b) for b in content]
        if not blocks:
            continue
        # Converse insists on alternating roles: tool results and a steering message that
        # follows them are one user turn.
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _user_block(block: TextContent | ImageContent) -> dict[str, Any]:
    if isinstance(block, ImageContent):
        image_format = block.mime_type.rpartition("/")[2].lower()
        return {"image": {"format": image_format, "source": {"bytes": block.data}}}
    return {"text": block.text}


def _assistant_blocks(message: AssistantMessage, as_text: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:  # Converse rejects blank text blocks
                blocks.append({"text": block.text})
        elif isinstance(block, ThinkingContent):
            # Reasoning is replayable only to Bedrock itself, with its signature.
            if message.api == API and (block.thinking or block.signature):
                blocks.append({"reasoningContent": _reasoning(block)})
        else:
            blocks.append(_tool_use_block(block, as_text))
    return blocks


def _reasoning(block: ThinkingContent) -> dict[str, Any]:
    if block.redacted:
        return {"redactedContent": block.signature or ""}
    text: dict[str, Any] = {"text": block.thinking}
    if block.signature:
        text["signature"] = block.signature
    return {"reasoningText": text}


def _tool_use_block(call: ToolCall, as_text: bool) -> dict[str, Any]:
    if as_text:
        return {"text": tool_call_text(call)}
    args = call.arguments if isinstance(call.arguments, dict) else {}
    return {"toolUse": {"toolUseId": call.id, "name": call.name, "input": args}}


def _tool_result_block(message: ToolResultMessage, as_text: bool) -> dict[str, Any]:
    if as_text:
        return {"text": tool_result_text(message)}
    content: list[dict[str, Any]] = [_user_block(b) for b in message.content]
    return {
        "toolResult": {
            "toolUseId": message.tool_call_id,
            "content": content or [{"text": ""}],
            "status": "error" if message.is_error else "success",
        }
    }


# --------------------------------------------------------------------------- response


class _BedrockParser(WireParser):
    """ConverseStream events (or a whole Converse JSON body) to provider events."""

    terminal = "messageStop"
    label = _LABEL

    def __init__(self, builder: MessageBuilder, content_type: str) -> None:
        super().__init__(builder, content_type)
        is_stream = content_type.split(";", 1)[0].strip().lower() == EVENT_STREAM
        self._frames = EventStreamDecoder() if is_stream else None
        self._kinds: dict[int, _Kind] = {}
        self._stop_reason: str | None = None
        self._usage = Usage()

    def feed(self, chunk: bytes) -> list[ProviderEvent]:
        if self._frames is None:
            return super().feed(chunk)
        for frame in self._decode(chunk):
            self._guarded(self._on_frame, frame)
            if self.finished:
                break  # an exception frame ends the reply
        return self._take()

    def _decode(self, chunk: bytes) -> list[EventStreamMessage]:
        if self.finished or self._frames is None:
            return []
        try:
            return self._frames.feed(chunk)
        except EventStreamError as exc:
            self.fail(f"Bedrock event stream is corrupt: {exc}", self._usage)
            return []

    def finish(self) -> list[ProviderEvent]:
        if self._frames is None:
            return super().finish()
        if not self.finished:
            try:
                self._frames.close()
            except EventStreamError as exc:  # cut inside a message: a dropped connection
                self.fail(
                    f"Bedrock event stream is corrupt: {exc}",
                    self._usage,
                    details=ErrorDetails(reason="stream", retryable=True),
                )
        if not self.finished:
            self._conclude()
        if not self.finished:
            self.fail(
                f"Bedrock stream ended before {self.terminal}",
                self._usage,
                details=ErrorDetails(reason="stream", retryable=True),
            )
        return self._take()

    def on_json(self, body: Any) -> None:
        output = body.get("output") if isinstance(body, dict) else None
        if not (isinstance(output, dict) and isinstance(output.get("message"), dict)):
            self.fail_no_reply(body, "'output'")
            return
        if "stopReason" not in body:
            self.fail_no_reply(body, "'stopReason'")
            return
        # Replay the whole Converse body as the stream events it stands for.
        blocks = output["message"].get("content") or []
        for index, block in enumerate(blocks):
            for event_type, payload in _block_events(index, block):
                self.on_event(event_type, payload)
        if "stopReason" in body:
            self.on_event("messageStop", {"stopReason": body["stopReason"]})
        self.on_event("metadata", {"usage": body.get("usage") or {}})
        self._conclude()

    def _on_frame(self, frame: EventStreamMessage) -> None:
        if frame.message_type == "event":
            payload = json.loads(frame.payload) if frame.payload else {}
            self.on_event(str(frame.headers.get(":event-type", "")), payload)
        else:
            headers = frame.headers
            name = headers.get(":exception-type") or headers.get(":error-code")
            self.fail(_exception_text(frame), self._usage, details=details_for_codes(name))

    def on_event(self, event_type: str, payload: dict[str, Any]) -> None:
        """Handle one ConverseStream event (the ``"p"`` padding field is never read)."""
        index = to_int(payload.get("contentBlockIndex"))
        if event_type == "contentBlockStart":
            tool = (payload.get("start") or {}).get("toolUse")
            if tool:
                self._open(index, "toolcall", tool)
        elif event_type == "contentBlockDelta":
            self._delta(index, payload.get("delta") or {})
        elif event_type == "contentBlockStop":
            self._close(index)
        elif event_type == "messageStop":
            self._stop_reason = str(payload.get("stopReason"))
        elif event_type == "metadata":
            self._usage = _usage(payload.get("usage") or {})

    def _open(self, index: int, kind: _Kind, tool: dict[str, Any] | None = None) -> None:
        if index in self._kinds:
            return
        self._kinds[index] = kind
        builder = self.builder
        if kind == "toolcall":
            tool = tool or {}
            self.emit(
                builder.toolcall_start(tool.get("toolUseId", ""), tool.get("name", ""), index)
            )
        elif kind == "thinking":
            self.emit(builder.thinking_start(index))
        else:
            self.emit(builder.text_start(index))

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        builder = self.builder
        if delta.get("text"):  # gpt-oss streams an empty text block: never open one
            self._open(index, "text")
            self.emit(builder.text_delta(delta["text"], index))
        elif "toolUse" in delta:
            self._open(index, "toolcall")
            self.emit(builder.toolcall_delta(str(delta["toolUse"].get("input") or ""), index))
        elif "reasoningContent" in delta:
            self._reasoning(index, delta["reasoningContent"])

    def _reasoning(self, index: int, reasoning: dict[str, Any]) -> None:
        builder = self.builder
        if "redactedContent" in reasoning:
            self._open(index, "thinking")
            block = builder.message.content[-1]
            if isinstance(block, ThinkingContent):
                # Redacted reasoning has no text; its opaque data rides in `signature` so
                # the block can be sent back unchanged.
                block.redacted = True
                block.signature = (block.signature or "") + str(reasoning["redactedContent"])
            return
        if reasoning.get("text"):
            self._open(index, "thinking")
            self.emit(builder.thinking_delta(reasoning["text"], index))
        if reasoning.get("signature"):
            self._open(index, "thinking")
            builder.thinking_signature(reasoning["signature"], index)

    def _close(self, index: int) -> None:
        kind = self._kinds.get(index)
        if kind is None or not self.builder.is_open(kind, index):
            return
        builder = self.builder
        if kind == "toolcall":
            self.emit(builder.toolcall_end(index))
        elif kind == "thinking":
            self.emit(builder.thinking_end(index))
        else:
            self.emit(builder.text_end(index))

    def _conclude(self) -> None:
        if self._stop_reason is None:
            return
        reason = _STOP.get(self._stop_reason)
        if reason is None:
            self.fail(
                f"Bedrock stopped with stopReason {self._stop_reason}",
                self._usage,
                details=ErrorDetails(reason="other"),
            )
        else:
            self.done(reason, self._usage)


def _block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The stream events equivalent to one block of a whole Converse reply."""
    at: dict[str, Any] = {"contentBlockIndex": index}
    events: list[tuple[str, dict[str, Any]]] = []
    if "toolUse" in block:
        tool = block["toolUse"]
        start = {"toolUse": {"toolUseId": tool.get("toolUseId"), "name": tool.get("name")}}
        events.append(("contentBlockStart", {**at, "start": start}))
        delta: dict[str, Any] = {"toolUse": {"input": json.dumps(tool.get("input") or {})}}
    elif "reasoningContent" in block:
        reasoning = block["reasoningContent"]
        delta = {"reasoningContent": reasoning.get("reasoningText") or reasoning}
    else:
        delta = {"text": block.get("text") or ""}
    events.append(("contentBlockDelta", {**at, "delta": delta}))
    events.append(("contentBlockStop", at))
    return events


def _usage(usage: dict[str, Any]) -> Usage:
    return Usage(
        input=to_int(usage.get("inputTokens")),
        output=to_int(usage.get("outputTokens")),
        cache_read=to_int(usage.get("cacheReadInputTokens")),
        cache_write=to_int(usage.get("cacheWriteInputTokens")),
    )


def _exception_text(frame: EventStreamMessage) -> str:
    headers = frame.headers
    name = headers.get(":exception-type") or headers.get(":error-code") or "error"
    try:
        payload = json.loads(frame.payload) if frame.payload else {}
    except (ValueError, RecursionError):
        payload = None
    if not isinstance(payload, dict):
        payload = {"message": frame.payload.decode("utf-8", "replace")}
    message = payload.get("message") or payload.get("Message") or headers.get(":error-message")
    text = f"Bedrock stream error ({name}): {message or 'no message'}"
    if payload.get("originalStatusCode"):
        # modelStreamErrorException: the model's own failure, with its status.
        text += f" (model status {payload['originalStatusCode']}"
        text += f": {payload.get('originalMessage') or ''})"
    return text


def parse_response(body: bytes | str, *, content_type: str, status: int = 200) -> AssistantMessage:
    """The normalized assistant message for a whole recorded response body: a Converse JSON
    body, a whole ConverseStream event-stream body (bytes), or an error body.

    >>> parse_response('{"message": "The provided model identifier is invalid."}',
    ...                content_type="application/json", status=400).error_message
    'Bedrock API error: HTTP 400: The provided model identifier is invalid.'
    """
    builder = MessageBuilder(api=API, model="")
    parser = _BedrockParser(builder, content_type)
    return parse_body(parser, body, status=status)


# --------------------------------------------------------------------------- provider


class BedrockProvider(HTTPProvider):
    """Streams replies from Amazon Bedrock's Converse API.

    Args:
        model_id: a model or inference-profile id, e.g. ``us.amazon.nova-micro-v1:0``.
        region: default ``AWS_REGION``, else ``AWS_DEFAULT_REGION``, else the botocore
            profile's region.
        bearer_token: a Bedrock API key; default ``AWS_BEARER_TOKEN_BEDROCK``. Without one,
            requests are signed with SigV4 from botocore's credential chain
            (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, ...), which
            needs ``pip install openprogram[aws]``.
        base_url: default ``https://bedrock-runtime.{region}.amazonaws.com``. With a custom
            one, missing credentials mean unsigned requests instead of an error.
        client, timeout, max_tokens, headers: see
            :class:`~openprogram.providers._http.HTTPProvider`.
        stream: ConverseStream (default) or one Converse JSON body.

    Raises:
        ConfigurationError: no region, or no credentials (naming the variables to set).
    """

    api = API
    label = _LABEL
    env_vars = (TOKEN_ENV_VAR,)
    key_argument = "bearer_token"

    def __init__(
        self,
        model_id: str,
        *,
        region: str | None = None,
        bearer_token: str | None = None,
        base_url: str | None = None,
        client: httpx2.AsyncClient | None = None,
        timeout: float | httpx2.Timeout = 60.0,
        max_tokens: int | None = None,
        stream: bool = True,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.region = _resolve_region(region, required=base_url is None)
        # Passing the resolved URL as "custom" makes the base class return None instead
        # of raising when there is no bearer token: SigV4 may still apply (checked below).
        super().__init__(
            model_id,
            api_key=bearer_token,
            base_url=base_url or f"https://bedrock-runtime.{self.region}.amazonaws.com",
            client=client,
            timeout=timeout,
            max_tokens=max_tokens,
            stream=stream,
            headers=headers,
        )
        self._credentials: Any = None
        if self._api_key is None:
            self._credentials = _load_credentials(required=base_url is None)

    def endpoint(self) -> str:
        action = "converse-stream" if self.streaming else "converse"
        return f"{self.base_url}/model/{quote(self.model_id, safe='')}/{action}"

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"}

    def request_body(self, context: Context, options: StreamOptions) -> dict[str, Any]:
        return build_request(
            context,
            options,
            model=self.model_id,
            stream=self.streaming,
            max_tokens=self.effective_max_tokens(options),
        )

    def parser(self, builder: MessageBuilder, content_type: str) -> WireParser:
        return _BedrockParser(builder, content_type)

    async def prepare(self, request: httpx2.Request) -> httpx2.Request:
        request.headers["accept"] = EVENT_STREAM if self.streaming else "application/json"
        if self._credentials is not None:
            # Refreshing credentials (SSO, assumed roles) may block on I/O.
            frozen = await asyncio.to_thread(self._credentials.get_frozen_credentials)
            # Known only now (and they may change on refresh): masked in error texts too.
            self._redact.add(frozen.secret_key)
            self._redact.add(frozen.token)
            request.headers.update(_sigv4_headers(request, frozen, self.region))
        return request


def _resolve_region(region: str | None, *, required: bool) -> str:
    if region:
        return region
    for name in REGION_ENV_VARS:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    try:
        import botocore.session
    except ImportError:
        found = None
    else:
        found = botocore.session.Session().get_config_variable("region")
    if found:
        return str(found)
    if not required:
        return "us-east-1"  # only used to sign requests to a custom base_url
    raise ConfigurationError(
        "Bedrock: no AWS region. Set the AWS_REGION (or AWS_DEFAULT_REGION) environment "
        "variable, or pass region=..."
    )


def _load_credentials(*, required: bool) -> Any:
    """botocore's credentials (None when unavailable and not ``required``)."""
    hint = (
        f"set {TOKEN_ENV_VAR} (a Bedrock API key), or AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) for SigV4 signing"
    )
    try:
        import botocore.exceptions
        import botocore.session
    except ImportError:
        if not required:
            return None
        raise ConfigurationError(
            f"Bedrock: no {TOKEN_ENV_VAR} is set and SigV4 signing needs botocore: "
            "pip install openprogram[aws], or " + hint
        ) from None
    try:
        credentials = botocore.session.Session().get_credentials()
    except botocore.exceptions.BotoCoreError as exc:
        raise ConfigurationError(
            f"Bedrock: AWS credentials could not be loaded ({exc}); {hint}"
        ) from exc
    if credentials is None and required:
        raise ConfigurationError(f"Bedrock: no AWS credentials found; {hint}")
    return credentials


def _sigv4_headers(request: httpx2.Request, credentials: Any, region: str) -> dict[str, str]:
    """The SigV4 headers (Authorization, X-Amz-Date, X-Amz-Security-Token) for ``request``.

    Only content-type and host are signed, so headers added later cannot break the
    signature."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    signed = AWSRequest(
        method=request.method,
        url=str(request.url),
        data=request.content,
        headers={"content-type": request.headers.get("content-type", "application/json")},
    )
    SigV4Auth(credentials, "bedrock", region).add_auth(signed)
    names = ("Authorization", "X-Amz-Date", "X-Amz-Security-Token")
    return {name: signed.headers[name] for name in names if name in signed.headers}
