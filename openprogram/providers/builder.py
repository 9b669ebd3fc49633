"""Build one assistant message and the provider stream events that describe it.

Every provider (the scripted one and the five wire adapters) assembles its reply through a
:class:`MessageBuilder`, so the events are uniform: each method mutates the message being
built (``partial``, the same object throughout) and returns the event to yield.

Blocks are opened by a *key* of the adapter's choosing (a wire content index, a tool call
index) so interleaved blocks work; without a key the last opened block of that kind is used.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from openprogram.events import (
    ProviderDone,
    ProviderError,
    ProviderStart,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from openprogram.types import (
    AssistantMessage,
    ErrorDetails,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    now_ms,
)

__all__ = ["MessageBuilder", "parse_arguments"]


def parse_arguments(text: str) -> Any:
    """Arguments JSON text as sent by a model: ``""`` is ``{}``; text that does not parse
    is returned unchanged (the loop then tells the model it was not a JSON object), and so
    is JSON nested too deeply to parse."""
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


class MessageBuilder:
    """Accumulates one :class:`AssistantMessage` and returns the matching events.

    ``scrub``, when given, is applied to every error text (the HTTP adapters pass one that
    masks their credentials and cuts long texts).
    """

    __slots__ = ("_args", "_last", "_open", "_scrub", "message")

    def __init__(self, *, api: str, model: str, scrub: Callable[[str], str] | None = None) -> None:
        # positional: a builder is made per model call, and keywords cost a third more here
        message = AssistantMessage([], "assistant", "stop", None, Usage(), api, model, now_ms())
        self.message = message
        self._scrub = scrub
        self._open: dict[Any, int] = {}
        self._args: dict[int, list[str]] = {}
        self._last: dict[str, Any] = {}

    # -- helpers -------------------------------------------------------------------------

    def _index(self, kind: str, key: Any) -> int:
        if key is None:
            key = self._last.get(kind)
        return self._open[(kind, key)]

    def _add(self, kind: str, key: Any, block: Any) -> int:
        index = len(self.message.content)
        self.message.content.append(block)
        self._open[(kind, key)] = index
        self._last[kind] = key
        return index

    def is_open(self, kind: Literal["text", "thinking", "toolcall"], key: Any = None) -> bool:
        if key is None:
            key = self._last.get(kind)
        return (kind, key) in self._open

    # -- events --------------------------------------------------------------------------

    def start(self) -> ProviderStart:
        return ProviderStart(partial=self.message)

    def text_start(self, key: Any = None) -> TextStart:
        index = self._add("text", key, TextContent(""))
        return TextStart(content_index=index, partial=self.message)

    def text_delta(self, delta: str, key: Any = None) -> TextDelta:
        index = self._index("text", key)
        block = self.message.content[index]
        assert isinstance(block, TextContent)
        block.text += delta
        return TextDelta(content_index=index, delta=delta, partial=self.message)

    def text_end(self, key: Any = None, *, signature: str | None = None) -> TextEnd:
        if key is None:
            key = self._last.get("text")
        index = self._open.pop(("text", key))
        block = self.message.content[index]
        assert isinstance(block, TextContent)
        if signature is not None:
            block.signature = signature
        return TextEnd(content_index=index, content=block.text, partial=self.message)

    def thinking_start(self, key: Any = None, *, redacted: bool = False) -> ThinkingStart:
        index = self._add("thinking", key, ThinkingContent("", redacted=redacted))
        return ThinkingStart(content_index=index, partial=self.message)

    def thinking_delta(self, delta: str, key: Any = None) -> ThinkingDelta:
        index = self._index("thinking", key)
        block = self.message.content[index]
        assert isinstance(block, ThinkingContent)
        block.thinking += delta
        return ThinkingDelta(content_index=index, delta=delta, partial=self.message)

    def thinking_signature(self, signature: str, key: Any = None) -> None:
        block = self.message.content[self._index("thinking", key)]
        assert isinstance(block, ThinkingContent)
        block.signature = (block.signature or "") + signature

    def thinking_end(self, key: Any = None) -> ThinkingEnd:
        if key is None:
            key = self._last.get("thinking")
        index = self._open.pop(("thinking", key))
        block = self.message.content[index]
        assert isinstance(block, ThinkingContent)
        return ThinkingEnd(content_index=index, content=block.thinking, partial=self.message)

    def toolcall_start(
        self, id: str, name: str, key: Any = None, *, signature: str | None = None
    ) -> ToolCallStart:
        index = self._add("toolcall", key, ToolCall(id, name, {}, signature=signature))
        self._args[index] = []
        return ToolCallStart(content_index=index, partial=self.message)

    def toolcall_delta(self, delta: str, key: Any = None) -> ToolCallDelta:
        index = self._index("toolcall", key)
        self._args[index].append(delta)
        return ToolCallDelta(content_index=index, delta=delta, partial=self.message)

    def toolcall_end(self, key: Any = None, *, arguments: Any = None) -> ToolCallEnd:
        """Close the tool call; its arguments are the streamed JSON text parsed, or
        ``arguments`` when the wire delivered them whole."""
        if key is None:
            key = self._last.get("toolcall")
        index = self._open.pop(("toolcall", key))
        call = self.message.content[index]
        assert isinstance(call, ToolCall)
        parts = self._args.pop(index, [])
        call.arguments = arguments if arguments is not None else parse_arguments("".join(parts))
        return ToolCallEnd(content_index=index, tool_call=call, partial=self.message)

    # -- whole blocks --------------------------------------------------------------------

    def add_text(self, text: str) -> None:
        """Add a text block that came whole: what ``text_start``, its deltas and
        ``text_end`` build, without their events (for a caller that reads none, see
        :meth:`~openprogram.providers.base.ReadyStream.ready`)."""
        self.message.content.append(TextContent(text))

    def add_thinking(self, thinking: str) -> None:
        """Add a reasoning block that came whole (see :meth:`add_text`)."""
        self.message.content.append(ThinkingContent(thinking))

    def add_toolcall(self, id: str, name: str, arguments: Any) -> None:
        """Add a tool call that came whole, its arguments parsed (see :meth:`add_text`)."""
        self.message.content.append(ToolCall(id, name, arguments))

    def close_open_blocks(self) -> list[TextEnd | ThinkingEnd | ToolCallEnd]:
        """End every block still open (some wires do not close blocks explicitly)."""
        events: list[TextEnd | ThinkingEnd | ToolCallEnd] = []
        for kind, key in sorted(self._open, key=lambda k: self._open[k]):
            if kind == "text":
                events.append(self.text_end(key))
            elif kind == "thinking":
                events.append(self.thinking_end(key))
            else:
                events.append(self.toolcall_end(key))
        return events

    def done(
        self,
        stop_reason: Literal["stop", "length", "toolUse"] | None = None,
        usage: Usage | None = None,
    ) -> ProviderDone:
        """Finish normally. Without an explicit reason: ``toolUse`` when the message holds
        tool calls, else ``stop``."""
        if usage is not None:
            self.message.usage = usage
        if stop_reason is None:
            stop_reason = "stop"
            for block in self.message.content:
                if isinstance(block, ToolCall):
                    stop_reason = "toolUse"
                    break
        self.message.stop_reason = stop_reason
        return ProviderDone(reason=stop_reason, message=self.message)

    def error(
        self,
        error_message: str,
        *,
        aborted: bool = False,
        usage: Usage | None = None,
        details: ErrorDetails | None = None,
    ) -> ProviderError:
        """Finish with a failure (or a cancellation when ``aborted``). ``details`` says what
        kind of failure it was (:class:`~openprogram.types.ErrorDetails`); a provider sets
        them on every error, and leaves them out of a cancellation."""
        if usage is not None:
            self.message.usage = usage
        reason: Literal["error", "aborted"] = "aborted" if aborted else "error"
        self.message.stop_reason = reason
        self.message.error_message = (
            self._scrub(error_message) if self._scrub is not None else error_message
        )
        self.message.error_details = details
        return ProviderError(reason=reason, error=self.message)
