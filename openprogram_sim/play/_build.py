"""Turning a scenario into runtime objects: its tools (simulated, or the user's own), its
registry, the exec call's arguments, the starting history, and the listener that queues
steering and the abort at their points (the run's top level is :mod:`._conversation`'s)."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable
from typing import Any

from openprogram import Runtime, ToolRegistry, ToolResult
from openprogram.events import AgentEvent
from openprogram.tools import as_tool
from openprogram.types import (
    AnyMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from openprogram_sim.errors import ToolFailure
from openprogram_sim.play._history import HistoryKeeper, StepRecord
from openprogram_sim.scenario import (
    MAX_BYTES,
    ExecArgs,
    Scenario,
    ToolDef,
    resolve_python,
)

__all__ = ["Build", "Injections", "history_messages"]


_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _fill(content: str, args: dict[str, Any]) -> str:
    """``content`` with each ``{name}`` that names an argument replaced by its value (as
    ``str`` writes it), and ``{{``/``}}`` written as one brace. Nothing else is
    interpreted: format specs (``{topic:>99}``), attributes (``{topic.__class__}``) and
    indexes stay as written, so a scenario file cannot make the prompt larger than its
    pieces or reach into an argument's object. A prompt that would pass
    the loader's :data:`~openprogram_sim.scenario.MAX_BYTES` is the tool's error, measured
    before it is built."""
    pieces: list[str] = []
    end = 0
    for found in _PLACEHOLDER.finditer(content):
        name = found.group(1)
        if name is None or name in args:
            value = found.group()[0] if name is None else str(args[name])
            pieces += [content[end : found.start()], value]
            end = found.end()
    pieces.append(content[end:])
    size = sum(map(len, pieces))
    if size > MAX_BYTES:
        raise ToolFailure(
            f"the nested exec's content would be {size:,} characters once its arguments are "
            f"filled in; the limit is {MAX_BYTES:,} (the scenario file's, fixed): pass "
            "shorter arguments or fewer placeholders"
        )
    return "".join(pieces)


def _returns(spec: ToolDef) -> Callable[[], Any]:
    values = spec.returns
    if not isinstance(values, list):
        return lambda: values
    calls = {"n": 0}

    def next_value() -> Any:
        i = min(calls["n"], len(values) - 1)
        calls["n"] += 1
        return values[i] if values else None

    return next_value


def _outcomes(spec: ToolDef) -> Callable[[], Any]:
    """The next call's outcome from ``outcomes:`` (the last repeats): its value, or a raise."""
    outcomes = spec.outcomes or []
    calls = {"n": 0}

    def next_outcome() -> Any:
        outcome = outcomes[min(calls["n"], len(outcomes) - 1)]
        calls["n"] += 1
        if outcome.raises is not None:
            raise ToolFailure(outcome.raises)
        return outcome.returns

    return next_outcome


def history_messages(scenario: Scenario) -> list[AnyMessage]:
    """The scenario's ``history:`` as engine messages."""
    out: list[AnyMessage] = []
    for m in scenario.history:
        if m.role == "user":
            out.append(UserMessage.of(m.text))
        elif m.role == "assistant":
            content: list[Any] = [TextContent(m.text)] if m.text else []
            content += [
                ToolCall(id=str(c["id"]), name=str(c["name"]), arguments=c.get("arguments", {}))
                for c in m.tool_calls
            ]
            stop: Any = "toolUse" if m.tool_calls else "stop"
            out.append(AssistantMessage(content=content, stop_reason=stop))
        else:
            out.append(
                ToolResultMessage(
                    str(m.tool_call_id), str(m.tool_name), [TextContent(m.text)], m.is_error
                )
            )
    return out


def _result(value: Any) -> Any:
    """A ``{$error: text}`` return value is an error result the tool returns (not raises)."""
    if isinstance(value, dict) and len(value) == 1 and "$error" in value:
        return ToolResult.text(str(value["$error"]), is_error=True)
    return value


