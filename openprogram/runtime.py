"""``Runtime.exec``: the call users write, and the context variables for nested exec.

Example::

    runtime = Runtime(provider=ScriptedModel([...]))
    answer = runtime.exec("What is 2+3?", tools=[add])

``exec`` is synchronous; ``aexec`` is the awaitable twin. A tool body that calls ``exec``
again opens a nested loop one level deeper; without ``tools=`` it inherits the outer
call's ``tools=`` list (through the ``_current_tools`` context variable).

Execs may run side by side on one runtime (``asyncio.gather`` of ``aexec`` calls, threads).
Its queues are shared: ``steer``/``follow_up`` go to the oldest running exec, and what an
exec leaves undelivered when it ends goes on to the oldest one still running, or back to
the runtime's queue for the next exec when none is. Events tell the runs apart by
``run_id`` (nested runs name their parent in ``parent_run_id``).

Nesting is bounded by ``Runtime(max_depth=N)`` (default 32): an exec that would run deeper
raises :class:`~openprogram.errors.NestingDepthError` where it is called, before any run
starts, sync or async alike. Each level of async execs awaited on one task costs about nine
Python frames, so Python's recursion limit (1,000 by default) would end such a chain near
depth 109 with a bare ``RecursionError``; a sync chain (a sync tool calling ``exec``) runs
each level on a nested event loop of the tool's own thread (see :mod:`openprogram._nested`),
about twenty frames a level. Past a raised ``max_depth``, a nested exec is also refused when
fewer than :data:`STACK_MARGIN` of Python's frames are left for it, and a ``RecursionError``
that still happens inside a nested run becomes a ``NestingDepthError`` too.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import sys
import threading
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Final

from openprogram._nested import run_nested
from openprogram.agent import AbortSignal
from openprogram.agent._abort import AbortWaves
from openprogram.agent._history import check_history
from openprogram.agent.agent import Agent
from openprogram.agent.agent_loop import Listener, LoopResult, new_run_id
from openprogram.errors import (
    ArgumentTypeError,
    DecisionError,
    InvalidArgumentError,
    ModelError,
    NestingDepthError,
    OpenProgramError,
    RunAbortedError,
)
from openprogram.providers.base import Provider, RunOptions, ToolChoice, get_provider
from openprogram.tools import (
    SEARCH_TOOL_NAME,
    Tool,
    ToolPolicy,
    ToolRegistry,
    as_tool,
    default_registry,
)
from openprogram.tools.hooks import (
    Deferral,
    Menu,
    PickError,
    current_loaded_var,
    current_runtime_var,
)
from openprogram.types import (
    AnyMessage,
    AssistantMessage,
    ImageContent,
    TextContent,
    UserMessage,
    now_ms,
)

__all__ = ["DEFAULT_MAX_DEPTH", "STACK_MARGIN", "ExecResult", "Runtime", "current_depth"]

_get_running_loop = asyncio.events._get_running_loop

_current_tools: contextvars.ContextVar[list[Tool] | None] = contextvars.ContextVar(
    "_current_tools", default=None
)
"""The ``tools=`` list of the innermost running exec that was given one."""

_current_depth: contextvars.ContextVar[int] = contextvars.ContextVar("_current_depth", default=-1)
"""Depth of the innermost running exec (-1 outside any)."""

_current_run_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "_current_run_id", default=None
)
"""Run id of the innermost running exec: the parent of an exec started by its tools."""


DEFAULT_MAX_DEPTH: Final = 32
"""The deepest nesting level an exec may run at, unless ``Runtime(max_depth=)`` says
otherwise (the outer exec is depth 0). Well below Python's recursion limit."""

STACK_MARGIN: Final = 200
"""The Python frames (of ``sys.getrecursionlimit()``) a nested exec needs left when it
starts, for its model call, its tools and its events; with fewer it is refused, so a
``max_depth`` raised too far ends in a clear error rather than a ``RecursionError``."""

