"""Registry, toolsets and the gating layers: each layer, their order, and exec's use."""

from __future__ import annotations

from typing import Any

import pytest
from tools_support import run_with

from openprogram import Runtime, ToolRegistry, UnknownToolsetError, agentic_function, function
from openprogram.tools import LAYERS, Dropped

CHECKED: list[str] = []


def _check(name: str, verdict: bool) -> Any:
    def check() -> bool:
        CHECKED.append(name)
        return verdict

    return check


def _define(registry: ToolRegistry, name: str, **gates: Any) -> None:
    def body() -> str:
        return name

    body.__doc__ = f"The {name} tool."
    function(registry=registry, name=name, **gates)(body)


@pytest.fixture
def gated(registry: ToolRegistry) -> ToolRegistry:
    """One tool stopped by each layer, and one that passes them all."""
    CHECKED.clear()
    _define(registry, "ok", toolset="main", check=_check("ok", True))
    _define(registry, "l1", available_if=False)  # never registered
    _define(registry, "l2", expose=False, toolset="main", check=_check("l2", False))
    _define(registry, "l3", check=_check("l3", False))  # not in toolset "main"
    _define(registry, "l4", toolset="main", unsafe_in="chat", check=_check("l4", False))
    _define(registry, "l5", toolset="main", requires_env="L5_KEY")
    _define(registry, "l5b", toolset="main", check=_check("l5b", False))
    _define(registry, "l6", toolset="main")
    _define(registry, "l7", toolset="main")
    return registry


