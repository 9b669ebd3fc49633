"""Agent events, provider stream events, and the async stream that carries them.

Two vocabularies, both closed and tagged by ``type``:

* **Agent events** (what a run emits to subscribers): ``agent_start``, ``agent_end``,
  ``turn_start``, ``turn_end``, ``message_start``, ``message_update``, ``message_end``,
  ``tool_execution_start``, ``tool_execution_update``, ``tool_execution_end``. Each carries
  its position (the fields of :class:`AgentEventBase`): ``depth`` (0 for the outer exec,
  +1 per nested exec), ``round`` (the model call within its exec, from 1; 0 before the
  first call), ``run_id`` (the same on every event of one run, unique per run: it tells
  apart runs that go on side by side) and ``parent_run_id`` (the run whose tool started
  this one, for a nested exec; else None), so a subscriber can rebuild the tree of runs.
* **Provider stream events** (what a provider yields for one model call): ``start``;
  ``text_*``, ``thinking_*`` and ``toolcall_*`` start/delta/end; ``done``; ``error``.
  Tool-call arguments arrive as partial JSON text in ``toolcall_delta``.

Events are slotted, keyword-only dataclasses built only when somebody listens; ``partial``
is the message being assembled (the same object throughout one call, not a copy).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeAlias, TypeVar

from openprogram.types import AnyMessage, AssistantMessage, ToolCall, ToolResultMessage

__all__ = [
    "AgentEnd",
    "AgentEvent",
    "AgentEventBase",
    "AgentStart",
    "EndReason",
    "EventStream",
    "MessageEnd",
    "MessageOrigin",
    "MessageStart",
    "MessageUpdate",
    "ProviderDone",
    "ProviderError",
    "ProviderEvent",
    "ProviderStart",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "ThinkingDelta",
    "ThinkingEnd",
    "ThinkingStart",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolErrorKind",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "TurnEnd",
    "TurnStart",
]

EndReason: TypeAlias = Literal["stop", "error", "aborted", "cap"]
"""Why a run ended: ``stop`` (text-only reply, nothing queued), ``error`` (an error stop or
something raised), ``aborted`` (cancelled) or ``cap`` (the round cap was reached)."""

ToolErrorKind: TypeAlias = Literal[
    "unknown_tool", "invalid_arguments", "raised", "returned", "cancelled", "skipped"
]
"""Why a tool call's result is an error: no such tool offered, arguments that fail its
schema, the tool raised, the tool returned an error result itself, it was cancelled while
running (an abort), or it never ran (``skipped``: steering, an abort or an error stop)."""

MessageOrigin: TypeAlias = Literal["prompt", "steering", "follow_up"]
"""How a user message entered a run: its prompt, a steering message (delivered after the
current tool call or round), or a follow-up (delivered when the model would finish; an
``exec(choices=)`` re-ask enters this way too)."""


# --------------------------------------------------------------------------- provider


@dataclass(slots=True, kw_only=True)
class ProviderStart:
    """First event of a model call; ``partial`` is the empty message the call fills."""

    partial: AssistantMessage
    type: Literal["start"] = "start"


@dataclass(slots=True, kw_only=True)
class TextStart:
    """A text block opened at ``partial.content[content_index]``."""

    content_index: int
    partial: AssistantMessage
    type: Literal["text_start"] = "text_start"


@dataclass(slots=True, kw_only=True)
class TextDelta:
    """Text appended to block ``content_index``; ``delta`` is the new piece."""

    content_index: int
    delta: str
    partial: AssistantMessage
    type: Literal["text_delta"] = "text_delta"


@dataclass(slots=True, kw_only=True)
class TextEnd:
    """Text block ``content_index`` is complete; ``content`` is its whole text."""

    content_index: int
    content: str
    partial: AssistantMessage
    type: Literal["text_end"] = "text_end"


@dataclass(slots=True, kw_only=True)
class ThinkingStart:
    """A reasoning block opened at ``partial.content[content_index]``."""

    content_index: int
    partial: AssistantMessage
    type: Literal["thinking_start"] = "thinking_start"


@dataclass(slots=True, kw_only=True)
class ThinkingDelta:
    """Reasoning appended to block ``content_index``; ``delta`` is the new piece."""

    content_index: int
    delta: str
    partial: AssistantMessage
    type: Literal["thinking_delta"] = "thinking_delta"


@dataclass(slots=True, kw_only=True)
class ThinkingEnd:
    """Reasoning block ``content_index`` is complete; ``content`` is its whole text."""

    content_index: int
    content: str
    partial: AssistantMessage
    type: Literal["thinking_end"] = "thinking_end"


@dataclass(slots=True, kw_only=True)
class ToolCallStart:
    """A tool call opened at ``partial.content[content_index]`` (its id and name known)."""

    content_index: int
    partial: AssistantMessage
    type: Literal["toolcall_start"] = "toolcall_start"


@dataclass(slots=True, kw_only=True)
class ToolCallDelta:
    """Argument JSON text for call ``content_index``; parseable only once it ends."""

    content_index: int
    delta: str
    partial: AssistantMessage
    type: Literal["toolcall_delta"] = "toolcall_delta"


@dataclass(slots=True, kw_only=True)
class ToolCallEnd:
    """Tool call ``content_index`` is complete; ``tool_call`` holds its parsed arguments."""

    content_index: int
    tool_call: ToolCall
    partial: AssistantMessage
    type: Literal["toolcall_end"] = "toolcall_end"


@dataclass(slots=True, kw_only=True)
class ProviderDone:
    """Last event of a call that succeeded; ``message`` is final, ``reason`` its stop."""

    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage
    type: Literal["done"] = "done"


@dataclass(slots=True, kw_only=True)
class ProviderError:
    """Last event of a call that failed or was cancelled; ``error`` is the final message."""

    reason: Literal["error", "aborted"]
    error: AssistantMessage
    """Its ``stop_reason`` is ``error`` or ``aborted`` and its ``error_message`` says why."""
    type: Literal["error"] = "error"


ProviderEvent: TypeAlias = (
    ProviderStart
    | TextStart
    | TextDelta
    | TextEnd
    | ThinkingStart
    | ThinkingDelta
    | ThinkingEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | ProviderDone
    | ProviderError
)

# --------------------------------------------------------------------------- agent


@dataclass(slots=True, kw_only=True)
class AgentEventBase:
    """What every agent event carries: its ``type`` tag and where in the tree of runs it
    happened (see the module docstring)."""

    type: str
    """The event's tag, fixed by its class (``agent_start``, ``turn_end``, ...)."""
    depth: int = 0
    """0 for the outer exec, +1 per nested exec."""
    round: int = 0
    """The model call within its exec, from 1 (0 before the first call)."""
    run_id: str = ""
    """The same on every event of one run, unique per run."""
    parent_run_id: str | None = None
    """The run whose tool started this one (a nested exec); else None."""


