"""The tool-call loop (seed: ``tool-call-loop.md``).

Each round the provider streams one assistant message. An ``error``/``aborted`` stop ends
the run at once; tool calls are executed one by one, in order, and their results fed back
before the next round; a text-only reply finishes (unless steering messages are queued,
which keep the loop alive). When the inner loop ends, follow-up messages may start
another pass. The round cap is ``max(1, min(50, max_iterations))`` and hitting it is a
normal finish. Whatever happens, each run emits exactly one ``agent_end``, last.

Every tool call of a finished reply gets exactly one result, in call order: a call left
unrun because steering arrived is answered with :data:`SKIPPED_TEXT`, one left unrun
because the run was aborted (or ended on an error) with :data:`ABORTED_TEXT`, both marked
``skipped``. Tool-call ids are made unique (within the history) as a streamed call starts
(when a listener wants ``message_update``) or when the reply is finalized, so the history,
the events and every provider agree on them.

The loop is stateless: it works on an :class:`AgentContext` and a :class:`LoopConfig`,
emits events to a list of listeners (no event object is built when the list is empty) and
returns a :class:`LoopResult`.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from openprogram.agent._abort import AbortSignal
from openprogram.events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    EndReason,
    EventStream,
    MessageEnd,
    MessageOrigin,
    MessageStart,
    MessageUpdate,
    ProviderEvent,
    ToolErrorKind,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from openprogram.providers.base import (
    Context,
    Provider,
    ReadyStream,
    RunOptions,
    StreamOptions,
    stream_options,
)
from openprogram.tools import ArgumentsError, Tool, ToolResult, normalize_result
from openprogram.types import (
    AnyMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
    now_ms,
)

__all__ = [
    "ABORTED_TEXT",
    "MAX_INNER_ITERATIONS",
    "SKIPPED_TEXT",
    "AgentContext",
    "Listener",
    "LoopConfig",
    "LoopResult",
    "MessageSource",
    "effective_cap",
    "new_run_id",
    "run_agent_loop",
    "stream_agent_loop",
]

log = logging.getLogger("openprogram")

MAX_INNER_ITERATIONS = 50
"""Hard cap on model calls per run, against idle spinning."""

SKIPPED_TEXT = "Skipped due to queued user message."
"""The text of a skipped call's result, for the model; code checks ``result.skipped``."""

ABORTED_TEXT = "Not run: the run was aborted."
"""The text of the result of a call the run never ran because it was aborted mid-batch
(marked ``skipped`` too); code checks ``result.skipped``."""

_NOT_RUN_AFTER_ERROR = "Not run: the run ended on an error."

_PLAIN = frozenset({str, int, float, bool, type(None), dict, list})
"""Return values that are never awaitable (no ``__await__`` lookup for them)."""

_CANCELLED_TEXT = "Cancelled"
"""The result of a call that was running when its run was cancelled (it ran: no skip)."""

_RUN_ID_STEM = uuid.uuid4().hex[:8]
_run_numbers = itertools.count(1)


def new_run_id() -> str:
    """A run id unique across processes (a random stem) and within one (a counter): cheap
    enough to make for every run."""
    return f"{_RUN_ID_STEM}-{next(_run_numbers)}"


Listener = Callable[[AgentEvent], None]
"""Receives every event of a run. A listener whose ``wants_updates`` attribute is ``False``
is not sent ``message_update`` (one per streamed piece), and none is built for it."""
MessageSource = Callable[[], "list[UserMessage] | Awaitable[list[UserMessage]]"]
"""Returns (and dequeues) queued messages; sync or async."""


def effective_cap(max_iterations: int | None) -> int:
    """The number of model calls a run may make: 50 when not given, else
    ``max(1, min(50, max_iterations))``."""
    if max_iterations is None:
        return MAX_INNER_ITERATIONS
    return max(1, min(MAX_INNER_ITERATIONS, max_iterations))


@dataclass(slots=True)
class AgentContext:
    """The state one run works on. ``messages`` is the history, appended in place."""

    system_prompt: str = ""
    messages: list[AnyMessage] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    stream_message: AssistantMessage | None = None
    """The assistant message being streamed, while it is."""
    pending_tool_calls: set[str] = field(default_factory=set)
    """Ids of tool calls executing right now."""
    call_ids: set[str] | None = None
    """Every tool-call id in ``messages``, when the code that built the context knows them
    (``Runtime.exec`` passes those it found checking its history), so the next run need
    not scan the history to make a reply's ids unique. Taken by that run (and grown by
    it); ``None``: the run scans the history when a reply first has calls."""