_current_signal: contextvars.ContextVar[AbortSignal | None] = contextvars.ContextVar(
    "_current_signal", default=None
)
"""The abort signal of the innermost running exec: an exec started by its tools (on any
runtime, in any thread) is aborted with it."""

_NO_POLICY: Final = ToolPolicy()  # frozen, so safe to share as the default

_current_policy: contextvars.ContextVar[ToolPolicy] = contextvars.ContextVar(
    "_current_policy", default=_NO_POLICY
)
"""The merged tool policy (toolset/source/allow/deny) of the innermost running exec; a
nested exec merges its own keys over it (inner keys win)."""


class _Scope:
    """The context variables one exec publishes for the code it runs (tool bodies, nested
    execs): set by :meth:`enter`, reset by :meth:`leave`."""

    def __init__(
        self,
        tools: list[Tool] | None,
        policy: ToolPolicy,
        runtime: Runtime,
        loaded: set[str],
        signal: AbortSignal,
    ) -> None:
        self.depth = _current_depth.get() + 1
        self.parent_run_id = _current_run_id.get()
        self.run_id = new_run_id()
        self.loaded = loaded
        self._values: list[tuple[contextvars.ContextVar[Any], Any]] = [
            (_current_depth, self.depth),
            (_current_run_id, self.run_id),
            (_current_policy, policy),
            (current_runtime_var, runtime),
            (current_loaded_var, loaded),
            (_current_signal, signal),
        ]
        if tools is not None:  # only a given tools= list is inherited
            self._values.append((_current_tools, tools))
        self._tokens: list[tuple[contextvars.ContextVar[Any], contextvars.Token[Any]]] = []

    def enter(self) -> None:
        self._tokens = [(var, var.set(value)) for var, value in self._values]

    def leave(self) -> None:
        for var, token in reversed(self._tokens):
            var.reset(token)
        self._tokens = []


def _with_search_tool(tools: list[Tool], deferral: Deferral | None) -> list[Tool]:
    """Add ``tool_search`` when some tools are deferred (unless one is offered already)."""
    if deferral is None or any(t.name == SEARCH_TOOL_NAME for t in tools):
        return tools
    return [*tools, deferral.search_tool()]


def current_depth() -> int:
    """The nesting depth of the exec whose tool is running now (-1 outside any exec)."""
    return _current_depth.get()


@dataclass(slots=True)
class ExecResult:
    """Everything one exec produced (``Runtime.last_run``)."""

    text: str
    loop: LoopResult
    depth: int

    @property
    def reason(self) -> str:
        return self.loop.reason

    @property
    def rounds(self) -> int:
        """The rounds the run opened (see :attr:`LoopResult.rounds`)."""
        return self.loop.rounds


Content = str | UserMessage | Sequence[TextContent | ImageContent]


@dataclass(slots=True, kw_only=True)  # not frozen: that makes building it 4x slower
class _ExecCall:
    """One exec call, its arguments checked (see :meth:`Runtime.exec`): what to send, the
    tools asked for, and the run's options."""

    content: Content | None
    """None: no new prompt (the run continues ``history``)."""
    tools: Sequence[Any] | None
    """The ``tools=`` list as given; None: inherited, else the registry's."""
    policy: ToolPolicy
    """``toolset`` / ``tools_source`` / ``tools_allow`` / ``tools_deny``."""
    options: RunOptions
    choices: Sequence[Any] | None
    history: Sequence[AnyMessage]


