"""How deep execs nest (issue 23, item 12): ``Runtime(max_depth=N)``, default 32, is one
rule for sync and async nesting. A nested exec past it fails where it is called with a
``NestingDepthError`` naming the depth and the setting, which the model sees as the tool's
error result; a ``RecursionError`` inside a nested run becomes one too. Before, async
nesting died near depth 108 with a bare ``RecursionError``, and sync nesting took a thread
and an event loop per level until the process ran out of file descriptors."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from _support import OPENING, compact, tool

from openprogram import (
    ArgumentTypeError,
    InvalidArgumentError,
    ModelError,
    NestingDepthError,
    Runtime,
    ToolRegistry,
    current_depth,
)
from openprogram.runtime import DEFAULT_MAX_DEPTH, STACK_MARGIN
from openprogram_sim.models import FunctionModel, ScriptedRequest
from openprogram_sim.trace import TraceRecorder


def refused(depth: int, max_depth: int) -> str:
    return (
        f"nested exec refused: it would run at depth {depth}, deeper than this runtime's "
        f"max_depth={max_depth} (the outer exec is depth 0, each exec from a tool one deeper); "
        "finish with what you have instead of nesting again, or raise the limit with "
        "Runtime(max_depth=N)"
    )


def dive_model(request: ScriptedRequest) -> Any:
    """Every run's first reply calls ``dive`` (which nests one level deeper); its second
    reply ends it."""
    if request.round == 1:
        return {"tool_calls": [{"dive": {}}]}
    return "up"


def diving_runtime(kind: str, **kwargs: Any) -> tuple[Runtime, dict[str, Any], TraceRecorder]:
    """A runtime whose ``dive`` tool calls ``exec`` (sync) or awaits ``aexec`` (async) on the
    same runtime again, with no end of its own."""
    runtime = Runtime(provider=FunctionModel(dive_model), registry=ToolRegistry(), **kwargs)

    def sync_dive() -> str:
        return str(runtime.exec("dive"))

    async def async_dive() -> str:
        return str(await runtime.aexec("dive"))

    rec = TraceRecorder()
    runtime.subscribe(rec)
    return runtime, tool("dive", sync_dive if kind == "sync" else async_dive), rec


def a_level(depth: int, inner: list[str]) -> list[str]:
    """The whole sequence of one run of ``dive_model`` whose ``dive`` call gives ``inner``
    (the nested run's events) and ends ``ok``/``error`` as ``inner`` says."""
    outcome = "error" if not inner else "ok"
    pad = "  " * depth
    return (
        [
            pad + e
            for e in [
                *OPENING,
                "message_end:assistant[dive]/toolUse",
                "tool_start:dive",
            ]
        ]
        + inner
        + [
            pad + e
            for e in [
                f"tool_end:dive:{outcome}",
                "message_start:toolResult",
                "message_end:toolResult",
                "turn_end",
                "turn_start",
                "message_start:assistant",
                "message_end:assistant[]/stop",
                "turn_end",
                "agent_end:stop",
            ]
        ]
    )


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_past_max_depth_the_nested_exec_is_the_tools_error(kind: str) -> None:
    """``max_depth=2``: the outer exec (depth 0) and two nested ones run; the exec the depth-2
    tool asks for is refused, before any run starts, and the model sees why. Every run then
    finishes normally."""
    runtime, dive, rec = diving_runtime(kind, max_depth=2)
    assert runtime.exec("go", tools=[dive]) == "up"
    assert compact(rec.trace, depth=True) == a_level(0, a_level(1, a_level(2, [])))
    ends = [
        (e["depth"], e["error_kind"], e["result"])
        for e in rec.trace
        if e["type"] == "tool_execution_end"
    ]
    assert ends == [(2, "raised", refused(3, 2)), (1, None, "up"), (0, None, "up")]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_default_limit_is_32_for_sync_and_async_alike(kind: str) -> None:
    """With no ``max_depth``, nesting stops at depth 32, well before the async chain would
    reach Python's recursion limit, and before a sync chain spends a thread per level past
    it. No tool result is a bare ``RecursionError``."""
    before = threading.active_count()
    runtime, dive, rec = diving_runtime(kind)
    assert runtime.max_depth == DEFAULT_MAX_DEPTH == 32
    assert runtime.exec("go", tools=[dive]) == "up"
    errors = [e for e in rec.trace if e["type"] == "tool_execution_end" and e["is_error"]]
    assert [(e["depth"], e["result"]) for e in errors] == [(32, refused(33, 32))]
    ends = [e["depth"] for e in rec.trace if e["type"] == "agent_end"]
    assert ends == list(range(32, -1, -1))
    assert all(e["reason"] == "stop" for e in rec.trace if e["type"] == "agent_end")
    assert threading.active_count() == before  # every worker thread of the sync chain ended


def test_max_depth_zero_allows_no_nested_exec_and_the_error_carries_the_numbers() -> None:
    runtime = Runtime(provider=FunctionModel(dive_model), registry=ToolRegistry(), max_depth=0)
    caught: list[NestingDepthError] = []

    async def dive() -> str:
        try:
            return str(await runtime.aexec("dive"))
        except NestingDepthError as exc:
            caught.append(exc)
            raise

    assert runtime.exec("go", tools=[tool("dive", dive)]) == "up"
    (error,) = caught
    assert (error.depth, error.max_depth, str(error)) == (1, 0, refused(1, 0))
    assert isinstance(error, RecursionError)  # `except RecursionError` still catches it


def test_max_depth_can_be_raised_on_the_runtime() -> None:
    runtime, dive, rec = diving_runtime("async", max_depth=2)
    runtime.max_depth = 40
    assert runtime.exec("go", tools=[dive]) == "up"
    errors = [e for e in rec.trace if e["type"] == "tool_execution_end" and e["is_error"]]
    assert [(e["depth"], e["result"]) for e in errors] == [(40, refused(41, 40))]


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (
            -1,
            InvalidArgumentError,
            "max_depth=-1 must be >= 0: the deepest nesting level an exec may run at "
            "(default 32; 0 allows no nested exec)",
        ),
        (
            "8",
            ArgumentTypeError,
            "max_depth='8' must be an int: the deepest nesting level an exec may run at "
            "(default 32; 0 allows no nested exec)",
        ),
        (
            True,
            ArgumentTypeError,
            "max_depth=True must be an int: the deepest nesting level an exec may run at "
            "(default 32; 0 allows no nested exec)",
        ),
    ],
)
def test_a_bad_max_depth_is_refused_when_the_runtime_is_built(
    value: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as raised:
        Runtime(provider=FunctionModel(dive_model), max_depth=value)
    assert str(raised.value) == message


def test_a_raised_max_depth_still_stops_before_pythons_recursion_limit() -> None:
    """``max_depth`` raised far past what Python's recursion limit allows: the chain of
    async execs is refused where fewer than ``STACK_MARGIN`` frames are left, with an error
    naming the depth, the frames left and the setting; every run ends with one
    ``agent_end``. Before, the chain hit the limit itself (near depth 108): a bare
    ``RecursionError``, and the deepest run's ``agent_end`` could be lost."""
    runtime, dive, rec = diving_runtime("async", max_depth=5000)
    assert runtime.exec("go", tools=[dive]) == "up"
    errors = [e for e in rec.trace if e["type"] == "tool_execution_end" and e["is_error"]]
    assert len(errors) == 1
    depth = errors[0]["depth"] + 1
    assert 20 < depth < 110
    assert errors[0]["result"] == (
        f"nested exec refused: it would run at depth {depth} with fewer than {STACK_MARGIN} of "
        f"Python's {sys.getrecursionlimit()} stack frames left (sys.getrecursionlimit()), too "
        "few for a run; finish with what you have instead of nesting again, or nest less: "
        "this runtime's max_depth is 5000 (Runtime(max_depth=N))"
    )
    starts = [e["depth"] for e in rec.trace if e["type"] == "agent_start"]
    ends = [e["depth"] for e in rec.trace if e["type"] == "agent_end"]
    assert sorted(starts) == sorted(ends) == list(range(depth))


def test_a_recursion_error_in_a_nested_model_call_is_named() -> None:
    """The model of the nested run (a provider with a bug) recurses without end: that run
    ends on an error stop, and its exec raises a ``NestingDepthError`` naming the depth,
    Python's limit and the setting, chained from the ``RecursionError``; the tool above
    shows the model that text. At depth 0 the same stop stays a ``ModelError``."""

    def endless(n: int) -> int:
        return endless(n + 1)

    def reply(request: ScriptedRequest) -> Any:
        if current_depth() == 0 and request.round == 1:
            return {"tool_calls": [{"dive": {}}]}
        if current_depth() == 0:
            return "up"
        return endless(0)

    runtime = Runtime(provider=FunctionModel(reply), registry=ToolRegistry())
    caught: list[BaseException] = []

    async def dive() -> str:
        try:
            return str(await runtime.aexec("dive"))
        except NestingDepthError as exc:
            caught.append(exc)
            raise

    rec = TraceRecorder()
    runtime.subscribe(rec)
    assert runtime.exec("go", tools=[tool("dive", dive)]) == "up"
    (error,) = caught
    assert type(error.__cause__) is RecursionError
    assert (error.depth, error.max_depth) == (1, 32)
    (end,) = [e for e in rec.trace if e["type"] == "tool_execution_end"]
    assert end["result"] == str(error)
    assert end["result"] == (
        "the nested exec at depth 1 hit Python's recursion limit (sys.getrecursionlimit() is "
        f"{sys.getrecursionlimit()}): maximum recursion depth exceeded. Each level of async "
        "execs awaited on one task adds about nine Python frames: nest less, or lower this "
        "runtime's max_depth (now 32; Runtime(max_depth=N)) so the nesting stops with a "
        "clear error first"
    )
    assert [(e["depth"], e["reason"]) for e in rec.trace if e["type"] == "agent_end"] == [
        (1, "error"),
        (0, "stop"),
    ]
    with pytest.raises(ModelError, match=r"^Provider raised RecursionError: maximum recursion"):
        Runtime(provider=FunctionModel(lambda request: endless(0))).exec("go", tools=[])


class Endless:
    """A broken object: reading its ``spec`` (or iterating it) recurses without end."""

    @property
    def spec(self) -> Any:
        return self.spec

    def execute(self) -> str:
        return "never"

    def __iter__(self) -> Iterator[str]:
        return iter(self)


@pytest.mark.parametrize("where", ["tools", "tools_allow"])
def test_a_recursion_error_while_a_nested_exec_starts_is_named(where: str) -> None:
    """A ``RecursionError`` raised while a nested exec is set up (reading a broken tool
    entry, or a ``tools_allow`` that recurses when iterated) is a ``NestingDepthError`` for
    the model too; at depth 0 it leaves ``exec`` as it is (nothing is nested there)."""
    runtime = Runtime(provider=FunctionModel(dive_model), registry=ToolRegistry())
    kwargs: dict[str, Any] = (
        {"tools": [Endless()]} if where == "tools" else {"tools_allow": Endless()}
    )

    async def dive() -> str:
        assert current_depth() == 0
        return str(await runtime.aexec("dive", **kwargs))

    rec = TraceRecorder()
    runtime.subscribe(rec)
    assert runtime.exec("go", tools=[tool("dive", dive)]) == "up"
    (error,) = [e for e in rec.trace if e["type"] == "tool_execution_end" and e["is_error"]]
    assert error["result"].startswith(
        "the nested exec at depth 1 hit Python's recursion limit (sys.getrecursionlimit() is "
    )
    assert "maximum recursion depth exceeded" in error["result"]
    assert "max_depth (now 32; Runtime(max_depth=N))" in error["result"]
    with pytest.raises(RecursionError) as raised:
        runtime.exec("go", **kwargs)
    assert type(raised.value) is RecursionError