@dataclass(slots=True, kw_only=True)
class LoopConfig:
    """How to run: the provider, the run's options and the queues to poll."""

    provider: Provider
    options: RunOptions = field(default_factory=RunOptions)
    """Checked when built; every model call's :class:`StreamOptions` carry them."""
    get_steering_messages: MessageSource | None = None
    get_follow_up_messages: MessageSource | None = None
    depth: int = 0
    parent_run_id: str | None = None
    """The run whose tool started these runs (a nested exec), for the events."""
    provider_tools: Callable[[list[Tool]], list[ToolSpec]] | None = None
    """Which specs to send to the provider, computed at the start of each pass
    (default: every tool's spec). Deferred loading hooks in here."""


@dataclass(slots=True, kw_only=True)
class LoopResult:
    """What one run of the loop produced: why it ended, the messages it added, and what it
    took off the queues without delivering. :func:`run_agent_loop` returns it;
    ``Agent.state.last_result`` and ``Runtime.last_run.loop`` keep the last one."""

    reason: EndReason
    """Why the run ended (the ``reason`` of its ``agent_end``)."""
    messages: list[AnyMessage]
    """The messages the run added, prompts included."""
    final: AssistantMessage | None
    """The last assistant message (None if the model was never called)."""
    rounds: int
    """The rounds the run opened (its ``turn_start`` events, numbered by ``round``): one
    model call each, but for a last round that ended (aborted, or something raised) before
    its call. The execs nested in its tools count their own."""
    unconsumed_steering: list[UserMessage] = field(default_factory=list)
    """Steering messages dequeued but not delivered because the cap was reached or the run
    was aborted (an :class:`Agent` queues them again)."""
    unconsumed_follow_ups: list[UserMessage] = field(default_factory=list)
    """Follow-up messages dequeued but not delivered because the cap was reached (an
    :class:`Agent` queues them again)."""
    error: BaseException | None = None
    """What raised, when the run ended because something raised."""
    run_id: str = ""
    """The id every event of the run carried."""


class _Position(TypedDict):
    """The position fields every event of one run shares (``round`` is given apart, as it
    moves): spread into each event the run builds."""

    depth: int
    run_id: str
    parent_run_id: str | None


class _Run:
    """The mutable state of one run (kept on one object so the steps stay short)."""

    __slots__ = (
        "baseline",
        "batch",
        "call_ids",
        "call_options",
        "cancel",
        "claimed",
        "config",
        "context",
        "depth",
        "error",
        "listeners",
        "message_open",
        "new_messages",
        "parent_run_id",
        "position",
        "reply_calls",
        "request",
        "round",
        "run_id",
        "task",
        "tools_by_name",
        "turn_message",
        "turn_open",
        "turn_results",
    )

    def __init__(
        self,
        context: AgentContext,
        config: LoopConfig,
        listeners: Sequence[Listener],
        cancel: asyncio.Event,
        run_id: str,
    ) -> None:
        self.context = context
        self.config = config
        self.listeners = listeners
        self.cancel = cancel
        self.run_id = run_id
        self.parent_run_id = config.parent_run_id
        self.depth = config.depth
        self.position = _Position(depth=self.depth, run_id=run_id, parent_run_id=self.parent_run_id)
        self.round = 0
        self.new_messages: list[AnyMessage] = []
        self.tools_by_name = {t.name: t for t in context.tools}
        self.turn_open = False
        self.message_open = False
        self.turn_message: AssistantMessage | None = None
        self.turn_results: list[ToolResultMessage] = []
        self.batch: list[ToolCall] = []
        """The tool calls of the open turn; ``turn_results`` answers them in order."""
        self.call_ids: set[str] | None = None
        """Every tool-call id in the history (built when a reply first has calls)."""
        self.reply_calls: list[ToolCall] = []
        """The tool calls of the last reply finalized, in order (found as their ids are
        made unique)."""
        self.call_options: StreamOptions | None = None
        """The last model call's options, renewed in place for the next call when nothing
        else holds them (see :func:`_call_options`)."""
        self.request: Context | None = None
        """What the model is shown: the same for each call of a pass (see Context)."""
        self.claimed: list[ToolCall] = []
        """Calls of the streaming reply whose ids were made unique as they started."""
        self.error: BaseException | None = None
        task = self.task = asyncio.current_task()
        """The task the run runs in (all of it: the loop starts no task of its own)."""
        self.baseline = task.cancelling() if task is not None else 0
        """The task's ``cancelling()`` when the run started: a cancellation counted before
        (the run is part of its caller's cleanup after one) is not the run's."""

    def emit(self, event: AgentEvent, listeners: list[Listener] | None = None) -> None:
        for listener in self.listeners if listeners is None else listeners:
            try:
                listener(event)
            except Exception:  # a listener never breaks the run
                log.exception("openprogram: listener %r raised on %s", listener, event.type)

    def emit_message(self, message: AnyMessage, origin: MessageOrigin | None = None) -> None:
        """message_start + message_end for a message that arrives whole."""
        if self.listeners:
            self.emit_start(message, origin)
            self.emit_end(message, origin)

    def emit_start(self, message: AnyMessage, origin: MessageOrigin | None = None) -> None:
        self.emit(MessageStart(message=message, round=self.round, origin=origin, **self.position))

    def emit_end(self, message: AnyMessage, origin: MessageOrigin | None = None) -> None:
        self.emit(MessageEnd(message=message, round=self.round, origin=origin, **self.position))

    def start_turn(self) -> None:
        self.turn_open = True
        self.turn_message = None
        self.turn_results = []
        self.batch = []
        if self.listeners:
            self.emit(TurnStart(round=self.round, **self.position))

    def end_turn(self, message: AssistantMessage, results: list[ToolResultMessage]) -> None:
        self.turn_open = False
        if self.listeners:
            self.emit(
                TurnEnd(message=message, tool_results=results, round=self.round, **self.position)
            )


