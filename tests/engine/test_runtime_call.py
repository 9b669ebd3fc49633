"""Runtime.call / acall: the application's own entry point, with the runtime current."""

from __future__ import annotations

import asyncio

from _support import compact

from openprogram import Runtime, ToolRegistry, agentic_function, current_runtime
from openprogram_sim.models import ScriptedModel
from openprogram_sim.trace import TraceRecorder


@agentic_function(registry=None)
def ask(question: str, runtime: Runtime) -> str:
    """Ask the model."""
    return str(runtime.exec(question, tools=[]))


@agentic_function(registry=None)
def ask_current(question: str) -> str:
    """Ask the model on the current runtime."""
    runtime = current_runtime()
    assert runtime is not None
    return str(runtime.exec(question, tools=[]))


@agentic_function(registry=None)
async def ask_async(question: str, runtime: Runtime) -> str:
    """Ask the model, awaiting."""
    return str(await runtime.aexec(question, tools=[]))


def _runtime(*turns: str) -> tuple[Runtime, TraceRecorder]:
    runtime = Runtime(provider=ScriptedModel(list(turns)), registry=ToolRegistry())
    recorder = TraceRecorder()
    runtime.subscribe(recorder)
    return runtime, recorder


def test_call_passes_itself_as_the_runtime_parameter() -> None:
    runtime, recorder = _runtime("42")
    assert runtime.call(ask, "meaning?") == "42"
    assert compact(recorder.trace)[0] == "agent_start"
    assert compact(recorder.trace)[-1] == "agent_end:stop"
    assert {e["depth"] for e in recorder.trace} == {0}  # the app's exec is the outer one


def test_call_makes_itself_current_for_functions_that_look_it_up() -> None:
    runtime, _ = _runtime("yes")
    assert runtime.call(ask_current, "ok?") == "yes"
    assert current_runtime() is None  # and not after


def test_acall_runs_a_sync_function_in_a_worker_thread_and_an_async_one_awaited() -> None:
    runtime, recorder = _runtime("one", "two")

    async def main() -> list[str]:
        return [await runtime.acall(ask, "first"), await runtime.acall(ask_async, "second")]

    assert asyncio.run(main()) == ["one", "two"]
    assert [e["reason"] for e in recorder.trace if e["type"] == "agent_end"] == ["stop", "stop"]


def test_a_plain_callable_taking_runtime_gets_it() -> None:
    runtime, _ = _runtime("hi")

    def app(name: str, runtime: Runtime) -> str:
        return f"{name}: {runtime.exec('greet', tools=[])}"

    assert runtime.call(app, "bot") == "bot: hi"
    assert runtime.call(lambda: 7) == 7


def test_a_listener_that_wants_no_updates_is_sent_none() -> None:
    class Quiet:
        wants_updates = False

        def __init__(self) -> None:
            self.types: list[str] = []

        def __call__(self, event: object) -> None:
            self.types.append(event.type)  # type: ignore[attr-defined]

    quiet, everything = Quiet(), []
    runtime = Runtime(provider=ScriptedModel(["a reply long enough to stream in pieces"]))
    runtime.subscribe(quiet)
    runtime.subscribe(lambda e: everything.append(e.type))
    runtime.exec("hi", tools=[])
    assert "message_update" not in quiet.types
    assert everything.count("message_update") >= 2
    assert [t for t in everything if t != "message_update"] == quiet.types