def test_each_layer_drops_its_tool_and_says_why(
    gated: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("L5_KEY", raising=False)
    selection = gated.select(toolset="main", source="chat", allow=["ok", "l2", "l7"], deny=["l7"])
    assert selection.names == ["ok"]
    assert selection.dropped == {
        "l2": Dropped("expose", "expose=False"),
        "l3": Dropped("toolset", "not in toolset 'main'"),
        "l4": Dropped("tools_source", "unsafe in source 'chat'"),
        "l5": Dropped("availability", "environment variable(s) not set: L5_KEY"),
        "l5b": Dropped("availability", "check returned False"),
        "l6": Dropped("tools_allow", "not in tools_allow"),
        "l7": Dropped("tools_deny", "in tools_deny"),
    }
    # availability runs after the name-based layers: no check ran for l2, l3 or l4
    assert CHECKED == ["ok", "l5b"]


def test_layers_apply_in_the_documented_order(registry: ToolRegistry) -> None:
    """Tool i fails layer i and every later one: the first failing layer is reported, so
    allow cannot bring back what an earlier layer removed, and deny beats allow."""
    assert " > ".join(LAYERS) == (
        "available_if > expose > toolset > tools_source > availability > tools_allow > tools_deny"
    )
    tools = []
    for i, layer in enumerate(LAYERS):

        def body() -> None:
            """A tool."""

        flags = dict(
            available_if=i > 0,
            expose=i > 1,
            toolset="other" if i > 2 else (),
            unsafe_in="chat" if i <= 3 else (),
            requires_env="NEVER_SET_ANYWHERE" if i <= 4 else (),
        )
        tools.append(function(registry=None, name=f"t_{layer}", **flags)(body))
    selection = registry.select(
        tools,
        toolset="other",
        source="chat",
        allow=["t_tools_deny"],
        deny=list(f"t_{layer}" for layer in LAYERS),
    )
    assert selection.names == []
    assert {n: d.layer for n, d in selection.dropped.items()} == {f"t_{x}": x for x in LAYERS}


def test_a_check_that_raises_means_unavailable(registry: ToolRegistry) -> None:
    def boom() -> bool:
        raise OSError("socket closed")

    _define(registry, "net", check=boom)
    assert registry.select().dropped == {
        "net": Dropped("availability", "check raised OSError: socket closed")
    }


def test_toolsets_presets_includes_and_declared_membership(registry: ToolRegistry) -> None:
    for name in ("search", "fetch", "edit", "run"):
        _define(registry, name)
    _define(registry, "grep", toolset="coding")
    registry.define_toolset("research", ["search", "fetch"])
    registry.define_toolset("coding", ["edit", "run"], includes=["research"])
    registry.define_toolset("loop", includes=["loop", "coding"])  # a cycle is harmless
    assert registry.toolset_names() == ["full", "none", "research", "coding", "loop"]
    assert registry.select(toolset="research").names == ["search", "fetch"]
    assert registry.select(toolset="coding").names == ["search", "fetch", "edit", "run", "grep"]
    assert registry.select(toolset="loop").names == registry.select(toolset="coding").names
    assert registry.select(toolset="full").names == registry.names()
    assert registry.select(toolset="none").names == []


def test_unknown_toolset_lists_the_known_ones(registry: ToolRegistry) -> None:
    registry.define_toolset("research", [])
    with pytest.raises(UnknownToolsetError) as info:
        registry.select(toolset="reserch")
    assert str(info.value) == (
        "unknown toolset 'reserch'; known toolsets: full, none, research (define one with "
        "registry.define_toolset(name, [...]) or @function(toolset=name))"
    )
    assert isinstance(info.value, ValueError)
    runtime, model, _ = run_with([], registry)
    with pytest.raises(UnknownToolsetError, match="unknown toolset 'reserch'"):
        runtime.exec("go", toolset="reserch")
    assert model.requests == []  # refused before any model call


def test_policy_argument_misuse_is_refused(registry: ToolRegistry) -> None:
    runtime, _, _ = run_with([], registry)
    with pytest.raises(TypeError) as info:
        runtime.exec("go", tools_allow="search")  # type: ignore[arg-type]
    assert str(info.value) == (
        "tools_allow='search' must be a list of tool names, not a string; write "
        "tools_allow=['search']"
    )
    with pytest.raises(ValueError, match="toolset 'full' is built in and cannot be redefined"):
        registry.define_toolset("full", [])


def test_exec_without_tools_offers_the_full_toolset_through_the_layers(
    gated: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("L5_KEY", "k")
    runtime, model, _ = run_with(["a", "b", "c"], gated)
    runtime.exec("go")
    runtime.exec("go", tools_source="chat", tools_deny=["l6"])
    runtime.exec("go", toolset="main", tools_allow=["ok", "l3", "l7"])
    assert [r.tools for r in model.requests] == [
        ["ok", "l5", "l6", "l7"],
        ["ok", "l5", "l7"],
        ["ok", "l7"],
    ]


def test_policy_parameters_trim_a_caller_tools_list(registry: ToolRegistry) -> None:
    tools = [
        function(registry=None, name=n, toolset="t" if n != "c" else ())(lambda: None)
        for n in ("a", "b", "c", "d")
    ]
    runtime, model, _ = run_with(["1", "2", "3"], registry)
    runtime.exec("go", tools=tools, tools_deny=["b"])
    runtime.exec("go", tools=tools, tools_allow=["a", "c", "zzz"])
    runtime.exec("go", tools=tools, toolset="t")
    assert [r.tools for r in model.requests] == [["a", "c", "d"], ["a", "c"], ["a", "b", "d"]]


def _nested_probe(calls: list[dict[str, Any]]) -> Any:
    """An agentic tool whose body runs one nested exec per entry of ``calls``."""

    @agentic_function
    def delegate(runtime: Runtime) -> str:
        """Delegate."""
        return ",".join(str(runtime.exec("inner", **kwargs)) for kwargs in calls)

    return delegate


def test_nested_exec_inherits_tools_and_can_opt_out(registry: ToolRegistry) -> None:
    helper = function(registry=None, name="helper")(lambda: "h")
    delegate = _nested_probe([{}, {"toolset": "none"}, {"tools": []}, {"tools": [helper]}])
    turns = [{"tool_calls": [{"delegate": {}}]}, "i1", "i2", "i3", "i4", "outer"]
    runtime, model, rec = run_with(turns, registry)
    assert runtime.exec("go", tools=[helper, delegate]) == "outer"
    assert [(r.depth, r.tools) for r in model.requests] == [
        (0, ["helper", "delegate"]),
        (1, ["helper", "delegate"]),  # inherited tools=
        (1, []),  # toolset="none" opts out, inherited tools= or not
        (1, []),  # tools=[] opts out
        (1, ["helper"]),
        (0, ["helper", "delegate"]),
    ]
    assert rec.lines("agent_end") == [
        "agent_end:stop@1.1",
        "agent_end:stop@1.1",
        "agent_end:stop@1.1",
        "agent_end:stop@1.1",
        "agent_end:stop@0.2",
    ]


def test_nested_exec_merges_the_outer_policy_inner_keys_win(registry: ToolRegistry) -> None:
    for name in ("a", "b", "c"):
        _define(registry, name, toolset="main")
    delegate = _nested_probe([{}, {"tools_deny": ["delegate"]}, {"toolset": "full"}])
    registry.register(delegate)
    registry.define_toolset("main", ["delegate"])
    turns = [{"tool_calls": [{"delegate": {}}]}, "i1", "i2", "i3", "outer"]
    runtime, model, _ = run_with(turns, registry)
    runtime.exec("go", toolset="main", tools_deny=["b"], tools_source="chat")
    assert [r.tools for r in model.requests] == [
        ["a", "c", "delegate"],
        ["a", "c", "delegate"],  # toolset and deny inherited
        ["a", "b", "c"],  # own deny replaces the outer one; toolset still inherited
        ["a", "c", "delegate"],  # own toolset; deny still inherited
        ["a", "c", "delegate"],
    ]
