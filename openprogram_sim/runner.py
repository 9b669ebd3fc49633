"""Running a scenario: a Runtime with the scenario's tools and a scripted model.

Each run gets a fresh :class:`~openprogram.tools.registry.ToolRegistry` holding the
scenario's tools, a :class:`~openprogram_sim.scripted.ScriptedModel` playing its turns, and
listeners that queue steering at its ``after_tool``/``after_round`` points. The outcome
is the trace, exec's return value or error, and the requests the model saw.
"""

from __future__ import annotations

import asyncio
import string
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openprogram import Runtime, ToolRegistry
from openprogram.events import AgentEvent
from openprogram.types import Usage
from openprogram_sim.scenario import ExecArgs, ModelTurn, Scenario, ToolDef
from openprogram_sim.scripted import ScriptedModel, ScriptedRequest, Turn, TurnToolCall
from openprogram_sim.trace import TraceRecorder

__all__ = ["RunOutcome", "ToolFailure", "build_model", "request_to_dict", "run_scenario"]


class ToolFailure(RuntimeError):
    """What a scenario tool with ``raises:`` raises."""


@dataclass(slots=True)
class RunOutcome:
    """What one scenario run produced."""

    scenario: Scenario
    trace: list[dict[str, Any]]
    result: Any
    """exec's return value (None when it raised)."""
    error: BaseException | None
    requests: list[dict[str, Any]]
    model: ScriptedModel
    duration: float
    """Wall-clock seconds."""
    unconsumed: int = 0
    """Scripted turns never requested."""
    rounds: int = 0
    """Model calls of the outer exec."""
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def model_calls(self) -> int:
        return self.model.calls

    @property
    def error_text(self) -> str | None:
        if self.error is None:
            return None
        return f"{type(self.error).__name__}: {self.error}"


def request_to_dict(request: ScriptedRequest) -> dict[str, Any]:
    """A recorded request as plain fields (what ``expect.requests`` compares)."""
    messages = [_message_fields(m) for m in request.messages]
    return {
        "call": request.index,
        "depth": request.depth,
        "round": request.round,
        "tools": request.tools,
        "tool_choice": request.tool_choice,
        "parallel_tool_calls": request.parallel_tool_calls,
        "system_prompt": request.system_prompt,
        "message_count": len(messages),
        "last_message": messages[-1] if messages else None,
        "messages": messages,
    }


def _message_fields(message: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"role": message.role, "text": message.text}
    if message.role == "assistant":
        fields["tool_calls"] = [
            {"name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    elif message.role == "toolResult":
        fields["tool_name"] = message.tool_name
        fields["is_error"] = message.is_error
    return fields


def _turn(turn: ModelTurn) -> Turn:
    calls = []
    for call in turn.tool_calls:
        if "name" in call:
            calls.append(TurnToolCall(call["name"], call.get("arguments", {}), call.get("id")))
        else:
            ((name, args),) = call.items()
            calls.append(TurnToolCall(str(name), {} if args is None else args))
    return Turn(
        text=turn.text,
        thinking=turn.thinking,
        tool_calls=calls,
        stop_reason=turn.stop_reason,
        error=turn.error,
        usage=Usage(**turn.usage) if turn.usage is not None else None,
        fault=turn.fault,
        latency=turn.latency,
    )


def build_model(scenario: Scenario) -> ScriptedModel:
    """The scripted model for the scenario's ``model:`` turns."""
    if not isinstance(scenario.model, list):  # the loader rejects cassettes for now
        raise TypeError(f"{scenario.path}: model: must be a list of turns")
    return ScriptedModel([_turn(t) for t in scenario.model])


class _Formatter(string.Formatter):
    """Fills ``{param}`` from the tool's arguments; unknown fields stay as written."""

    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        if isinstance(key, str) and key not in kwargs:
            return "{" + key + "}"
        return super().get_value(key, args, kwargs)


_FORMAT = _Formatter()


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


class _Build:
    """Turns a scenario into runtime objects (tools resolved by name, exec kwargs)."""

    def __init__(self, scenario: Scenario, runtime_box: dict[str, Runtime]) -> None:
        self.scenario = scenario
        self.box = runtime_box
        self.entries: dict[str, dict[str, Any]] = {}
        for name, spec in scenario.tools.items():
            self.entries[name] = self._entry(name, spec)

    def _entry(self, name: str, spec: ToolDef) -> dict[str, Any]:
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
        if spec.raises is not None:
            message = spec.raises

            def fail(**_: Any) -> Any:
                raise ToolFailure(message)

            return fail
        nested = spec.exec
        if nested is not None:

            async def nested_exec(**args: Any) -> Any:
                content = _FORMAT.format(nested.content, **args)
                return await self.box["runtime"].aexec(content, **self.exec_kwargs(nested))

            return nested_exec
        next_value = _returns(spec)
        return lambda **_: next_value()

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
            kwargs["tools"] = [self.entries[n] for n in args.tools]
        if args.choices is not None:
            kwargs["choices"] = [
                self.entries[c] if isinstance(c, str) and c in self.entries else c
                for c in args.choices
            ]
        return kwargs


def _steering_listener(scenario: Scenario, runtime: Runtime) -> Callable[[AgentEvent], None]:
    by_tool = {s.after_tool: s.text for s in scenario.steering if s.after_tool is not None}
    by_round = {s.after_round: s.text for s in scenario.steering if s.after_round is not None}
    counter = {"tools": 0}

    def listener(event: AgentEvent) -> None:
        if event.type == "tool_execution_end":
            counter["tools"] += 1
            text = by_tool.get(counter["tools"])
            if text is not None:
                runtime.steer(text)
        elif event.type == "turn_end" and event.depth == 0:
            text = by_round.get(event.round)
            if text is not None:
                runtime.steer(text)

    return listener


async def arun_scenario(scenario: Scenario) -> RunOutcome:
    """Run ``scenario`` once (in the running event loop)."""
    box: dict[str, Runtime] = {}
    build = _Build(scenario, box)
    registry = ToolRegistry(build.entries.values())
    for set_name, members in scenario.toolsets.items():
        registry.define_toolset(set_name, members)
    model = build_model(scenario)
    runtime = Runtime(provider=model, registry=registry, system_prompt=scenario.system_prompt)
    box["runtime"] = runtime
    recorder = TraceRecorder()
    runtime.subscribe(recorder)
    if scenario.steering:
        runtime.subscribe(_steering_listener(scenario, runtime))
    for follow in scenario.follow_ups:
        runtime.follow_up(follow.text)
    start = time.perf_counter()
    result: Any = None
    error: BaseException | None = None
    try:
        result = await runtime.aexec(scenario.exec.content, **build.exec_kwargs(scenario.exec))
    except Exception as exc:  # recorded: the scenario decides whether it was expected
        error = exc
    duration = time.perf_counter() - start
    return RunOutcome(
        scenario,
        recorder.trace,
        result,
        error,
        [request_to_dict(r) for r in model.requests],
        model,
        duration,
        unconsumed=len(model.unconsumed),
        rounds=sum(1 for r in model.requests if r.depth == 0),
    )


def run_scenario(scenario: Scenario) -> RunOutcome:
    """Run ``scenario`` once, synchronously."""
    return asyncio.run(arun_scenario(scenario))