@dataclass(slots=True, kw_only=True)
class AgentStart(AgentEventBase):
    """A run began: the first event of its depth (``round`` is 0)."""

    type: Literal["agent_start"] = "agent_start"


@dataclass(slots=True, kw_only=True)
class AgentEnd(AgentEventBase):
    """A run ended: exactly one, last; ``reason`` says why, ``messages`` what it added."""

    reason: EndReason
    messages: list[AnyMessage]
    """The messages this run added (prompt, replies, tool results)."""
    type: Literal["agent_end"] = "agent_end"


@dataclass(slots=True, kw_only=True)
class TurnStart(AgentEventBase):
    """A round began: one model call and the tools it picks (``round`` numbers it)."""

    type: Literal["turn_start"] = "turn_start"


@dataclass(slots=True, kw_only=True)
class TurnEnd(AgentEventBase):
    """A round ended; ``message`` is its reply, ``tool_results`` its tools' results."""

    message: AssistantMessage
    tool_results: list[ToolResultMessage]
    type: Literal["turn_end"] = "turn_end"


@dataclass(slots=True, kw_only=True)
class MessageStart(AgentEventBase):
    """A message begins: a user message or tool result arrives, or a reply starts."""

    message: AnyMessage
    origin: MessageOrigin | None = None
    """For a user message, how it entered the run; ``None`` for the other roles."""
    type: Literal["message_start"] = "message_start"