async def _poll(source: MessageSource) -> list[UserMessage]:
    got = source()
    if type(got) is list:  # the common, synchronous case: no awaitable check
        return got
    return await _settle(got)


def _no_messages() -> list[UserMessage]:
    return []


async def _settle(got: Any) -> list[UserMessage]:
    """What a message source returned that is not a list: awaited if need be, as a list.
    (The loop calls a source itself and comes here only then: a round polls its queues
    twice, and an ``await`` of a coroutine each time cost more than the rest of the poll.)"""
    if inspect.isawaitable(got):
        got = await got
    return list(got)


async def run_agent_loop(
    prompts: list[AnyMessage],
    context: AgentContext,
    config: LoopConfig,
    listeners: Sequence[Listener] = (),
    cancel: asyncio.Event | None = None,
    *,
    run_id: str | None = None,
) -> LoopResult:
    """Run the loop for ``prompts`` on ``context``; always emits exactly one ``agent_end``.

    Exceptions raised by the provider or a callback end the run with reason ``error``
    (the result carries the exception). Cancellation ends it with reason ``aborted``: when
    ``cancel`` is set (an abort) the result is returned, otherwise ``CancelledError`` is
    re-raised after ``agent_end``. A ``BaseException`` that is not an ``Exception``
    (``KeyboardInterrupt``, ``SystemExit``, ...) ends the run with reason ``error`` and is
    re-raised after ``agent_end``; a ``CancelledError`` that a tool or the provider raises
    on its own, with the run not cancelled, is an error like any other (see
    :func:`_cancelled`). Setting ``cancel`` aborts the run; when it is an
    :class:`AbortSignal` (the default), that is safe from any thread and also cancels the
    run's task, so a tool awaiting something else is interrupted.

    ``run_id`` tags every event of the run (default: a fresh unique id).
    """
    signal = cancel if cancel is not None else AbortSignal()
    run = _Run(context, config, listeners, signal, run_id or new_run_id())
    if isinstance(signal, AbortSignal):
        signal.attach()
    try:
        return await _guarded_run(run, prompts)
    finally:
        if isinstance(signal, AbortSignal):
            signal.detach()


async def _guarded_run(run: _Run, prompts: list[AnyMessage]) -> LoopResult:
    """The run, with whatever raises turned into its end (see :func:`run_agent_loop`)."""
    if run.listeners:
        run.emit(AgentStart(round=0, **run.position))
    try:
        result = await _run_loop(run, prompts)
    except asyncio.CancelledError:
        final = _close_after_failure(run, "aborted", "Run cancelled")
        result = _end(run, "aborted", final=final)
        task = asyncio.current_task()
        # Our own abort (the signal is set) is a normal way to end; any other cancellation
        # belongs to the caller and propagates.
        if not run.cancel.is_set() or task is None:
            raise
        task.uncancel()
        return result
    except Exception as exc:
        run.error = exc
        final = _close_after_failure(run, "error", _described(exc))
        return _end(run, "error", final=final)
    except BaseException as exc:
        # Not an error of the run's (KeyboardInterrupt, SystemExit, pytest.fail() in a tool,
        # the harness's deadline): the run ends as on an error, then it goes on up.
        run.error = exc
        _end(run, "error", final=_close_after_failure(run, "error", _described(exc)))
        raise
    return result


