"""One checked options object from ``exec`` to the wire: :class:`RunOptions` is checked once,
when built, and every model call's :class:`StreamOptions` carries its fields."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from openprogram import Agent, RunOptions, Runtime
from openprogram.errors import ArgumentTypeError, InvalidArgumentError
from openprogram.events import ProviderEvent
from openprogram.providers import Context, StreamOptions, base
from openprogram.providers.builder import MessageBuilder
from openprogram_sim.models import ScriptedModel


class _Recorder:
    """A provider that answers with a tool call and then text, keeping each call's options."""

    def __init__(self, calls_before_text: int = 1) -> None:
        self.options: list[StreamOptions] = []
        self._tool_rounds = calls_before_text

    async def stream(
        self, context: Context, options: StreamOptions
    ) -> AsyncIterator[ProviderEvent]:
        self.options.append(options)
        builder = MessageBuilder(api="test", model="m")
        yield builder.start()
        if len(self.options) <= self._tool_rounds:
            yield builder.toolcall_start(f"c{len(self.options)}", "noop", 0)
            yield builder.toolcall_end(0)
            yield builder.done("toolUse")
        else:
            yield builder.text_start(0)
            yield builder.text_delta("done", 0)
            yield builder.text_end(0)
            yield builder.done("stop")


def _noop() -> str:
    """Do nothing."""
    return "ok"


def test_run_options_are_checked_once_when_built() -> None:
    with pytest.raises(InvalidArgumentError, match=r"tool_choice='sometimes' is not valid"):
        RunOptions(tool_choice="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError) as info:
        RunOptions(parallel_tool_calls="yes")  # type: ignore[arg-type]
    assert str(info.value) == (
        "parallel_tool_calls='yes' must be True, False or None (the provider's default)"
    )
    with pytest.raises(ArgumentTypeError, match=r"max_iterations='3' must be an int or None"):
        RunOptions(max_iterations="3")  # type: ignore[arg-type]
    with pytest.raises(ArgumentTypeError, match=r"max_tokens=True must be an int or None"):
        RunOptions(max_tokens=True)
    with pytest.raises(TypeError):
        RunOptions("auto")  # type: ignore[call-arg]
    options = RunOptions(tool_choice={"type": "function", "name": "noop"}, max_iterations=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_iterations = 3  # type: ignore[misc]


def test_exec_checks_its_options_once_and_every_call_carries_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checks: list[Any] = []
    real = base.check_tool_choice

    def counting(choice: Any) -> Any:
        checks.append(choice)
        return real(choice)

    monkeypatch.setattr(base, "check_tool_choice", counting)
    provider = _Recorder(calls_before_text=2)
    runtime = Runtime(provider=provider, max_tokens=64, temperature=0.5)
    tools = [{"spec": {"name": "noop", "description": "", "parameters": {}}, "execute": _noop}]
    answer = runtime.exec(
        "go", tools=tools, tool_choice="required", parallel_tool_calls=False, max_iterations=5
    )
    assert answer == "done"
    assert checks == ["required"]  # the runtime's one check; the agent and the loop trust it
    assert [o.round for o in provider.options] == [1, 2, 3]
    for options in provider.options:
        assert (options.tool_choice, options.parallel_tool_calls) == ("required", False)
        assert (options.max_iterations, options.max_tokens, options.temperature) == (5, 64, 0.5)
        assert options.depth == 0 and options.cancel is not None


def test_a_bad_option_raises_from_the_aexec_call_before_the_model_is_asked() -> None:
    model = ScriptedModel([])
    runtime = Runtime(provider=model)
    with pytest.raises(InvalidArgumentError, match=r"tool_choice='never' is not valid"):
        runtime.aexec("go", tool_choice="never")  # type: ignore[arg-type, unused-coroutine]
    assert model.requests == []


def test_an_agent_takes_options_or_their_fields_as_keywords() -> None:
    options = RunOptions(tool_choice="none", max_iterations=1)
    assert Agent(ScriptedModel([]), options=options).options is options
    agent = Agent(ScriptedModel([]), options=options, max_iterations=2, temperature=0.1)
    assert agent.options == RunOptions(tool_choice="none", max_iterations=2, temperature=0.1)
    assert Agent(ScriptedModel([]), max_iterations=3).options == RunOptions(max_iterations=3)
    with pytest.raises(ArgumentTypeError, match=r"max_iterations='x' must be an int"):
        Agent(ScriptedModel([]), max_iterations="x")  # type: ignore[arg-type]
    provider = _Recorder()
    capped = Agent(provider, tools=[], options=RunOptions(max_iterations=1))
    result = asyncio.run(capped.prompt("go"))
    assert (result.reason, result.rounds, len(provider.options)) == ("cap", 1, 1)


def test_stream_options_of_copies_every_run_option() -> None:
    options = RunOptions(
        tool_choice="required",
        parallel_tool_calls=True,
        max_iterations=7,
        max_tokens=9,
        temperature=0.3,
    )
    call = StreamOptions.of(options, cancel=None, depth=2, round=4)
    for field in dataclasses.fields(RunOptions):
        assert getattr(call, field.name) == getattr(options, field.name), field.name
    assert (call.depth, call.round, call.extra) == (2, 4, {})
