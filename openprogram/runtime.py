"""``Runtime.exec``: the call users write, and the context variables for nested exec.

Example::

    runtime = Runtime(provider=ScriptedModel([...]))
    answer = runtime.exec("What is 2+3?", tools=[add])

``exec`` is synchronous; ``aexec`` is the awaitable twin. A tool body that calls ``exec``
again opens a nested loop one level deeper; without ``tools=`` it inherits the outer
call's ``tools=`` list (through the ``_current_tools`` context variable).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from openprogram.agent.agent import Agent
from openprogram.agent.agent_loop import Listener, LoopResult
from openprogram.errors import ModelError, RunAbortedError
from openprogram.providers.base import Provider, ToolChoice, check_tool_choice, get_provider
from openprogram.tools._tool import Tool, as_tool
from openprogram.tools.registry import ToolRegistry, default_registry
from openprogram.types import ImageContent, TextContent, UserMessage, now_ms

__all__ = ["UNSET", "ExecResult", "Runtime", "current_depth"]


class _Unset:
    """Sentinel for "not given" where ``None`` means something else."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = _Unset()

_current_tools: contextvars.ContextVar[list[Tool] | None] = contextvars.ContextVar(
    "_current_tools", default=None
)
"""The ``tools=`` list of the innermost running exec that was given one."""

_current_depth: contextvars.ContextVar[int] = contextvars.ContextVar("_current_depth", default=-1)
"""Depth of the innermost running exec (-1 outside any)."""


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
    def model_calls(self) -> int:
        return self.loop.model_calls


Content = str | UserMessage | Sequence[TextContent | ImageContent]