def _described(exc: BaseException) -> str:
    """``Name: message``, or the name alone when the message is empty."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _cancelled(run: _Run) -> bool:
    """Whether a ``CancelledError`` caught now is a cancellation of the run (its abort, or
    the caller cancelling its task: a timeout, ``Task.cancel()``), rather than one its code
    raised on its own (a tool that awaited a task someone else cancelled, or raised it)."""
    if run.cancel.is_set():
        return True
    task = run.task
    return task is not None and task.cancelling() > run.baseline


def _stop_requested(run: _Run) -> bool:
    """Whether the run must end now, checked after each step whose code may have caught
    the run's cancellation and carried on (a tool that swallows ``CancelledError``). Its
    abort signal set: true (the run ends ``aborted``). Its task cancelled from outside (a
    timeout, ``Task.cancel()``): the cancellation is raised again, so the run ends
    ``aborted`` and it goes on to the caller (see :func:`_guarded_run`)."""
    if run.cancel.is_set():
        return True
    task = run.task
    if task is not None and task.cancelling() > run.baseline:
        raise asyncio.CancelledError("the run was cancelled while a tool ran")
    return False


def stream_agent_loop(
    prompts: list[AnyMessage],
    context: AgentContext,
    config: LoopConfig,
    cancel: asyncio.Event | None = None,
) -> EventStream[AgentEvent, LoopResult]:
    """Run the loop in a task and return its events as an async stream whose
    ``result()`` is the :class:`LoopResult`::

        stream = stream_agent_loop([UserMessage.of("hi")], AgentContext(), config)
        async for event in stream:
            ...
        result = await stream.result()
    """
    stream: EventStream[AgentEvent, LoopResult] = EventStream()

    async def produce() -> None:
        try:
            stream.end(await run_agent_loop(prompts, context, config, [stream.push], cancel))
        except BaseException as exc:
            stream.fail(exc)
            if not isinstance(exc, Exception):
                raise

    stream.task = asyncio.get_running_loop().create_task(produce())
    return stream


def _end(
    run: _Run,
    reason: EndReason,
    *,
    final: AssistantMessage | None = None,
    steering: list[UserMessage] | None = None,
    follow_ups: list[UserMessage] | None = None,
) -> LoopResult:
    if run.listeners:
        run.emit(
            AgentEnd(reason=reason, messages=run.new_messages, round=run.round, **run.position)
        )
    if final is None:
        for message in reversed(run.new_messages):  # the last reply: at the end, as a rule
            if isinstance(message, AssistantMessage):
                final = message
                break
    return LoopResult(
        reason=reason,
        messages=run.new_messages,
        final=final,
        rounds=run.round,
        unconsumed_steering=steering or [],
        unconsumed_follow_ups=follow_ups or [],
        error=run.error,
        run_id=run.run_id,
    )


def _close_after_failure(run: _Run, stop: str, text: str) -> AssistantMessage:
    """Close whatever is open (message, turn, a batch of calls) after an exception, so
    events balance and every call has its result; returns the message that describes the
    failure."""
    reason = "aborted" if stop == "aborted" else "error"
    partial = run.context.stream_message
    if run.message_open and partial is not None:
        final = _finish_message(run, partial, _failed(reason, text, partial))
    else:
        final = _failed(reason, text)
        if run.turn_open and run.turn_message is None:
            _finish_message(run, None, final)
    if run.turn_open:
        _answer_unrun_calls(run, ABORTED_TEXT if reason == "aborted" else _NOT_RUN_AFTER_ERROR)
        run.end_turn(run.turn_message or final, run.turn_results)
    run.context.pending_tool_calls.clear()
    return final


async def _run_loop(run: _Run, prompts: list[AnyMessage]) -> LoopResult:
    """The outer pass loop (follow-ups) around the inner round loop (tools, steering)."""
    config = run.config
    cap = effective_cap(config.options.max_iterations)
    run.round = 1
    run.start_turn()
    _add_prompts(run, prompts)
    steering_source = config.get_steering_messages or _no_messages
    follow_up_source = config.get_follow_up_messages or _no_messages
    pending: list[UserMessage] = await _poll(steering_source)
    origin: MessageOrigin = "steering"
    first = True
    while True:
        specs = _provider_specs(run)
        has_more_tool_calls = True
        while has_more_tool_calls or pending:
            if not first:  # the next round (at the cap the run ends; pending stays queued)
                if run.round >= cap:
                    return _end(run, "cap", steering=pending)
                run.round += 1
                run.start_turn()
            first = False
            for queued_message in pending:
                _add_message(run, queued_message, origin)
            pending, origin = [], "steering"
            message = await _stream_assistant_response(run, specs)
            if message.stop_reason in ("error", "aborted"):
                run.end_turn(message, [])
                return _end(run, "error" if message.stop_reason == "error" else "aborted")
            tool_calls = run.reply_calls  # the reply's calls, in order
            has_more_tool_calls = bool(tool_calls)
            steering: list[UserMessage] = []
            if tool_calls:
                steering = await _execute_tool_calls(run, message, tool_calls)
            run.end_turn(message, run.turn_results)
            task = run.task  # _stop_requested, called only when it may say stop
            if (
                run.cancel.is_set() or (task is not None and task.cancelling() > run.baseline)
            ) and _stop_requested(run):
                # steering taken from the queue and not delivered goes back, as at the cap
                return _end(run, "aborted", steering=steering)
            # Steering queued while the turn closed (e.g. by a turn_end listener) joins what
            # arrived during the batch, so the next model call sees all of it.
            queued: Any = steering_source()
            if type(queued) is not list:
                queued = await _settle(queued)
            pending = steering + queued
        follow_ups: Any = follow_up_source()
        pending = follow_ups if type(follow_ups) is list else await _settle(follow_ups)
        origin = "follow_up"
        if not pending:
            return _end(run, "stop")
        if run.round >= cap:
            return _end(run, "cap", follow_ups=pending)


def _add_prompts(run: _Run, prompts: list[AnyMessage]) -> None:
    for message in prompts:
        _add_message(run, message, "prompt" if isinstance(message, UserMessage) else None)


def _add_message(run: _Run, message: AnyMessage, origin: MessageOrigin | None) -> None:
    run.context.messages.append(message)
    run.new_messages.append(message)
    run.emit_message(message, origin)


def _provider_specs(run: _Run) -> list[ToolSpec]:
    hook = run.config.provider_tools
    if hook is not None:
        return hook(run.context.tools)
    return [t.spec for t in run.context.tools]


async def _stream_assistant_response(run: _Run, specs: list[ToolSpec]) -> AssistantMessage:
    """Stream one reply from the provider; returns the final assistant message, already
    appended to the history. A provider that raises or ends without a final event yields
    an ``error`` message; a set cancel signal yields ``aborted`` without calling it. A
    :class:`~openprogram.providers.base.ReadyStream` with its events ready is read without
    an await per event (see :func:`_read_ready`)."""
    context = run.context
    if run.cancel.is_set():
        return _finish_message(run, None, _failed("aborted", "Run aborted before the model call"))
    options = _call_options(run)
    request = run.request
    if (
        request is None
        or request.tools is not specs
        or request.messages is not context.messages
        or request.system_prompt is not context.system_prompt
    ):
        # one per pass: a provider reads it during its call only (see Context)
        request = run.request = Context(context.system_prompt, context.messages, specs)
    partial: AssistantMessage | None = None
    context.stream_message = None  # the reply's partial once it starts (see _read_ready)
    listeners = run.listeners
    # message_update is the one event per streamed piece: built only for listeners that
    # want it (a listener with ``wants_updates = False``, like a trace recorder, does not)
    updates = [f for f in listeners if getattr(f, "wants_updates", True)] if listeners else None
    final: AssistantMessage | None = None
    try:
        stream = run.config.provider.stream(request, options)
        events = stream.ready(bool(updates)) if isinstance(stream, ReadyStream) else None
        if events is not None:
            final = _read_ready(run, events, updates)
        else:
            async for event in stream:  # what _read_ready does, an await per event
                if event.type == "start":
                    partial = event.partial
                    context.stream_message = partial
                    run.message_open = True
                    if listeners:
                        run.emit_start(partial)
                elif event.type == "done":
                    # Keep iterating (no break): the provider's generator then finishes on
                    # its own, instead of being finalized later through the event loop.
                    final = event.message
                elif event.type == "error":
                    final = event.error
                elif final is not None:
                    continue  # nothing counts after the final event
                elif updates and partial is not None:
                    _emit_update(run, partial, event, updates)
    except (Exception, asyncio.CancelledError) as exc:
        final = _provider_failed(run, exc, context.stream_message)
    partial = context.stream_message
    return _finish_message(run, partial, final if final is not None else _no_final(run, partial))


_refcount = getattr(sys, "getrefcount", None)
_set_round = StreamOptions.__dict__["round"].__set__  # the slot's own setter (it is frozen)


def _call_options(run: _Run) -> StreamOptions:
    """The options of the run's next model call: new ones (``StreamOptions.of``), or the
    last call's with the round moved on when nothing but the run holds them or their
    ``extra`` (which is still empty).

    Building one costs about 0.4 us, a twelfth of a minimal round. Renewing options no one
    else can reach is not seen by anyone: a provider that kept the last call's options, or
    their ``extra``, holds a reference (and the options cannot be weakly referenced), and
    then the call gets new ones. (On an interpreter without ``sys.getrefcount`` every call
    gets new ones.)"""
    options = run.call_options
    # references to the options: the run's slot, this local, getrefcount's argument; to
    # their extra: the options' slot, the argument
    if (
        options is not None
        and _refcount is not None
        and _refcount(options) == 3
        and _refcount(options.extra) == 2
        and not options.extra
    ):
        _set_round(options, run.round)
        return options
    options = run.call_options = stream_options(
        run.config.options, run.cancel, run.depth, run.round
    )
    return options


def _no_final(run: _Run, partial: AssistantMessage | None) -> AssistantMessage:
    """The reply of a stream that ended without a final event."""
    if run.cancel.is_set():
        return _failed("aborted", "Run aborted during the model call", partial)
    return _failed("error", "Provider stream ended without a final event", partial)


def _read_ready(
    run: _Run, events: Iterator[ProviderEvent], updates: list[Listener] | None
) -> AssistantMessage | None:
    """The events of a stream that has them ready, read as the async loop of
    :func:`_stream_assistant_response` reads any other stream (the same steps, kept twice:
    a call per event would cost what the plain iterator saves); returns the final message
    (None if none came). The partial is ``context.stream_message`` once it starts."""
    context = run.context
    listeners = run.listeners
    partial: AssistantMessage | None = None
    final: AssistantMessage | None = None
    for event in events:
        if event.type == "start":
            partial = event.partial
            context.stream_message = partial
            run.message_open = True
            if listeners:
                run.emit_start(partial)
        elif event.type == "done":
            final = event.message  # and on to the end: the iterator finishes on its own
        elif event.type == "error":
            final = event.error
        elif final is not None:
            continue  # nothing counts after the final event
        elif updates and partial is not None:
            _emit_update(run, partial, event, updates)
    return final


def _provider_failed(
    run: _Run, exc: Exception | asyncio.CancelledError, partial: AssistantMessage | None
) -> AssistantMessage:
    """The error message of a provider that raised; a cancellation of the run goes on up,
    but a ``CancelledError`` the provider raised on its own is its error like any other."""
    if isinstance(exc, asyncio.CancelledError):
        if _cancelled(run):
            raise exc
        text = f"Provider raised {_described(exc)} on its own (the run was not cancelled)"
    else:
        text = f"Provider raised {type(exc).__name__}: {exc}"
    run.error = exc
    return _failed("error", text, partial)


def _emit_update(
    run: _Run, partial: AssistantMessage, event: ProviderEvent, updates: list[Listener]
) -> None:
    if event.type == "toolcall_start":
        # Made unique as it starts, so every message_update shows the id the call keeps.
        block = partial.content[event.content_index]
        if isinstance(block, ToolCall):
            _claim_call_id(run, block)
            run.claimed.append(block)
    run.emit(
        MessageUpdate(message=partial, event=event, round=run.round, **run.position),
        updates,
    )


def _failed(stop: str, text: str, partial: AssistantMessage | None = None) -> AssistantMessage:
    message = partial if partial is not None else AssistantMessage(timestamp=now_ms())
    message.stop_reason = "aborted" if stop == "aborted" else "error"
    message.error_message = text
    return message


def _finish_message(
    run: _Run, partial: AssistantMessage | None, final: AssistantMessage
) -> AssistantMessage:
    context = run.context
    context.stream_message = None
    _unique_call_ids(run, final)
    context.messages.append(final)
    run.new_messages.append(final)
    run.turn_message = final
    if run.listeners:
        if partial is None:
            run.emit_start(final)
        run.emit_end(final)
    run.message_open = False
    return final


def _unique_call_ids(run: _Run, message: AssistantMessage) -> None:
    """Give every tool call of ``message`` an id no other call in the history has: an
    empty id becomes ``call_<n>``, a repeated one ``<id>_<n>`` (the first free ``n``). Done
    before ``message_end`` (for a streamed call with listeners of ``message_update``, when it
    starts), so the history, the events, the results and whatever a provider sends later all
    quote the same ids."""
    claimed = run.claimed
    if claimed:
        run.claimed = []
    calls = run.reply_calls = []
    for block in message.content:
        if isinstance(block, ToolCall):
            calls.append(block)
            if not (claimed and any(block is c for c in claimed)):
                _claim_call_id(run, block)


def _claim_call_id(run: _Run, block: ToolCall) -> None:
    taken = run.call_ids
    if taken is None:
        context = run.context
        taken, context.call_ids = context.call_ids, None
        if taken is None:
            taken = {
                c.id
                for m in context.messages
                if isinstance(m, AssistantMessage)
                for c in m.content
                if isinstance(c, ToolCall)
            }
        run.call_ids = taken
    if not block.id or block.id in taken:
        stem, n = (block.id, 2) if block.id else ("call", 1)
        while f"{stem}_{n}" in taken:
            n += 1
        block.id = f"{stem}_{n}"
    taken.add(block.id)


async def _execute_tool_calls(
    run: _Run, message: AssistantMessage, tool_calls: list[ToolCall]
) -> list[UserMessage]:
    """Run ``message``'s picked tools one by one, in order; results are appended to the
    history as they finish. Steering is polled after each call: when it arrives, every
    remaining call is skipped and the steering messages are returned. After an abort no
    call runs: the remaining ones are answered with :data:`ABORTED_TEXT` (and steering
    stays queued)."""
    run.batch = tool_calls
    steering_source = run.config.get_steering_messages
    # A call's start and end inline (a call each cost about what the step does). The stop
    # checks read the signal and the task first, and call _stop_requested only when either
    # says stop.
    cancel, task, baseline = run.cancel, run.task, run.baseline
    context = run.context
    messages, new_messages, results = context.messages, run.new_messages, run.turn_results
    pending = context.pending_tool_calls
    for call in tool_calls:
        if (cancel.is_set() or (task is not None and task.cancelling() > baseline)) and (
            _stop_requested(run)
        ):
            _answer_unrun_calls(run, ABORTED_TEXT)
            return []
        if run.listeners:
            run.emit(_tool_start(run, call))
        pending.add(call.id)
        try:
            started = _invoke(run, call)  # a sync tool has run; an async one is awaited
        except BaseException as exc:
            _interrupted(run, call, exc)
            raise
        if isinstance(started, _Awaiting):
            outcome = await _await_one(run, call, started)
        else:
            pending.discard(call.id)
            outcome = started
        result = _result_message(call, outcome[0])
        if run.listeners:
            run.emit(_tool_end(run, call, result, outcome[1]))
        messages.append(result)
        new_messages.append(result)
        results.append(result)
        if run.listeners:
            run.emit_message(result)
        # A tool may have caught the run's CancelledError and returned: the abort stands.
        if (cancel.is_set() or (task is not None and task.cancelling() > baseline)) and (
            _stop_requested(run)
        ):
            continue  # the next call is answered as aborted; leave steering queued
        steering: Any = steering_source() if steering_source is not None else []
        if type(steering) is not list:
            steering = await _settle(steering)
        if steering:
            _answer_unrun_calls(run, SKIPPED_TEXT)
            delivered: list[UserMessage] = steering
            return delivered
    return []


def _answer_unrun_calls(run: _Run, text: str) -> None:
    """Answer each call of the open batch that has no result yet (results are recorded in
    call order, so they are the calls after the last result) with a skip saying ``text``."""
    for call in run.batch[len(run.turn_results) :]:
        _record_result(run, _skip_tool_call(run, call, text))


def _record_result(run: _Run, result: ToolResultMessage) -> None:
    run.context.messages.append(result)
    run.new_messages.append(result)
    run.turn_results.append(result)
    run.emit_message(result)


async def _await_one(run: _Run, call: ToolCall, started: _Awaiting) -> Outcome:
    """Await what an async tool's call returned; its failures become error results as a
    sync tool's do."""
    try:
        try:
            value = await started.value
        except Exception as exc:
            return _raised(exc)
        except asyncio.CancelledError as exc:
            return _own_cancellation(run, exc)
        return _returned(value)
    except BaseException as exc:
        _interrupted(run, call, exc)
        raise
    finally:
        run.context.pending_tool_calls.discard(call.id)