class Runtime:
    """Binds a provider, a registry and listeners; runs ``exec`` calls.

    ``Runtime(model="openai:gpt-4o-mini")`` resolves a provider by name;
    ``Runtime(provider=obj)`` takes any object implementing the provider protocol.
    ``max_depth`` is the deepest nesting level its execs may run at (the outer exec is depth
    0, an exec from one of its tools depth 1; ``0`` allows no nested exec): one deeper raises
    :class:`~openprogram.errors.NestingDepthError` from the ``exec``/``aexec`` call.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        provider: Provider | None = None,
        registry: ToolRegistry | None = None,
        system_prompt: str = "",
        max_tokens: int | None = None,
        temperature: float | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
        **provider_options: Any,
    ) -> None:
        if provider is None:
            if model is None:
                raise ArgumentTypeError(
                    "Runtime needs a model string (e.g. Runtime(model='openai:gpt-4o-mini')) "
                    "or a provider object (Runtime(provider=...))"
                )
            provider = get_provider(model, **provider_options)
        elif provider_options:
            raise ArgumentTypeError(
                f"provider options {sorted(provider_options)} only apply with model=; "
                "configure the provider object directly"
            )
        self.provider = provider
        self.model = model
        self.registry = registry if registry is not None else default_registry
        self.system_prompt = system_prompt
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.max_depth = max_depth
        self.last_run: ExecResult | None = None
        self._plain: RunOptions | None = None
        """The options of an exec that sets none (see :meth:`_plain_options`)."""
        self._listeners: list[Listener] = []
        self._agents: list[Agent] = []
        self._steering: deque[str | UserMessage] = deque()
        self._follow_ups: deque[str | UserMessage] = deque()
        self._lock = threading.Lock()
        self._waves = AbortWaves()
        """How :meth:`abort` reaches the execs asked for (``aexec()`` called) and not ended."""

    @property
    def max_depth(self) -> int:
        """The deepest nesting level an exec of this runtime may run at (default 32)."""
        return self._max_depth

    @max_depth.setter
    def max_depth(self, value: int) -> None:
        if type(value) is not int:
            raise ArgumentTypeError(
                f"max_depth={value!r} must be an int: the deepest nesting level an exec may "
                f"run at (default {DEFAULT_MAX_DEPTH}; 0 allows no nested exec)"
            )
        if value < 0:
            raise InvalidArgumentError(
                f"max_depth={value} must be >= 0: the deepest nesting level an exec may run "
                f"at (default {DEFAULT_MAX_DEPTH}; 0 allows no nested exec)"
            )
        self._max_depth = value

    # -- events and queues ---------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Receive the events of every exec at every depth (``event.depth`` tells which)."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def steer(self, message: str | UserMessage) -> None:
        """Steer the oldest running outer exec (or the next one, if none is running)."""
        with self._lock:
            if self._agents:
                self._agents[0].steer(message)
            else:
                self._steering.append(message)

    def follow_up(self, message: str | UserMessage) -> None:
        """Queue a follow-up for the oldest running outer exec (or the next one)."""
        with self._lock:
            if self._agents:
                self._agents[0].follow_up(message)
            else:
                self._follow_ups.append(message)

    def abort(self) -> None:
        """Abort every exec of this runtime that is running or asked for (``aexec()``
        called, not started yet), at every depth. Safe from any thread (a UI thread, a worker
        thread running a sync function). An abort while no exec is asked for
        does nothing."""
        self._waves.abort()  # a nested exec's signal, set by its parent's too, acts once

    # -- the application's own entry point ----------------------------------------------

    async def acall(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` as the application would, with this runtime current: an
        ``@agentic_function`` (or any code that reads :func:`~openprogram.tools.current_runtime`)
        runs its ``exec`` calls on this runtime, and a ``runtime`` parameter ``fn`` declares
        is given this runtime when the caller does not pass one. A synchronous ``fn`` runs in a
        worker thread (its ``exec`` calls then run their own loops there, as from a tool
        body), so this loop stays free to abort it; returns what ``fn`` returns::

            answer = await runtime.acall(plan_trip, "Oslo")
        """
        if "runtime" not in kwargs and _takes_runtime(fn):
            kwargs["runtime"] = self
        token = current_runtime_var.set(self)
        try:
            if inspect.iscoroutinefunction(getattr(fn, "__wrapped__", fn)):
                return await fn(*args, **kwargs)
            value = await asyncio.to_thread(fn, *args, **kwargs)
            return await value if inspect.isawaitable(value) else value
        finally:
            current_runtime_var.reset(token)

    def call(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """The synchronous form of :meth:`acall`."""
        if "runtime" not in kwargs and _takes_runtime(fn):
            kwargs["runtime"] = self
        token = current_runtime_var.set(self)
        try:
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                return asyncio.run(_awaited(value))
            return value
        finally:
            current_runtime_var.reset(token)

    # -- exec ----------------------------------------------------------------------------

    def exec(
        self,
        content: Content | None,
        tools: Sequence[Any] | None = None,
        toolset: str | None = None,
        tools_source: str | None = None,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] | None = None,
        tool_choice: ToolChoice = "auto",
        parallel_tool_calls: bool | None = None,
        max_iterations: int | None = None,
        choices: Sequence[Any] | None = None,
        *,
        history: Sequence[AnyMessage] = (),
    ) -> Any:
        """Run the tool-call loop and return the final assistant text.

        ``history`` continues a conversation: messages the model sees before ``content``
        (user messages, replies with tool calls, their results). Each tool call in it must
        have exactly one result after it (a reply that ended ``error``/``aborted`` needs
        none), else :class:`~openprogram.errors.InvalidArgumentError` names the call. The
        history is not emitted as events and not part of the run's messages (only
        ``content`` and what follows are); the list given is not modified.

        ``content=None`` continues without a new prompt: the model is sent the history as
        it is (a user turn not yet answered, or tool results the reply before them awaits),
        and no prompt message is emitted or added. The history must then end with a user
        message or a tool result, else :class:`~openprogram.errors.InvalidArgumentError`
        says what it ends with; ``choices=`` needs a prompt (its instruction goes in it)::

            runtime.exec(None, tools=[search], history=messages)  # answer what is pending

        Raises :class:`~openprogram.errors.ModelError` when the run ends on an error stop
        (its message is the provider's) and :class:`~openprogram.errors.RunAbortedError`
        when it is aborted. Called where an event loop is running (a sync tool body, which
        blocks that loop), the nested run goes on a nested event loop of the same thread,
        with the tool's context variables, and ``exec`` returns when it ends; no thread is
        started.
        """
        # asked for here (as aexec does), so an abort from now on reaches it
        run = self.aexec(
            content,
            tools,
            toolset,
            tools_source,
            tools_allow,
            tools_deny,
            tool_choice,
            parallel_tool_calls,
            max_iterations,
            choices,
            history=history,
        )
        if _get_running_loop() is None:
            return asyncio.run(run)
        return run_nested(run)

    def aexec(
        self,
        content: Content | None,
        tools: Sequence[Any] | None = None,
        toolset: str | None = None,
        tools_source: str | None = None,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] | None = None,
        tool_choice: ToolChoice = "auto",
        parallel_tool_calls: bool | None = None,
        max_iterations: int | None = None,
        choices: Sequence[Any] | None = None,
        *,
        history: Sequence[AnyMessage] = (),
    ) -> Coroutine[Any, Any, Any]:
        """The awaitable form of :meth:`exec` (same parameters and result).

        The exec is asked for when ``aexec()`` is called, not when the coroutine starts: a
        :meth:`abort` in between (``asyncio.create_task(runtime.aexec(...))`` then
        ``runtime.abort()``) aborts it before the model is called. Its arguments are
        checked then too: a bad one raises from the ``aexec()`` call, and so does one nested
        deeper than :attr:`max_depth` (:class:`~openprogram.errors.NestingDepthError`).
        """
        depth = _current_depth.get() + 1
        if depth > self._max_depth:
            raise self._too_deep(depth)
        if depth > 1:  # the outer exec and its first nesting start on a shallow stack
            self._check_stack(depth)
        try:
            if tool_choice == "auto" and parallel_tool_calls is None and max_iterations is None:
                options = self._plain_options()
            else:
                options = RunOptions(
                    tool_choice=tool_choice,
                    parallel_tool_calls=parallel_tool_calls,
                    max_iterations=max_iterations,
                    max_tokens=self.max_tokens,
                    temperature=self.temperature,
                )
            policy = ToolPolicy.of(toolset, tools_source, tools_allow, tools_deny)
        except RecursionError as exc:
            if depth == 0:
                raise
            raise self._recursion_hit(depth, exc) from exc
        call = _ExecCall(
            content=content,
            tools=tools,
            policy=policy,
            options=options,
            choices=choices,
            history=history,
        )
        return self._start(call)

    def _plain_options(self) -> RunOptions:
        """The options of an exec that sets none of its own: built (and checked) once for
        this runtime's ``max_tokens`` and ``temperature``, again when either is changed."""
        plain = self._plain
        max_tokens, temperature = self.max_tokens, self.temperature
        if (
            plain is None
            or plain.max_tokens is not max_tokens
            or (plain.temperature is not temperature)
        ):
            plain = self._plain = RunOptions(max_tokens=max_tokens, temperature=temperature)
        return plain

    def _too_deep(self, depth: int) -> NestingDepthError:
        limit = self._max_depth
        return NestingDepthError(
            f"nested exec refused: it would run at depth {depth}, deeper than this runtime's "
            f"max_depth={limit} (the outer exec is depth 0, each exec from a tool one deeper); "
            "finish with what you have instead of nesting again, or raise the limit with "
            "Runtime(max_depth=N)",
            depth=depth,
            max_depth=limit,
        )

    def _check_stack(self, depth: int) -> None:
        """Refuse a nested exec that would start with fewer than :data:`STACK_MARGIN` of
        Python's frames left (each level of async execs on one task holds about nine). The
        frames left are probed, not counted: a tracer (coverage, a debugger) makes each frame
        cost more of the limit."""
        if _has_frames_left(STACK_MARGIN):
            return
        limit = sys.getrecursionlimit()
        raise NestingDepthError(
            f"nested exec refused: it would run at depth {depth} with fewer than "
            f"{STACK_MARGIN} of Python's {limit} stack frames left (sys.getrecursionlimit()), "
            "too few for a run; finish with what you have instead of nesting again, or nest "
            f"less: this runtime's max_depth is {self._max_depth} (Runtime(max_depth=N))",
            depth=depth,
            max_depth=self._max_depth,
        )

    def _recursion_hit(self, depth: int, exc: BaseException) -> NestingDepthError:
        """What a ``RecursionError`` inside a nested exec becomes: an error naming the depth,
        Python's limit and the setting."""
        limit = self._max_depth
        return NestingDepthError(
            f"the nested exec at depth {depth} hit Python's recursion limit "
            f"(sys.getrecursionlimit() is {sys.getrecursionlimit()}): {exc}. Each level of "
            "async execs awaited on one task adds about nine Python frames: nest less, or lower "
            f"this runtime's max_depth (now {limit}; Runtime(max_depth=N)) so the nesting "
            "stops with a clear error first",
            depth=depth,
            max_depth=limit,
        )

    def _start(self, call: _ExecCall) -> Coroutine[Any, Any, Any]:
        """Make the exec's abort signal (the exec whose tool asks for it adopts it, on any
        runtime, so that exec's abort reaches it from now on; :meth:`abort` reaches it from
        now on through the runtime's waves) and return the coroutine that runs it."""
        signal = AbortSignal()
        parent = _current_signal.get()
        if parent is not None:
            parent.adopt(signal)
        return self._run_exec(call, signal, self._waves.wave)

    async def _run_exec(self, call: _ExecCall, signal: AbortSignal, asked: object | None) -> Any:
        """Run one exec: its agent in its scope, then its reply (or its pick); ``asked``:
        the runtime's last abort when the exec was asked for."""
        self._waves.start(signal, asked)
        try:
            menu = Menu(call.choices) if call.choices is not None else None
            agent, scope, prompts = self._prepare(call, menu, signal)
            replies: list[str] = []
            if menu is not None:
                agent.before_finish = _reask_once(menu, replies)
            scope.enter()
            self._enter(agent, scope.depth)
            try:
                result = await agent.prompt(prompts, signal=signal, run_id=scope.run_id)
                text = self._finish(result, scope.depth)
                return text if menu is None else await self._decide(menu, text, replies)
            finally:
                self._leave(agent)
                scope.leave()
        except RecursionError as exc:
            depth = _current_depth.get() + 1
            if depth == 0 or isinstance(exc, OpenProgramError):
                raise
            raise self._recursion_hit(depth, exc) from exc
        finally:
            self._waves.end(signal)

    def _prepare(
        self, call: _ExecCall, menu: Menu | None, signal: AbortSignal
    ) -> tuple[Agent, _Scope, list[UserMessage]]:
        """Check the history; build the exec's agent, its scope and its prompt (none when
        the exec continues the history)."""
        checked = check_history(call.history)
        history = checked.messages
        if call.content is None:
            _check_continue(history, menu)
        policy = call.policy.merged_over(_current_policy.get())
        resolved = self._resolve_tools(call.tools, policy)
        loaded = current_loaded_var.get()
        scope = _Scope(
            resolved if call.tools is not None else None,
            policy,
            self,
            set() if loaded is None else loaded,
            signal,
        )
        deferral = Deferral.of(resolved, scope.loaded)
        agent = Agent(
            self.provider,
            system_prompt=self.system_prompt,
            tools=_with_search_tool(resolved, deferral),
            messages=history,
            options=call.options,
            depth=scope.depth,
            parent_run_id=scope.parent_run_id,
            provider_tools=deferral.provider_tools() if deferral is not None else None,
            listeners=self._listeners,  # shared: runtime subscribers see every depth
        )
        agent.state.context.call_ids = checked.call_ids  # the run need not scan for them
        if call.content is None:
            return agent, scope, []
        prompt = _as_prompt(call.content)
        if menu is not None:
            prompt = UserMessage(
                [*prompt.content, TextContent(menu.instruction())], timestamp=now_ms()
            )
        return agent, scope, [prompt]

    # -- steps ---------------------------------------------------------------------------

    def _resolve_tools(self, tools: Sequence[Any] | None, policy: ToolPolicy) -> list[Tool]:
        """The tools this exec offers: the caller's ``tools=`` list, else the one inherited
        from the outer exec, else every registered tool; then the gating layers (see
        :mod:`openprogram.tools`) under the merged policy."""
        if tools is not None:
            if isinstance(tools, (str, bytes)):
                raise ArgumentTypeError(
                    f"tools={tools!r} must be a list of tools, not a string; pass the tool "
                    "objects, or use toolset= / tools_allow= to pick registered tools by name"
                )
            chosen = [as_tool(entry) for entry in tools]
        else:
            inherited = _current_tools.get()
            chosen = inherited if inherited is not None else self.registry.tools()
        return self.registry.select_policy(chosen, policy).tools

    async def _decide(self, menu: Menu, reply: str, replies: list[str]) -> Any:
        """Map the final reply to its pick and carry it out. A malformed first pick was
        already re-asked inside the run (see :func:`_reask_once`); a reply still malformed
        is a :class:`DecisionError`."""
        if not replies or replies[-1] != reply:
            replies.append(reply)
        try:
            pick = menu.parse(reply)
        except PickError as error:
            again = ", even after a re-ask" if len(replies) > 1 else ""
            raise DecisionError(
                f"exec(choices=...): the model did not pick a valid option{again}: {error}. "
                f"Its reply: {reply!r}",
                reply=reply,
                replies=replies,
                reason=str(error),
            ) from None
        if pick.tool is None:
            return pick.value
        value = pick.tool.run("choice", pick.args, None, None)
        return await value if inspect.isawaitable(value) else value

    def _enter(self, agent: Agent, depth: int) -> None:
        with self._lock:
            self._agents.append(agent)
            if depth == 0:
                while self._steering:
                    agent.steer(self._steering.popleft())
                while self._follow_ups:
                    agent.follow_up(self._follow_ups.popleft())

    def _leave(self, agent: Agent) -> None:
        """Messages the run did not deliver (it reached its cap, was aborted, or they came
        as it ended) stay the runtime's: they go to the oldest exec still running, else
        back to the queue for the next one."""
        with self._lock:
            if agent in self._agents:
                self._agents.remove(agent)
            steering, follow_ups = agent.take_queued()
            if self._agents:
                heir = self._agents[0]
                for message in steering:
                    heir.steer(message)
                for message in follow_ups:
                    heir.follow_up(message)
            else:
                self._steering.extend(steering)
                self._follow_ups.extend(follow_ups)

    def _finish(self, result: LoopResult, depth: int) -> str:
        final = result.final
        text = final.text if final is not None else ""
        self.last_run = ExecResult(text, result, depth)
        error = result.error
        if (
            result.reason == "error"
            and depth > 0
            and isinstance(error, RecursionError)
            and not isinstance(error, OpenProgramError)
        ):
            raise self._recursion_hit(depth, error) from error
        if result.reason == "error":
            detail = (final.error_message if final is not None else None) or "unknown error"
            raise ModelError(detail, final) from result.error
        if result.reason == "aborted":
            detail = (final.error_message if final is not None else None) or "run aborted"
            raise RunAbortedError(detail, final)
        return text