class Runtime:
    """Binds a provider, a registry and listeners; runs ``exec`` calls.

    ``Runtime(model="openai:gpt-4o-mini")`` resolves a provider by name;
    ``Runtime(provider=obj)`` takes any object implementing the provider protocol.
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
        **provider_options: Any,
    ) -> None:
        if provider is None:
            if model is None:
                raise TypeError(
                    "Runtime needs a model string (e.g. Runtime(model='openai:gpt-4o-mini')) "
                    "or a provider object (Runtime(provider=...))"
                )
            provider = get_provider(model, **provider_options)
        elif provider_options:
            raise TypeError(
                f"provider options {sorted(provider_options)} only apply with model=; "
                "configure the provider object directly"
            )
        self.provider = provider
        self.model = model
        self.registry = registry if registry is not None else default_registry
        self.system_prompt = system_prompt
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.last_run: ExecResult | None = None
        self._listeners: list[Listener] = []
        self._agents: list[Agent] = []
        self._steering: deque[str | UserMessage] = deque()
        self._follow_ups: deque[str | UserMessage] = deque()
        self._lock = threading.Lock()

    # -- events and queues ---------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Receive the events of every exec at every depth (``event.depth`` tells which)."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def steer(self, message: str | UserMessage) -> None:
        """Steer the outermost running exec (or the next one, if none is running)."""
        with self._lock:
            if self._agents:
                self._agents[0].steer(message)
            else:
                self._steering.append(message)

    def follow_up(self, message: str | UserMessage) -> None:
        """Queue a follow-up for the outermost running exec (or the next one)."""
        with self._lock:
            if self._agents:
                self._agents[0].follow_up(message)
            else:
                self._follow_ups.append(message)

    def abort(self) -> None:
        """Abort every running exec of this runtime."""
        with self._lock:
            agents = list(self._agents)
        for agent in agents:
            agent.abort()

    # -- exec ----------------------------------------------------------------------------

    def exec(
        self,
        content: Content,
        tools: Sequence[Any] | _Unset | None = UNSET,
        toolset: str | None = None,
        tools_source: str | None = None,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] | None = None,
        tool_choice: ToolChoice = "auto",
        parallel_tool_calls: bool | None = None,
        max_iterations: int | None = None,
        choices: Sequence[Any] | None = None,
    ) -> Any:
        """Run the tool-call loop and return the final assistant text.

        Raises :class:`~openprogram.errors.ModelError` when the run ends on an error stop
        (its message is the provider's) and :class:`~openprogram.errors.RunAbortedError`
        when it is aborted. Inside a running event loop (a tool body) the nested loop runs
        in a worker thread, with the context variables copied.
        """
        coro_args = (
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
        )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.aexec(*coro_args))
        return _run_in_thread(lambda: asyncio.run(self.aexec(*coro_args)))

    async def aexec(
        self,
        content: Content,
        tools: Sequence[Any] | _Unset | None = UNSET,
        toolset: str | None = None,
        tools_source: str | None = None,
        tools_allow: Sequence[str] | None = None,
        tools_deny: Sequence[str] | None = None,
        tool_choice: ToolChoice = "auto",
        parallel_tool_calls: bool | None = None,
        max_iterations: int | None = None,
        choices: Sequence[Any] | None = None,
    ) -> Any:
        """The awaitable form of :meth:`exec` (same parameters and result)."""
        if choices is not None:
            raise NotImplementedError("exec(choices=...) is not implemented yet")
        check_tool_choice(tool_choice)
        explicit = not isinstance(tools, _Unset) and tools is not None
        resolved = self._resolve_tools(tools, toolset, tools_allow, tools_deny)
        depth = _current_depth.get() + 1
        agent = Agent(
            self.provider,
            system_prompt=self.system_prompt,
            tools=resolved,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls,
            max_iterations=max_iterations,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            depth=depth,
            listeners=self._listeners,  # shared: runtime subscribers see every depth
        )
        depth_token = _current_depth.set(depth)
        tools_token = _current_tools.set(resolved) if explicit else None
        self._enter(agent, depth)
        try:
            result = await agent.prompt(_as_prompt(content))
        finally:
            self._leave(agent)
            if tools_token is not None:
                _current_tools.reset(tools_token)
            _current_depth.reset(depth_token)
        return self._finish(result, depth)

    # -- steps ---------------------------------------------------------------------------

    def _resolve_tools(
        self,
        tools: Sequence[Any] | _Unset | None,
        toolset: str | None,
        allow: Sequence[str] | None,
        deny: Sequence[str] | None,
    ) -> list[Tool]:
        if not isinstance(tools, _Unset) and tools is not None:
            if isinstance(tools, (str, bytes)):
                raise TypeError(
                    f"tools={tools!r} must be a list of tools, not a string; pass the tool "
                    "objects, or use toolset= / tools_allow= to pick registered tools by name"
                )
            chosen = [as_tool(entry) for entry in tools]
        elif toolset == "none":
            chosen = []
        else:
            inherited = _current_tools.get()
            chosen = inherited if inherited is not None else self.registry.resolve(toolset)
        if allow is not None:
            allowed = set(allow)
            chosen = [t for t in chosen if t.name in allowed]
        if deny is not None:
            denied = set(deny)
            chosen = [t for t in chosen if t.name not in denied]
        return chosen

    def _enter(self, agent: Agent, depth: int) -> None:
        with self._lock:
            self._agents.append(agent)
            if depth == 0:
                while self._steering:
                    agent.steer(self._steering.popleft())
                while self._follow_ups:
                    agent.follow_up(self._follow_ups.popleft())

    def _leave(self, agent: Agent) -> None:
        with self._lock:
            if agent in self._agents:
                self._agents.remove(agent)
            if not self._agents:
                # keep what the run did not deliver (cap reached) for the next exec
                self._steering.extend(agent.queued_steering)
                self._follow_ups.extend(agent.queued_follow_ups)

    def _finish(self, result: LoopResult, depth: int) -> str:
        final = result.final
        text = final.text if final is not None else ""
        self.last_run = ExecResult(text, result, depth)
        if result.reason == "error":
            detail = (final.error_message if final is not None else None) or "unknown error"
            raise ModelError(detail, final) from result.error
        if result.reason == "aborted":
            detail = (final.error_message if final is not None else None) or "run aborted"
            raise RunAbortedError(detail, final)
        return text


def _as_prompt(content: Content) -> UserMessage:
    if isinstance(content, UserMessage):
        return content
    if isinstance(content, str):
        return UserMessage.of(content)
    blocks = list(content)
    if not blocks or not all(isinstance(b, (TextContent, ImageContent)) for b in blocks):
        raise TypeError(
            f"exec content must be a str, a UserMessage or a list of TextContent/ImageContent "
            f"blocks, got {content!r}"
        )
    return UserMessage(blocks, timestamp=now_ms())


def _run_in_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a new thread with a copy of the current context; wait for it."""
    ctx = contextvars.copy_context()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = ctx.run(fn)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="openprogram-nested-exec", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
