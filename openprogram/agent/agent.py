"""The stateful Agent: a history, queues for steering and follow-ups, and subscribers.

Example::

    agent = Agent(ScriptedModel([{"text": "hello"}]))
    agent.subscribe(lambda event: print(event.type))
    result = await agent.prompt("hi")
    assert result.reason == "stop"
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Unpack

from openprogram.agent._abort import AbortSignal, AbortWaves
from openprogram.agent.agent_loop import (
    AgentContext,
    Listener,
    LoopConfig,
    LoopResult,
    run_agent_loop,
)
from openprogram.errors import AgentBusyError, ArgumentTypeError
from openprogram.providers.base import Provider, RunOptions, RunSettings
from openprogram.tools import Tool, as_tool
from openprogram.types import AnyMessage, AssistantMessage, ToolSpec, UserMessage

__all__ = ["Agent", "AgentState"]

_DEFAULT_OPTIONS = RunOptions()  # frozen: one shared by every agent given no options


@dataclass(slots=True)
class AgentState:
    """What an Agent knows between and during runs."""

    context: AgentContext
    is_streaming: bool = False
    error: str | None = None
    """The error text of the last run that ended on an error, else None."""
    last_result: LoopResult | None = None

    @property
    def messages(self) -> list[AnyMessage]:
        return self.context.messages

    @property
    def stream_message(self) -> AssistantMessage | None:
        return self.context.stream_message

    @property
    def pending_tool_calls(self) -> set[str]:
        return self.context.pending_tool_calls

    @property
    def tools(self) -> list[Tool]:
        return self.context.tools


class _Queues:
    """An agent's steering and follow-up queues, and the message sources its runs poll.

    The sources are this object's methods, not the agent's: the loop's config holds them,
    and a config that held the agent would make agent and config a cycle that only the
    garbage collector frees (with every message of the agent's history)."""

    __slots__ = ("before_finish", "follow_up", "state", "steering")

    def __init__(self, state: AgentState) -> None:
        self.steering: deque[UserMessage] = deque()
        self.follow_up: deque[UserMessage] = deque()
        self.state = state
        self.before_finish: Callable[[AssistantMessage | None], list[UserMessage]] | None = None

    def dequeue_steering(self) -> list[UserMessage]:
        queue = self.steering
        if not queue:
            return []
        out = list(queue)
        queue.clear()
        return out

    def dequeue_follow_ups(self) -> list[UserMessage]:
        queue = self.follow_up
        if not queue:
            if self.before_finish is None:
                return []
            last = next(
                (m for m in reversed(self.state.messages) if isinstance(m, AssistantMessage)),
                None,
            )
            return self.before_finish(last)
        out = list(queue)
        queue.clear()
        return out


def _as_user(message: str | UserMessage) -> UserMessage:
    if isinstance(message, UserMessage):
        return message
    if isinstance(message, str):
        return UserMessage.of(message)
    raise ArgumentTypeError(
        f"expected a str or UserMessage, got {type(message).__name__}: {message!r}"
    )


class Agent:
    """Runs the tool-call loop over a persistent history.

    ``prompt`` runs one loop; while it runs, ``steer`` queues a message delivered after
    the current tool call (remaining calls are skipped), ``follow_up`` queues one delivered
    when the model would otherwise finish, and ``abort`` cancels the run (no tool starts
    after it), from any thread. ``subscribe`` registers a listener for every event; a
    listener that raises is logged and ignored.

    How it calls the model is one :class:`~openprogram.providers.RunOptions`: ``options=``,
    or its fields as keywords (``Agent(provider, max_iterations=3)``; given with
    ``options=``, they replace its fields).
    """

    def __init__(
        self,
        provider: Provider,
        *,
        system_prompt: str = "",
        tools: Iterable[Any] = (),
        messages: Iterable[AnyMessage] = (),
        options: RunOptions | None = None,
        depth: int = 0,
        parent_run_id: str | None = None,
        provider_tools: Callable[[list[Tool]], list[ToolSpec]] | None = None,
        listeners: list[Listener] | None = None,
        **settings: Unpack[RunSettings],
    ) -> None:
        context = AgentContext(system_prompt, list(messages), [as_tool(t) for t in tools])
        self.state = AgentState(context)
        self.provider = provider
        if options is None:
            options = RunOptions(**settings) if settings else _DEFAULT_OPTIONS
        elif settings:
            options = replace(options, **settings)
        queues = self._queues = _Queues(self.state)
        self._config = LoopConfig(
            provider=provider,
            options=options,
            get_steering_messages=queues.dequeue_steering,
            get_follow_up_messages=queues.dequeue_follow_ups,
            depth=depth,
            parent_run_id=parent_run_id,
            provider_tools=provider_tools,
        )
        self._listeners: list[Listener] = listeners if listeners is not None else []
        self._waves = AbortWaves()
        """How :meth:`abort` reaches the runs asked for with their own signal."""

    @property
    def before_finish(self) -> Callable[[AssistantMessage | None], list[UserMessage]] | None:
        """Asked when the run would finish (no follow-up queued) with the last assistant
        message; messages it returns enter as follow-ups, in the same run. ``exec(choices=)``
        uses it for its re-ask."""
        return self._queues.before_finish

    @before_finish.setter
    def before_finish(
        self, value: Callable[[AssistantMessage | None], list[UserMessage]] | None
    ) -> None:
        self._queues.before_finish = value

    @property
    def options(self) -> RunOptions:
        """How this agent's runs call the model (checked when the agent was built)."""
        return self._config.options

    # -- subscribers ---------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event; returns a function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    # -- queues --------------------------------------------------------------------------

    def steer(self, message: str | UserMessage) -> None:
        """Queue a message that interrupts: delivered after the running tool call, and the
        calls left in that round are skipped."""
        self._queues.steering.append(_as_user(message))

    def follow_up(self, message: str | UserMessage) -> None:
        """Queue a message delivered once the model has finished (starts another pass)."""
        self._queues.follow_up.append(_as_user(message))

    @property
    def queued_steering(self) -> list[UserMessage]:
        return list(self._queues.steering)

    @property
    def queued_follow_ups(self) -> list[UserMessage]:
        return list(self._queues.follow_up)

    def take_queued(self) -> tuple[list[UserMessage], list[UserMessage]]:
        """Dequeue everything still queued, as ``(steering, follow_ups)``: to hand to
        another agent (``Runtime`` passes what an exec left to the next one)."""
        queues = self._queues
        taken = list(queues.steering), list(queues.follow_up)
        queues.steering.clear()
        queues.follow_up.clear()
        return taken

    # -- running -------------------------------------------------------------------------

    def abort(self) -> None:
        """Abort the running prompt, and any prompt already asked for (``prompt()`` called,
        e.g. in ``asyncio.create_task(agent.prompt(...))``) but not started yet: each ends
        with reason ``aborted``, and no tool starts after the abort.

        Safe from any thread: the signal reads as set at once everywhere, and the run is
        woken (its awaited tool or model call cancelled) on its own loop. An abort while
        nothing is asked for does nothing; it is not kept for the next prompt.
        """
        self._waves.abort()

    def prompt(
        self,
        message: str | UserMessage | Sequence[str | UserMessage],
        *,
        signal: AbortSignal | None = None,
        run_id: str | None = None,
    ) -> Coroutine[Any, Any, LoopResult]:
        """Add ``message`` to the history and run the loop until it ends (await the result).

        The run is asked for when ``prompt()`` is called, not when the coroutine starts: an
        :meth:`abort` in between aborts it before the model is called. A caller that aborts
        runs its own way passes its ``signal`` (setting it aborts this run; :meth:`abort`
        then does not reach it); ``run_id`` tags the run's events (default: a fresh id).
        """
        if signal is not None:
            return self._run(message, signal, None, None, run_id)
        waves = self._waves
        return self._run(message, None, waves, waves.wave, run_id)  # asked for now

    async def _run(
        self,
        message: str | UserMessage | Sequence[str | UserMessage],
        signal: AbortSignal | None,
        waves: AbortWaves | None,
        asked: object | None,
        run_id: str | None = None,
    ) -> LoopResult:
        """The run; ``signal`` is None for a run with its own, which ``waves`` aborts (the
        run was asked for under the wave ``asked``)."""
        if self.state.is_streaming:
            raise AgentBusyError(
                "Agent.prompt() called while a run is in progress; use steer() or follow_up()"
            )
        prompts: list[AnyMessage] = (
            [_as_user(message)]
            if isinstance(message, (str, UserMessage))
            else [_as_user(m) for m in message]
        )
        if signal is None:
            signal = AbortSignal()
        if waves is not None:
            waves.start(signal, asked)
        self.state.error = None
        self.state.is_streaming = True
        try:
            result = await run_agent_loop(
                prompts, self.state.context, self._config, self._listeners, signal, run_id=run_id
            )
        except BaseException as exc:
            # The run ended (its agent_end was sent, reason error) and what ended it goes on
            # up: a tool's KeyboardInterrupt or SystemExit. A cancellation from outside ended
            # it aborted: no error.
            if not isinstance(exc, asyncio.CancelledError):
                text = str(exc)
                self.state.error = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
            raise
        finally:
            self.state.is_streaming = False
            if waves is not None:
                waves.end(signal)
        self._after_run(result)
        return result

    def _after_run(self, result: LoopResult) -> None:
        # Messages dequeued but not delivered (cap reached) go back, in front, so nothing
        # queued is lost.
        if result.unconsumed_steering:
            self._queues.steering.extendleft(reversed(result.unconsumed_steering))
        if result.unconsumed_follow_ups:
            self._queues.follow_up.extendleft(reversed(result.unconsumed_follow_ups))
        self.state.last_result = result
        if result.reason == "error" and result.final is not None:
            self.state.error = result.final.error_message
