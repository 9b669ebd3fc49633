"""Reading Bedrock's answers: ConverseStream's event-stream frames, or a whole Converse
JSON body replayed as the stream events it stands for, become provider events
(:class:`BedrockParser`, used by :mod:`openprogram.providers.bedrock`)."""

from __future__ import annotations

import json
from typing import Any, Literal, TypeAlias

from openprogram.events import ProviderEvent
from openprogram.providers._errors import details_for_codes
from openprogram.providers._parsing import WireParser, to_int
from openprogram.providers.builder import MessageBuilder
from openprogram.providers.eventstream import (
    EventStreamDecoder,
    EventStreamError,
    EventStreamMessage,
)
from openprogram.types import ErrorDetails, ThinkingContent, Usage

__all__ = ["EVENT_STREAM", "LABEL", "BedrockParser"]

LABEL = "Bedrock"
EVENT_STREAM = "application/vnd.amazon.eventstream"

_Kind: TypeAlias = Literal["text", "thinking", "toolcall"]
_STOP: dict[str, Literal["stop", "length", "toolUse"]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}


class BedrockParser(WireParser):
    """ConverseStream events (or a whole Converse JSON body) to provider events."""

    terminal = "messageStop"
    label = LABEL

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
