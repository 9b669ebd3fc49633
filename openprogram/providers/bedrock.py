"""Amazon Bedrock Converse / ConverseStream adapter.

Wire facts this module relies on (see ``docs/providers.md``):

* ``POST /model/{modelId}/converse`` answers one JSON body; ``/converse-stream`` answers the
  binary AWS event-stream framing (``application/vnd.amazon.eventstream``), decoded by
  :mod:`openprogram.providers.eventstream`. Both go through one event handler: a whole
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
from typing import Any
from urllib.parse import quote

import httpx2

from openprogram.providers._aws import (
    TOKEN_ENV_VAR,
    load_credentials,
    resolve_region,
    sigv4_headers,
)
from openprogram.providers._bedrock_parser import EVENT_STREAM, BedrockParser
from openprogram.providers._bedrock_parser import LABEL as _LABEL
from openprogram.providers._http import (
    HTTPProvider,
    sendable_messages,
    tool_call_text,
    tool_result_text,
    user_content,
)
from openprogram.providers.base import Context, StreamOptions, ToolChoice, check_tool_choice
from openprogram.types import (
    AnyMessage,
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)

__all__ = ["API", "BedrockProvider", "build_request", "parse_response", "tool_choice_fields"]

API = "bedrock"


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
            needs ``pip install 'openprogram-sim[aws]'``.
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
    request_mapping = staticmethod(build_request)
    parser_class = BedrockParser
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
        self.region = resolve_region(region, required=base_url is None)
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
            self._credentials = load_credentials(required=base_url is None)

    def endpoint(self) -> str:
        action = "converse-stream" if self.streaming else "converse"
        return f"{self.base_url}/model/{quote(self.model_id, safe='')}/{action}"

    async def prepare(self, request: httpx2.Request) -> httpx2.Request:
        request.headers["accept"] = EVENT_STREAM if self.streaming else "application/json"
        if self._credentials is not None:
            # Refreshing credentials (SSO, assumed roles) may block on I/O.
            frozen = await asyncio.to_thread(self._credentials.get_frozen_credentials)
            # Known only now (and they may change on refresh): masked in error texts too.
            self._redact.add(frozen.secret_key)
            self._redact.add(frozen.token)
            request.headers.update(sigv4_headers(request, frozen, self.region))
        return request


parse_response = BedrockProvider.parse_response
"""The normalized assistant message for a whole recorded response body: a Converse JSON
body, a whole ConverseStream event-stream body (bytes), or an error body.

>>> parse_response('{"message": "The provided model identifier is invalid."}',
...                content_type="application/json", status=400).error_message
'Bedrock API error: HTTP 400: The provided model identifier is invalid.'
"""