def _interrupted(run: _Run, call: ToolCall, exc: BaseException) -> None:
    """A call that something interrupted gets its result before the exception goes on.
    The run's cancellation while it ran: ``Cancelled`` (it ran, so it is no skip).
    ``KeyboardInterrupt``, ``SystemExit`` and their kin are not the tool's errors to show
    the model: the call gets its result, then the run ends (see _guarded_run)."""
    if isinstance(exc, asyncio.CancelledError):
        _record_failure(run, call, _CANCELLED_TEXT, "cancelled")
    else:
        _record_failure(run, call, _described(exc), "raised")


def _record_failure(run: _Run, call: ToolCall, text: str, kind: ToolErrorKind) -> None:
    """The result of a call that something interrupted (the run's cancellation, or a
    ``BaseException`` leaving the run): its end event, and the result in the history."""
    run.context.pending_tool_calls.discard(call.id)
    result = _result_message(call, ToolResult.text(text, is_error=True))
    if run.listeners:
        run.emit(_tool_end(run, call, result, kind))
    _record_result(run, result)


Outcome = tuple[ToolResult, "ToolErrorKind | None"]


def _invoke(run: _Run, call: ToolCall) -> Outcome | _Awaiting:
    """Look up, validate and execute one call; every failure becomes an error result, with
    the kind of failure it was. A tool whose value is awaitable (an async tool) gives an
    :class:`_Awaiting` for :func:`_await_one` to await: a sync tool's call costs no
    coroutine of its own."""
    tool = run.tools_by_name.get(call.name)
    if tool is None:
        names = ", ".join(sorted(run.tools_by_name)) or "none"
        text = f"Tool {call.name} not found (available: {names})"
        return ToolResult.text(text, is_error=True), "unknown_tool"
    try:
        args = tool.validator.validate(call.name, call.arguments)
    except ArgumentsError as exc:
        return ToolResult.text(str(exc), is_error=True), "invalid_arguments"
    on_update = _updater(run, call) if run.listeners else None
    try:
        value: Any = tool.run(call.id, args, run.cancel, on_update)
    except Exception as exc:
        return _raised(exc)
    except asyncio.CancelledError as exc:
        return _own_cancellation(run, exc)
    if tool.is_async or (type(value) not in _PLAIN and hasattr(value, "__await__")):
        return _Awaiting(value)
    result = normalize_result(value)  # _returned, inline: once per call
    return result, "returned" if result.is_error else None