class Build:
    """Turns a scenario into runtime objects (tools resolved by name, exec kwargs); the
    user's Python the scenario names is imported here, as the run is built (see
    :func:`~openprogram_sim.scenario.resolve_python`)."""

    def __init__(self, scenario: Scenario, runtime_box: dict[str, Runtime]) -> None:
        self.scenario = scenario
        self.box = runtime_box
        self.given_history: list[AnyMessage] | None = None
        """The history the outer exec was given (None: not known, as for ``call:``)."""
        self.history = HistoryKeeper()
        """Subscribed by the runner: what the outer exec added to its history."""
        self.holding = False
        """The next simulated tool body waits for the abort (``abort: {during_tool: N}``)."""
        self.held: set[str] = set()
        """The tools whose simulated body :meth:`_held` wraps."""
        self.trace: list[dict[str, Any]] = []
        """The run's trace as it is recorded (the runner sets it)."""
        self.steps: list[StepRecord] = []
        """A conversation's execs as they end (see :mod:`._conversation`)."""
        self.objects = resolve_python(scenario)
        """The user's objects the scenario names, imported now (a :class:`ScenarioError`
        naming the file and line when one does not import or is refused)."""
        self.entries: dict[str, Any] = {}
        for name, spec in scenario.tools.items():
            self.entries[name] = self._entry(name, spec)
        self.registry = self._registry()

    def release(self) -> None:
        """Once the run has ended: drop the references that make the run's objects a cycle
        (the simulated tools' bodies reach the runtime through :attr:`box`, and this build
        through their closures, which the registry and :attr:`entries` hold), so they are
        freed as soon as nothing else holds them, not by the cyclic garbage collector. The
        build serves no further run: its tools are gone (the outcome keeps the trace, the
        history and the steps, which stay)."""
        self.box.clear()
        self.entries.clear()
        self.registry = ToolRegistry()

    def python(self, ref: str) -> Any:
        """The user's object ``ref`` (one of the scenario's references) names."""
        return self.objects[ref]

    def _registry(self) -> ToolRegistry:
        """A fresh registry of the scenario's tools, over a copy of the user's registry
        when ``registry:`` names one (its toolsets, gating and deferred tools)."""
        registry = ToolRegistry()
        if self.scenario.registry:
            registry.restore(self.python(self.scenario.registry).snapshot())
        for entry in self.entries.values():
            registry.register(entry, replace=True)
        for set_name, members in self.scenario.toolsets.items():
            registry.define_toolset(set_name, members)
        return registry

    def _entry(self, name: str, spec: ToolDef) -> Any:
        if spec.python is not None:
            real = as_tool(self.python(spec.python))
            if spec.returns is None and spec.raises is None and spec.outcomes is None:
                return real  # the user's own tool, run for real
            stub = as_tool({"spec": real.spec, "execute": self._body(name, spec)})
            stub.gates = real.gates
            return stub
        return {
            "spec": {"name": name, "description": spec.description, "parameters": spec.parameters},
            "execute": self._body(name, spec),
            "defer": spec.defer,
            "toolsets": spec.toolsets,
            "expose": spec.expose,
            "unsafe_in": spec.unsafe_in,
            "requires_env": spec.requires_env,
        }

    def _body(self, name: str, spec: ToolDef) -> Callable[..., Any]:
        body = self._simulated(name, spec)
        steps = self.scenario.conversation or ()
        aborts = [self.scenario.abort, *(step.abort for step in steps)]
        if not any(a is not None and a.during_tool for a in aborts):
            return body
        self.held.add(name)
        return self._held(body)

    def _held(self, body: Callable[..., Any]) -> Callable[..., Any]:
        """``body``, waiting for the abort when it is the call ``abort: {during_tool: N}``
        names (:class:`Injections` sets :attr:`holding` as that call starts), so the abort
        lands while the tool is really in flight."""
        reports = "on_update" in inspect.signature(body).parameters

        async def held(on_update: Any = None, **args: Any) -> Any:
            if self.holding:
                self.holding = False
                await asyncio.get_running_loop().create_future()  # the abort cancels it
            value = body(on_update=on_update, **args) if reports else body(**args)
            return await value if inspect.isawaitable(value) else value

        return held

    def _simulated(self, name: str, spec: ToolDef) -> Callable[..., Any]:
        if spec.raises is not None:
            message = spec.raises

            def fail(**_: Any) -> Any:
                raise ToolFailure(message)

            return fail
        nested = spec.exec
        if nested is not None:

            async def nested_exec(**args: Any) -> Any:
                content = _fill(nested.content, args)
                return await self.box["runtime"].aexec(content, **self.exec_kwargs(nested))

            return nested_exec
        next_value = _outcomes(spec) if spec.outcomes is not None else _returns(spec)
        if spec.updates:
            updates = list(spec.updates)

            def report_then_return(on_update: Any = None, **_: Any) -> Any:
                for partial in updates:
                    if on_update is not None:
                        on_update(partial)
                return _result(next_value())

            return report_then_return
        return lambda **_: _result(next_value())

    def exec_kwargs(self, args: ExecArgs) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "toolset": args.toolset,
            "tools_source": args.tools_source,
            "tools_allow": args.tools_allow,
            "tools_deny": args.tools_deny,
            "tool_choice": (
                args.tool_choice
                if isinstance(args.tool_choice, str)
                else args.tool_choice.model_dump()
            ),
            "parallel_tool_calls": args.parallel_tool_calls,
            "max_iterations": args.max_iterations,
        }
        if args.tools is not None:
            kwargs["tools"] = [self._named(n) for n in args.tools]
        if args.choices is not None:
            kwargs["choices"] = [
                self._named(c) if isinstance(c, str) and c in self.registry else c
                for c in args.choices
            ]
        return kwargs

    def _named(self, name: str) -> Any:
        return self.entries[name] if name in self.entries else self.registry.get(name)


