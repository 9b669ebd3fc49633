"""The error tree: every error the engine raises on purpose is an ``OpenProgramError``, and
misuse raises its specific error, which is still the standard exception it always was."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import pytest

import openprogram.errors
from openprogram import Agent, Runtime, ToolRegistry, ToolSpec, agentic_function, as_tool
from openprogram.errors import (
    AgentBusyError,
    AgenticRecursionError,
    ArgumentTypeError,
    InvalidArgumentError,
    NoRuntimeError,
    OpenProgramError,
    ToolDefinitionError,
    ToolEntryError,
    ToolSchemaError,
    UsageError,
)
from openprogram.providers import check_tool_choice, parse_response, register_provider
from openprogram.tools import ToolPolicy, compile_validator
from openprogram_sim.models import ScriptedModel


def test_every_error_is_in_the_tree_drawn_in_the_module_docstring() -> None:
    doc = openprogram.errors.__doc__ or ""
    for name in openprogram.errors.__all__:
        cls = getattr(openprogram.errors, name)
        assert issubclass(cls, OpenProgramError), name
        assert re.search(rf"^[ │├└─]+{name}\b", doc, re.M), f"{name} is not drawn in errors.py"


def _runtime() -> Runtime:
    return Runtime(provider=ScriptedModel(["ok"]), registry=ToolRegistry())


def _prompt_while_running() -> None:
    agent = Agent(ScriptedModel([{"text": "x", "fault": "hang"}]))

    async def main() -> None:
        task = asyncio.create_task(agent.prompt("one"))
        while not agent.state.is_streaming:
            await asyncio.sleep(0)
        try:
            await agent.prompt("two")
        finally:
            agent.abort()
            await task

    asyncio.run(main())


def _recurse_too_deep() -> None:
    @agentic_function(max_depth=1)
    def dig(runtime: Runtime) -> str:
        """Dig."""
        return dig(runtime=runtime)

    dig(runtime=_runtime())


def _run_outside_exec() -> None:
    @agentic_function
    def needs(runtime: Runtime) -> str:
        """Needs a runtime."""
        return "never"

    needs.tool.run("c1", {}, None, None)


def _call_without_runtime() -> None:
    @agentic_function
    def ask(question: str, runtime: Runtime) -> str:
        """Ask."""
        return question

    ask("q")


MISUSE: list[tuple[str, Callable[[], Any], type[OpenProgramError], type[Exception]]] = [
    ("tool_choice", lambda: check_tool_choice("sometimes"), InvalidArgumentError, ValueError),
    ("provider name", lambda: register_provider("a:b", Runtime), InvalidArgumentError, ValueError),
    (
        "api name",
        lambda: parse_response("cohere", b"{}", content_type="application/json"),
        InvalidArgumentError,
        ValueError,
    ),
    ("empty choices", lambda: _runtime().exec("go", choices=[]), InvalidArgumentError, ValueError),
    (
        "built-in toolset",
        lambda: ToolRegistry().define_toolset("full", ["x"]),
        InvalidArgumentError,
        ValueError,
    ),
    ("no model", lambda: Runtime(), ArgumentTypeError, TypeError),
    (
        "tools as a string",
        lambda: _runtime().exec("go", tools="search"),
        ArgumentTypeError,
        TypeError,
    ),
    ("exec content", lambda: _runtime().exec(["text"]), ArgumentTypeError, TypeError),  # type: ignore[arg-type]
    ("steer content", lambda: Agent(ScriptedModel([])).steer(1), ArgumentTypeError, TypeError),  # type: ignore[arg-type]
    ("allow as a string", lambda: ToolPolicy.of(allow="x"), ArgumentTypeError, TypeError),
    ("no runtime argument", _call_without_runtime, ArgumentTypeError, TypeError),
    ("prompt while running", _prompt_while_running, AgentBusyError, RuntimeError),
    ("tool outside exec", _run_outside_exec, NoRuntimeError, RuntimeError),
    ("tool name as entry", lambda: as_tool("search"), ToolEntryError, TypeError),
    (
        "spec without a name",
        lambda: ToolSpec.coerce({"description": "x"}, entry="e"),
        ToolEntryError,
        TypeError,
    ),
    (
        "parameters not a dict",
        lambda: ToolSpec.coerce({"name": "x", "parameters": []}, entry="e"),
        ToolSchemaError,
        TypeError,
    ),
    ("invalid schema", lambda: compile_validator({"type": 5}), ToolSchemaError, ValueError),
    ("agentic recursion", _recurse_too_deep, AgenticRecursionError, RecursionError),
]


@pytest.mark.parametrize(
    ("call", "error", "builtin"),
    [case[1:] for case in MISUSE],
    ids=[case[0] for case in MISUSE],
)
def test_misuse_raises_its_own_error_which_is_also_the_standard_one(
    call: Callable[[], Any], error: type[OpenProgramError], builtin: type[Exception]
) -> None:
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, builtin)
    assert isinstance(info.value, OpenProgramError)


def test_the_branches() -> None:
    for usage in (InvalidArgumentError, ArgumentTypeError, AgentBusyError, NoRuntimeError):
        assert issubclass(usage, UsageError)
    for definition in (ToolEntryError, ToolSchemaError):
        assert issubclass(definition, ToolDefinitionError)
        assert issubclass(definition, TypeError)