@dataclass(slots=True, kw_only=True)
class MessageUpdate(AgentEventBase):
    """The streaming reply grew; ``event`` is the provider event that grew ``message``."""

    message: AssistantMessage
    event: ProviderEvent
    type: Literal["message_update"] = "message_update"


@dataclass(slots=True, kw_only=True)
class MessageEnd(AgentEventBase):
    """A message is complete and in the history; ``message`` is its final form."""

    message: AnyMessage
    origin: MessageOrigin | None = None
    """For a user message, how it entered the run; ``None`` for the other roles."""
    type: Literal["message_end"] = "message_end"


@dataclass(slots=True, kw_only=True)
class ToolExecutionStart(AgentEventBase):
    """A tool call is about to run (or be skipped); ``args`` as the model sent them."""

    tool_call_id: str
    tool_name: str
    args: Any
    """The arguments as the model sent them (before coercion)."""
    type: Literal["tool_execution_start"] = "tool_execution_start"


@dataclass(slots=True, kw_only=True)
class ToolExecutionUpdate(AgentEventBase):
    """A running tool called ``on_update``; ``partial_result`` is what it passed."""

    tool_call_id: str
    tool_name: str
    args: Any
    partial_result: Any
    type: Literal["tool_execution_update"] = "tool_execution_update"


@dataclass(slots=True, kw_only=True)
class ToolExecutionEnd(AgentEventBase):
    """A tool call ended; ``result`` is what the model gets, ``is_error``/``skipped`` how."""

    tool_call_id: str
    tool_name: str
    result: ToolResultMessage
    is_error: bool
    args: Any = None
    skipped: bool = False
    """True when the call never ran (steering arrived mid-batch, or the run was aborted or
    failed before its turn); ``result`` says so."""
    error_kind: ToolErrorKind | None = None
    """Why the result is an error (``None`` when it is not)."""
    type: Literal["tool_execution_end"] = "tool_execution_end"


AgentEvent: TypeAlias = (
    AgentStart
    | AgentEnd
    | TurnStart
    | TurnEnd
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
)

# --------------------------------------------------------------------------- stream

_E = TypeVar("_E")
_R = TypeVar("_R")

_END: Any = object()


@dataclass(slots=True)
class _Failure:
    exc: BaseException


@dataclass
class EventStream(Generic[_E, _R]):
    """An async iterator of events that also carries the run's final result.

    The producer calls :meth:`push` for each event and :meth:`end` (or :meth:`fail`) once;
    the consumer iterates with ``async for`` and then awaits :meth:`result`::

        async for event in stream:
            print(event.type)
        final = await stream.result()
    """

    _queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    _result: asyncio.Future[_R] | None = None
    _done: bool = False
    task: asyncio.Task[None] | None = None
    """The producing task, when the stream was started by one (kept alive here)."""

    def _future(self) -> asyncio.Future[_R]:
        if self._result is None:
            self._result = asyncio.get_running_loop().create_future()
        return self._result

    def push(self, event: _E) -> None:
        if not self._done:
            self._queue.put_nowait(event)

    def end(self, result: _R) -> None:
        if self._done:
            return
        self._done = True
        fut = self._future()
        if not fut.done():
            fut.set_result(result)
        self._queue.put_nowait(_END)

    def fail(self, exc: BaseException) -> None:
        if self._done:
            return
        self._done = True
        fut = self._future()
        if not fut.done():
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: the iterator re-raises it
        self._queue.put_nowait(_Failure(exc))

    def __aiter__(self) -> AsyncIterator[_E]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[_E]:
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield item

    async def result(self) -> _R:
        """The final result, once the producer has ended the stream."""
        return await self._future()