def _reask_once(
    menu: Menu, replies: list[str]
) -> Callable[[AssistantMessage | None], list[UserMessage]]:
    """The re-ask of ``exec(choices=)``: when the run would finish on a malformed pick, one
    re-ask message enters as a follow-up, so the exec stays one run (one ``agent_end``)."""

    def before_finish(last: AssistantMessage | None) -> list[UserMessage]:
        if replies or last is None or last.stop_reason in ("error", "aborted"):
            return []
        replies.append(last.text)
        try:
            menu.parse(last.text)
        except PickError as error:
            return [UserMessage.of(menu.reask(str(error)))]
        return []

    return before_finish


def _check_continue(history: Sequence[AnyMessage], menu: Menu | None) -> None:
    """An exec with ``content=None`` (no new prompt) needs a history the model can answer:
    one that ends with a user message or a tool result."""
    fix = (
        "pass content (the next user turn), or a history that ends with a user message or "
        "a tool result"
    )
    if menu is not None:
        raise InvalidArgumentError(
            "exec(content=None, choices=...): a pick needs a prompt to carry its instruction; "
            "pass content (the question the model picks an answer to)"
        )
    if not history:
        raise InvalidArgumentError(
            f"exec(content=None) continues the history without a new prompt, but history= "
            f"is empty, so there is nothing to answer; {fix}"
        )
    last = history[-1]
    if isinstance(last, AssistantMessage):
        raise InvalidArgumentError(
            f"exec(content=None) continues the history without a new prompt, but the "
            f"history ends with an assistant message (history[{len(history) - 1}], "
            f"stop_reason {last.stop_reason!r}): the model would be asked to answer its own "
            f"reply; {fix}"
        )


def _as_prompt(content: Content) -> UserMessage:
    if isinstance(content, UserMessage):
        return content
    if isinstance(content, str):
        return UserMessage.of(content)
    blocks = list(content)
    if not blocks or not all(isinstance(b, (TextContent, ImageContent)) for b in blocks):
        raise ArgumentTypeError(
            f"exec content must be a str, a UserMessage or a list of TextContent/ImageContent "
            f"blocks, got {content!r}"
        )
    return UserMessage(blocks, timestamp=now_ms())


def _has_frames_left(count: int) -> bool:
    """Whether ``count`` more Python frames fit under the recursion limit."""
    try:
        _descend(count)
    except RecursionError:
        return False
    return True


def _descend(count: int) -> int:
    return 0 if count <= 0 else _descend(count - 1)


def _takes_runtime(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` declares a ``runtime`` parameter (an ``@agentic_function`` looks the
    runtime up itself when it is not passed)."""
    try:
        return "runtime" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


async def _awaited(value: Any) -> Any:
    return await value