class Injections:
    """Queues the file's steering messages and its abort at their points, counting as the
    events arrive; every entry at one point is delivered, in file order. What never fired
    is left in :attr:`unfired` (the check fails the scenario on it).

    The abort points that land while something is in flight (``during_tool``, and
    ``during_turn`` for a reply with latency or that streams nothing) are queued on the
    event loop as the tool call or the model call starts: the abort then lands at its first
    await, while it waits."""

    def __init__(
        self,
        scenario: Scenario,
        runtime: Runtime,
        build: Build | None = None,
        *,
        calls_before: int = 0,
    ) -> None:
        """``scenario`` gives the points (a conversation's step view, for one of its execs);
        ``calls_before``: the model calls before this exec (its turns come after them)."""
        self.runtime = runtime
        self.build = build
        self.tools = 0
        self.started = 0
        self.turns = 0
        self.replies = 0
        self.streaming = False
        abort = scenario.abort
        self.early = (
            abort is not None
            and abort.during_turn is not None
            and _waits_first(scenario, calls_before + abort.during_turn)
        )
        """``during_turn`` lands while the model call waits, before any streamed piece."""
        self.wants_updates = abort is not None and abort.during_turn is not None and not self.early
        """Only a mid-stream abort needs the streamed pieces (see :mod:`openprogram.agent`)."""
        self.unfired: set[str] = set()
        self.by_point: dict[tuple[str, int], list[tuple[str, str | None]]] = {}
        for i, entry in enumerate(scenario.steering):
            point = ("after_tool", entry.after_tool) if entry.after_tool is not None else None
            point = point or ("after_round", entry.after_round or 0)
            self._add(point, f"steering[{i}]", entry.text)
        if abort is not None:
            self._add(abort.point(), "abort", None)

    def _add(self, point: tuple[str, int], name: str, text: str | None) -> None:
        self.by_point.setdefault(point, []).append((name, text))
        self.unfired.add(name)

    def _fire(self, point: tuple[str, int]) -> None:
        for name, text in self.by_point.get(point, ()):
            self.unfired.discard(name)
            if text is None:
                self.runtime.abort()
            else:
                self.runtime.steer(text)

    def _tool_started(self, name: str) -> None:
        self.started += 1
        point = ("during_tool", self.started)
        if point not in self.by_point:
            return
        if self._awaits(name):
            if self.build is not None:
                self.build.holding = True
            self._fire_soon(point)  # lands at the body's first await
        else:
            self._fire(point)  # a sync body runs with the abort requested

    def _awaits(self, name: str) -> bool:
        """Whether tool ``name``'s body awaits, so an abort can land while it runs: a
        simulated body held for it, or an async one of the user's."""
        if self.build is None:
            return False
        tool = self.build.registry.get(name)
        return name in self.build.held or (tool is not None and tool.is_async)

    def _fire_soon(self, point: tuple[str, int]) -> None:
        """Fire ``point`` once what just started first waits (the next turn of the loop)."""
        if point in self.by_point:
            asyncio.get_running_loop().call_soon(self._fire, point)

    def __call__(self, event: AgentEvent) -> None:
        kind = event.type
        if kind == "tool_execution_end":
            self.tools += 1
            if self.build is not None:
                self.build.holding = False  # a call no simulated body ran for
            self._fire(("after_tool", self.tools))
        elif event.type == "tool_execution_start":
            self._tool_started(event.tool_name)
        elif kind == "turn_end" and event.depth == 0:
            self._fire(("after_round", event.round))
        elif kind == "turn_start":
            self.turns += 1
            if self.early:
                self._fire_soon(("during_turn", self.turns))
        elif event.type == "message_start" and event.message.role == "assistant":
            self.replies += 1
            self.streaming = True
        elif kind == "message_update" and self.streaming:
            self.streaming = False  # after the reply's first streamed piece
            self._fire(("during_turn", self.replies))


def _waits_first(scenario: Scenario, n: int) -> bool:
    """Whether scripted turn ``n`` waits before its first streamed piece: it has latency,
    or it streams nothing (it hangs until aborted)."""
    if not isinstance(scenario.model, list) or not 1 <= n <= len(scenario.model):
        return False
    turn = scenario.model[n - 1]
    return bool(turn.latency) or not (turn.text or turn.thinking or turn.tool_calls)
