"""@function and @agentic_function: Python callables that are also tools."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest
from pydantic import BaseModel, field_validator
from tools_support import run_with, tool_results

from openprogram import (
    Runtime,
    ToolDefinitionError,
    ToolRegistry,
    agentic_function,
    as_tool,
    current_runtime,
    function,
)
from openprogram.tools import default_registry
from openprogram_sim.models import ScriptedModel


def test_bare_function_registers_in_the_default_registry_and_stays_callable() -> None:
    @function
    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    assert shout("hi") == "HI"
    assert shout.__name__ == "shout" and shout.__doc__ == "Shout."
    assert default_registry.get("shout") is as_tool(shout)  # the conftest restores it


def test_with_arguments_into_a_given_registry(registry: ToolRegistry) -> None:
    @function(registry=registry, name="add_numbers")
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    assert add(2, 3) == 5
    assert registry.names() == ["add_numbers"]
    assert "add_numbers" not in default_registry
    assert as_tool(add).source is add


def test_registry_none_registers_nowhere() -> None:
    @function(registry=None)
    def hidden() -> None:
        """H."""

    assert "hidden" not in default_registry


def test_a_clashing_name_is_refused_with_the_fix(registry: ToolRegistry) -> None:
    @function(registry=registry)
    def fetch(url: str) -> str:
        """Fetch."""
        return url

    def other(url: str) -> str:
        """Other."""
        return url

    with pytest.raises(ToolDefinitionError) as info:
        function(registry=registry, name="fetch")(other)
    assert str(info.value) == (
        f"tool name 'fetch' is already registered (by {__name__}."
        "test_a_clashing_name_is_refused_with_the_fix.<locals>.fetch); pass name='...' to the "
        "decorator to register this one under another name, use another registry "
        "(registry=ToolRegistry()), or unregister the old one"
    )


def test_redefining_the_same_function_replaces_it(registry: ToolRegistry) -> None:
    """A module reloaded defines the same function again: that is not a clash."""
    tools = []
    for version in (1, 2):

        @function(registry=registry)
        def reloadable(v: int = version) -> int:
            """R."""
            return v

        tools.append(reloadable)
    assert registry.get("reloadable") is as_tool(tools[1])
    assert registry.register(as_tool(tools[0]), replace=True) is as_tool(tools[0])


def test_available_if_false_never_registers(registry: ToolRegistry) -> None:
    def broken() -> bool:
        raise ImportError("no optional dependency")

    @function(registry=registry, available_if=broken)
    def fancy() -> str:
        """Fancy."""
        return "ok"

    @function(registry=registry, available_if=lambda: True)
    def plain() -> str:
        """Plain."""
        return "ok"

    assert registry.names() == ["plain"]
    assert fancy() == "ok"  # still the Python function
    assert not fancy.gates.available


def test_injected_parameters_are_hidden_and_supplied(registry: ToolRegistry) -> None:
    seen: dict[str, Any] = {}

    @function(registry=registry)
    def work(
        n: int, tool_call_id: str, cancel: Any, on_update: Any, runtime: Runtime | None
    ) -> str:
        """Work."""
        on_update({"done": n})
        seen.update(id=tool_call_id, cancel=cancel, runtime=runtime)
        return "worked"

    assert list(work.spec.parameters["properties"]) == ["n"]
    runtime, _, rec = run_with(
        [{"tool_calls": [{"name": "work", "arguments": {"n": 1}, "id": "c9"}]}, "end"], registry
    )
    assert runtime.exec("go") == "end"
    assert seen["id"] == "c9"
    assert isinstance(seen["cancel"], asyncio.Event)
    assert seen["runtime"] is runtime
    assert rec.lines("tool_execution_start", "tool_execution_update", "tool_execution_end") == [
        "tool_execution_start:work@0.1",
        "tool_execution_update:work@0.1",
        "tool_execution_end:work:ok@0.1",
    ]


def test_closures_of_one_def_and_wrapped_functions_each_get_their_own_injection(
    registry: ToolRegistry,
) -> None:
    """``{"spec", "execute"}`` tools made again and again from one ``def`` share what is
    injected; two ``functools.wraps`` wrappers of one decorator follow the functions they
    wrap."""
    seen: list[tuple[str, Any]] = []

    def logged(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            seen.append((fn.__name__, kwargs.get("tool_call_id")))
            return fn(*args, **kwargs)

        return wrapper

    def with_id(n: int, tool_call_id: str) -> str:
        """Takes the call's id."""
        return tool_call_id

    def without_id(n: int) -> str:
        """Takes no id."""
        return "plain"

    def made(k: int) -> Any:
        def echo(n: int, tool_call_id: str) -> str:
            """Echo."""
            seen.append((f"echo{k}", tool_call_id))
            return str(n)

        echo.__name__ = f"echo{k}"
        return echo

    for fn in (logged(with_id), logged(without_id), made(1), made(2)):
        parameters = {"type": "object", "properties": {"n": {"type": "integer"}}}
        spec = {"name": fn.__name__, "description": "A tool.", "parameters": parameters}
        registry.register({"spec": spec, "execute": fn})
    calls = [
        {"name": name, "arguments": {"n": 1}, "id": f"c-{name}"}
        for name in ("with_id", "without_id", "echo1", "echo2")
    ]
    runtime, _, _ = run_with([{"tool_calls": calls}, "end"], registry)
    assert runtime.exec("go") == "end"
    assert seen == [
        ("with_id", "c-with_id"),
        ("without_id", None),
        ("echo1", "c-echo1"),
        ("echo2", "c-echo2"),
    ]