class _Awaiting:
    """What an async tool's call returned, to be awaited (see :func:`_invoke`)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _raised(exc: Exception) -> Outcome:
    return ToolResult.text(str(exc) or type(exc).__name__, is_error=True), "raised"


def _own_cancellation(run: _Run, exc: asyncio.CancelledError) -> Outcome:
    """A ``CancelledError`` out of a tool: the run's cancellation goes on up; one the tool
    raised on its own (e.g. it awaited a task that was cancelled) is its error, and the
    run goes on, as after any other exception."""
    if _cancelled(run):
        raise exc
    text = f"CancelledError raised by the tool{f': {exc}' if str(exc) else ''}"
    return ToolResult.text(text, is_error=True), "raised"


def _returned(value: Any) -> Outcome:
    result = normalize_result(value)
    return result, "returned" if result.is_error else None


def _updater(run: _Run, call: ToolCall) -> Callable[[Any], None]:
    def on_update(partial_result: Any) -> None:
        run.emit(
            ToolExecutionUpdate(
                tool_call_id=call.id,
                tool_name=call.name,
                args=call.arguments,
                partial_result=partial_result,
                round=run.round,
                **run.position,
            )
        )

    return on_update


def _result_message(call: ToolCall, result: ToolResult) -> ToolResultMessage:
    return ToolResultMessage(  # positional: one per call, keywords cost a third more
        call.id, call.name, result.content, result.is_error, result.details, "toolResult", now_ms()
    )


def _tool_start(run: _Run, call: ToolCall) -> ToolExecutionStart:
    return ToolExecutionStart(
        tool_call_id=call.id,
        tool_name=call.name,
        args=call.arguments,
        round=run.round,
        **run.position,
    )


def _tool_end(
    run: _Run, call: ToolCall, result: ToolResultMessage, kind: ToolErrorKind | None
) -> ToolExecutionEnd:
    return ToolExecutionEnd(
        tool_call_id=call.id,
        tool_name=call.name,
        result=result,
        is_error=result.is_error,
        args=call.arguments,
        skipped=result.skipped,
        error_kind=kind,
        round=run.round,
        **run.position,
    )


def _skip_tool_call(run: _Run, call: ToolCall, text: str = SKIPPED_TEXT) -> ToolResultMessage:
    """A call not executed (the user steered, or the run was aborted): an error result the
    model sees, saying ``text``, marked ``skipped`` in the data; its tool events are
    emitted like a run's, so the trace holds one result per call too."""
    result = ToolResultMessage(
        call.id, call.name, [TextContent(text)], True, {}, timestamp=now_ms(), skipped=True
    )
    if run.listeners:
        run.emit(_tool_start(run, call))
        run.emit(_tool_end(run, call, result, "skipped"))
    return result