def test_agentic_function_called_from_python_with_an_explicit_runtime() -> None:
    @agentic_function
    def ask(question: str, runtime: Runtime) -> str:
        """Ask the model."""
        assert current_runtime() is runtime  # nested agentic calls inherit it
        return str(runtime.exec(question, toolset="none"))

    model = ScriptedModel(["42"])
    runtime = Runtime(provider=model, registry=ToolRegistry())
    assert ask("meaning?", runtime=runtime) == "42"
    assert ask.agentic and "ask" not in default_registry  # not registered by default
    assert [(r.depth, r.round, r.tools) for r in model.requests] == [(0, 1, [])]


def test_agentic_function_without_a_runtime_says_how_to_get_one() -> None:
    @agentic_function
    def ask(question: str, runtime: Runtime) -> str:
        """Ask."""
        return question

    with pytest.raises(TypeError) as info:
        ask("q")
    assert str(info.value) == (
        "ask() needs a runtime: pass runtime=Runtime(...), or call it from code running under "
        "Runtime.exec (a tool body), which supplies its own"
    )


def test_agentic_function_picked_by_the_model_opens_a_nested_loop(
    registry: ToolRegistry,
) -> None:
    @agentic_function
    def research(topic: str, runtime: Runtime) -> str:
        """Research a topic."""
        return f"notes: {runtime.exec(f'look into {topic}', toolset='none')}"

    @agentic_function
    def summarize(text: str) -> str:
        """Summarize (calls research from Python: the runtime is injected)."""
        return research(text)

    runtime, model, rec = run_with(
        [{"tool_calls": [{"summarize": {"text": "owls"}}]}, "owls hoot", "done"], registry
    )
    assert runtime.exec("go", tools=[summarize]) == "done"
    assert tool_results(rec) == [("summarize", False, "notes: owls hoot")]
    assert [(r.depth, r.round, r.tools) for r in model.requests] == [
        (0, 1, ["summarize"]),
        (1, 1, []),
        (0, 2, ["summarize"]),
    ]
    assert rec.lines("agent_start", "tool_execution_start", "agent_end") == [
        "agent_start@0.0",
        "tool_execution_start:summarize@0.1",
        "agent_start@1.0",
        "agent_end:stop@1.1",
        "agent_end:stop@0.2",
    ]


def test_agentic_self_recursion_is_bounded(registry: ToolRegistry) -> None:
    @agentic_function(max_depth=2)
    def dig(runtime: Runtime) -> str:
        """Dig deeper."""
        return str(runtime.exec("deeper"))  # inherits tools=[dig]

    turns: list[Any] = [{"tool_calls": [{"dig": {}}]}] * 3 + ["bottom", "mid", "top"]
    runtime, model, rec = run_with(turns, registry)
    assert runtime.exec("go", tools=[dig]) == "top"
    assert tool_results(rec) == [
        (
            "dig",
            True,
            "agentic function 'dig' is already running 2 levels deep (max_depth=2); finish "
            "with what you have instead of calling it again",
        ),
        ("dig", False, "bottom"),
        ("dig", False, "mid"),
    ]
    assert [r.depth for r in model.requests] == [0, 1, 2, 2, 1, 0]


def test_async_agentic_function_runs_as_a_tool(registry: ToolRegistry) -> None:
    @agentic_function
    async def fetch_all(urls: list[str], runtime: Runtime) -> str:
        """Fetch all."""
        await asyncio.sleep(0)
        return str(await runtime.aexec(f"read {len(urls)}", toolset="none"))

    runtime, model, _ = run_with(
        [{"tool_calls": [{"fetch_all": {"urls": ["a", "b"]}}]}, "read 2", "ok"], registry
    )
    assert runtime.exec("go", tools=[fetch_all]) == "ok"
    assert [m.text for m in model.requests[2].messages[-1:]] == ["read 2"]


def test_execute_validates_like_the_model_path(registry: ToolRegistry) -> None:
    @function(registry=registry)
    def double(n: int) -> int:
        """Double."""
        return n * 2

    assert double.execute(n="21") == 42
    with pytest.raises(ValueError, match='Validation failed for tool "double"'):
        double.execute(n="many")


class Even(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError("must be even")
        return value


def test_conversion_errors_read_like_validation_errors(registry: ToolRegistry) -> None:
    @function(registry=registry)
    def halve(pair: Even) -> int:
        """Halve."""
        return pair.n // 2

    runtime, _, rec = run_with([{"tool_calls": [{"halve": {"pair": {"n": 3}}}]}, "ok"], registry)
    runtime.exec("go")
    assert tool_results(rec) == [
        (
            "halve",
            True,
            'Validation failed for tool "halve":\n  - pair.n: Value error, must be even',
        )
    ]


def test_a_tool_needing_a_runtime_outside_any_exec(registry: ToolRegistry) -> None:
    @agentic_function
    def needs(runtime: Runtime) -> str:
        """Needs a runtime."""
        return "never"

    with pytest.raises(RuntimeError) as info:
        needs.tool.run("c1", {}, None, None)
    assert str(info.value) == (
        "tool 'needs' needs a runtime and none is running; offer it through Runtime.exec"
    )
