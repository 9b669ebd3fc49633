"""Running a scenario: a Runtime with the scenario's tools and a model.

Each run gets a fresh :class:`~openprogram.ToolRegistry` holding the scenario's tools, a
model (by default a :class:`~openprogram_sim.models.ScriptedModel` playing its turns; any
provider through the ``provider=`` seam), and listeners that queue steering at its
``after_tool``/``after_round`` points. The outcome is the trace, exec's return value or
error, and the requests the model saw.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openprogram
from openprogram import Runtime
from openprogram.events import AgentEvent, ProviderEvent
from openprogram.providers import Context, Provider, StreamOptions
from openprogram.types import AnyMessage, Usage
from openprogram_sim.errors import MisuseError
from openprogram_sim.models import ScriptedModel, ScriptedRequest
from openprogram_sim.play._build import Build, Injections
from openprogram_sim.play._conversation import entry, step_outcomes
from openprogram_sim.play._deadline import (
    CANCEL_SECONDS,
    Deadline,
    DeadlineInterrupt,
    LoopBlockedError,
    blocked_by,
)
from openprogram_sim.play._history import StepRecord
from openprogram_sim.play._hooks import HookFailure, Hooks
from openprogram_sim.scenario import Scenario, scenario_env
from openprogram_sim.trace import TraceRecorder

__all__ = [
    "GRACE_SECONDS",
    "RecordingProvider",
    "RunOutcome",
    "arun_scenario",
    "build_model",
    "request_to_dict",
    "run_scenario",
]


@dataclass(slots=True, kw_only=True)
class RunOutcome:
    """What one scenario run produced, whatever the provider."""

    scenario: Scenario
    trace: list[dict[str, Any]]
    result: Any
    """exec's return value (None when it raised)."""
    error: BaseException | None
    recorded: list[ScriptedRequest]
    """What the model was sent on each call, as recorded (see :attr:`requests`)."""
    provider: Provider
    """The model the run used: the scenario's :class:`ScriptedModel` unless another
    provider was passed to :func:`run_scenario`."""
    duration: float
    """Wall-clock seconds."""
    usage: list[Usage | None] = field(default_factory=list)
    """Each model call's usage, when the reply reported one."""
    scripted_turns: int | None = None
    """How many turns the script holds (None when the provider is not scripted)."""
    unconsumed: int = 0
    """Scripted turns never requested."""
    rounds: int = 0
    """Model calls of the outer exec."""
    unfired: list[str] = field(default_factory=list)
    """Steering entries (``steering[i]``) and the ``abort`` whose point the run never
    reached."""
    timed_out: int | None = None
    """When the run did not end within the scenario's ``timeout``: how many trace entries
    there were then (the run was aborted at that point)."""
    blocked: str | None = None
    """When the deadline had to interrupt code that blocked the event loop (see
    :func:`run_scenario`): what was running then, e.g. ``"tool 'fetch'"``."""
    extras: dict[str, Any] = field(default_factory=dict)
    hook_failures: list[HookFailure] = field(default_factory=list)
    """What of the scenario's ``setup:``/``teardown:`` failed (or ``fixtures:`` without
    pytest); a setup that failed means the run never started."""
    conversation: list[StepRecord] = field(default_factory=list)
    """A ``conversation:``'s execs, each as it ended (see :attr:`steps`)."""
    final_messages: list[AnyMessage] = field(default_factory=list)
    """The outer exec's history when the run ended: the messages the model would see next
    (see :attr:`history`)."""
    _requests: _Requests | None = field(default=None, repr=False, compare=False)

    @property
    def steps(self) -> list[RunOutcome]:
        """A conversation's execs, each as a run outcome of its own (its events, model
        calls, result or error and history; its scenario the step, with its ``expect:``)."""
        return step_outcomes(self)

    @property
    def started(self) -> bool:
        """Whether the run started: False when its setup failed (or it names pytest fixtures
        and runs without pytest)."""
        return all(f.phase == "teardown" for f in self.hook_failures)

    @property
    def history(self) -> list[dict[str, Any]]:
        """:attr:`final_messages` as plain fields (what ``expect.history`` compares: the
        fields of ``expect.requests``' messages)."""
        return [_message_fields(m) for m in self.final_messages]

    @property
    def requests(self) -> Sequence[dict[str, Any]]:
        """What the model was sent on each call, as plain fields (:func:`request_to_dict`),
        in call order; each converted when first read (a long run's history makes the
        conversion costly, and a check usually reads a few calls, if any)."""
        if self._requests is None:
            self._requests = _Requests(self.recorded)
        return self._requests

    @property
    def model_calls(self) -> int:
        """Model calls of the whole run, nested ones included."""
        return len(self.recorded)

    @property
    def error_text(self) -> str | None:
        if self.error is None:
            return None
        return f"{type(self.error).__name__}: {self.error}"

    @property
    def crashed(self) -> bool:
        """Whether exec raised a ``BaseException`` that is not an ``Exception`` (a tool's
        ``SystemExit``, ``GeneratorExit`` or own ``BaseException`` subclass): the run broke
        rather than failed, and the CLI reports the scenario as an error unless it expects
        that (``expect.raises``)."""
        error = self.error
        return error is not None and not isinstance(error, (Exception, asyncio.CancelledError))

    @property
    def crash(self) -> str | None:
        """When :attr:`crashed`, what to tell the user: the exception, why it left exec,
        and the line of their code that raised it, e.g. ``ToolBoom, a BaseException that
        is not an Exception, left exec (raised at tools.py:12 in explode)``."""
        if not self.crashed:
            return None
        assert self.error is not None
        text = f"{type(self.error).__name__}, a BaseException that is not an Exception, left exec"
        where = _raised_at(self.error)
        return f"{text} (raised at {where})" if where else text


_OWN_CODE = tuple(
    str(folder) + os.sep
    for folder in (
        Path(openprogram.__file__ or ".").resolve().parent,
        Path(__file__).resolve().parents[1],  # openprogram_sim
        Path(asyncio.__file__ or ".").resolve().parent,
    )
)
"""Where the frames of a traceback that are not the user's come from."""


def _raised_at(error: BaseException) -> str | None:
    """``file:line in function`` of the innermost frame of the user's code in ``error``'s
    traceback (the engine's, the harness's and asyncio's frames skipped)."""
    frames = [
        f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(_OWN_CODE)
    ]
    if not frames:
        return None
    last = frames[-1]
    try:
        shown = str(Path(last.filename).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        shown = last.filename
    return f"{shown}:{last.lineno} in {last.name}"


class _Requests(Sequence[dict[str, Any]]):
    """Recorded requests as :func:`request_to_dict` fields, converted one by one on access."""

    __slots__ = ("_done", "_recorded")

    def __init__(self, recorded: list[ScriptedRequest]) -> None:
        self._recorded = recorded
        self._done: dict[int, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self._recorded)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = range(len(self))[index]
        done = self._done.get(i)
        if done is None:
            done = self._done[i] = request_to_dict(self._recorded[i])
        return done

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))


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


def build_model(scenario: Scenario) -> ScriptedModel:
    """The scripted model for the scenario's ``model:`` turns
    (:meth:`~openprogram_sim.scenario.Scenario.turns`: without the ``wire:`` faults the
    scripted model does not play)."""
    return ScriptedModel(scenario.turns())


def _scenario_model(scenario: Scenario) -> Provider:
    """The model a scenario names: its scripted turns, or its cassette replayed through
    the real adapter."""
    if isinstance(scenario.model, list):
        return build_model(scenario)
    # vcrpy loads only for a scenario that names a cassette (a floor below: not a circle)
    from openprogram_sim.cassettes import scenario_provider

    return scenario_provider(scenario)


class RecordingProvider:
    """Wraps any provider to record what it was sent and the usage it reported, so a
    scenario's ``expect.requests`` applies to every provider (a real adapter over HTTP
    included), not only to the scripted model, which records itself."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.requests: list[ScriptedRequest] = []
        self.usage: list[Usage | None] = []

    @property
    def api(self) -> str:
        return str(getattr(self.inner, "api", type(self.inner).__name__))

    def stream(self, context: Context, options: StreamOptions) -> AsyncIterator[ProviderEvent]:
        # the inner stream itself, not a wrapper around each of its events
        self.requests.append(ScriptedRequest.of(len(self.requests) + 1, context, options))
        return self.inner.stream(context, options)

    wants_updates = False

    def __call__(self, event: AgentEvent) -> None:
        """A listener: each model call's reply ends in one assistant ``message_end``, in
        call order; its usage is the call's."""
        if event.type == "message_end" and event.message.role == "assistant":
            self.usage.append(event.message.usage)


def _build_runtime(
    scenario: Scenario, provider: Provider
) -> tuple[Runtime, Build, TraceRecorder, Injections | None, Callable[[], None] | None]:
    """A Runtime over a fresh registry holding the scenario's tools, with the trace recorder,
    the steering and abort points and the follow-ups in place (and the steering listener's
    unsubscribe, when there is one)."""
    box: dict[str, Runtime] = {}
    build = Build(scenario, box)
    runtime = Runtime(
        provider=provider, registry=build.registry, system_prompt=scenario.system_prompt
    )
    box["runtime"] = runtime
    recorder = TraceRecorder()
    runtime.subscribe(recorder)
    runtime.subscribe(build.history)
    build.trace = recorder.trace
    injections = unsubscribe = None
    if scenario.steering or scenario.abort is not None:
        injections = Injections(scenario, runtime, build)
        unsubscribe = runtime.subscribe(injections)
    for follow in scenario.follow_ups:
        runtime.follow_up(follow.text)
    return runtime, build, recorder, injections, unsubscribe


async def arun_scenario(
    scenario: Scenario,
    provider: Provider | None = None,
    *,
    fixtures: dict[str, Any] | None = None,
) -> RunOutcome:
    """Run ``scenario`` once in the running event loop.

    ``provider`` is the model: ``None`` plays the scenario's ``model:`` turns on a
    :class:`ScriptedModel`; any other provider (a real adapter pointed at the wire
    simulator, a cassette, your own) runs the same tools, exec, steering and follow-ups,
    and its requests are recorded for ``expect.requests``.

    ``fixtures`` are the values of the scenario's ``fixtures:``, which pytest provides (the
    plugin's items pass them); without them a scenario that names fixtures fails. The
    scenario's ``setup:`` runs before the exec and its ``teardown:`` after it, within the
    time limit.

    The user's Python the scenario names (``python:``, ``registry:``, ``call:``) is imported
    here, before the run starts, not when the file loaded: a reference that does not import,
    is not what its key needs, or is a standard-library callable the project does not allow
    raises :class:`~openprogram_sim.errors.ScenarioError`, naming the file and line.

    The scenario's ``timeout:`` is kept by this loop alone (the run is aborted, then
    cancelled): a tool that blocks the loop holds the run, and the caller, past it. The
    loop is the caller's, so no signal is used here; :func:`run_scenario` adds one.
    """
    play = _Play(scenario, provider, fixtures)
    with scenario_env(scenario.env):
        return await play.run()


GRACE_SECONDS = 1.0
"""How long a run that hit its time limit gets to end after the abort (and how long after
``timeout:`` the deadline interrupts code that blocks the event loop)."""


class _Play:
    """One run's pieces, built before it starts, so that a run the deadline interrupted
    still has its outcome."""

    def __init__(
        self, scenario: Scenario, provider: Provider | None, fixtures: dict[str, Any] | None
    ) -> None:
        if provider is None:
            provider = _scenario_model(scenario)
        self.scenario = scenario
        self.hooks = Hooks(scenario, fixtures)
        self.provider = provider
        self.observed: ScriptedModel | RecordingProvider = (
            provider if isinstance(provider, ScriptedModel) else RecordingProvider(provider)
        )
        self.runtime, self.build, self.recorder, self.injections, self._unsubscribe = (
            _build_runtime(scenario, self.observed)
        )
        if isinstance(self.observed, RecordingProvider):
            self.runtime.subscribe(self.observed)
        self.start = time.perf_counter()

    async def run(self, deadline: Deadline | None = None) -> RunOutcome:
        """The run, between the scenario's setup and teardown (see :mod:`._hooks`)."""
        try:
            if not self.hooks.active:
                return await self._play(deadline)
            if not await self.hooks.setup():
                return self.outcome()
            try:
                return await self._play(deadline)
            finally:
                await self.hooks.teardown()  # its failures join the outcome's (the same list)
        finally:
            self._release()

    def _release(self) -> None:
        """Once the run has ended: the references from the run's tools and listeners back to
        its runtime dropped (the simulated tools reach the runtime through the build's box,
        the steering listener holds it), so the run's objects are freed as the outcome lets
        go of them, not left to the cyclic garbage collector (a generated campaign's runs
        were about a tenth of its time in collections)."""
        self.build.release()
        if self._unsubscribe is not None:
            self._unsubscribe()

    async def _play(self, deadline: Deadline | None) -> RunOutcome:
        scenario, runtime = self.scenario, self.runtime
        run = asyncio.get_running_loop().create_task(
            _contained(entry(scenario, runtime, self.build))
        )
        timed_out: int | None = None
        if not await _finished(run, scenario.timeout):
            # abort it (real time: the virtual clock never waits)
            timed_out = len(self.recorder.trace)
            if deadline is not None:
                deadline.postpone(GRACE_SECONDS + CANCEL_SECONDS)
            runtime.abort()
            if not await _finished(run, GRACE_SECONDS):
                run.cancel()
                await asyncio.wait({run})
        if deadline is not None and deadline.fired:
            if not run.cancelled():
                run.exception()  # the interrupt, most likely: seen, so asyncio does not log it
            return self.outcome(timed_out=timed_out, deadline=deadline)
        result: Any = None
        error: BaseException | None = None
        try:
            result = run.result()
        except (Exception, asyncio.CancelledError) as exc:  # the scenario decides if expected
            error = exc
        if isinstance(result, _Escaped):
            if isinstance(result.error, KeyboardInterrupt):
                raise result.error  # Ctrl-C (or a tool raising it) stops the caller
            result, error = None, result.error  # the scenario decides if expected
        return self.outcome(result=result, error=error, timed_out=timed_out)

    def outcome(
        self,
        *,
        result: Any = None,
        error: BaseException | None = None,
        timed_out: int | None = None,
        deadline: Deadline | None = None,
    ) -> RunOutcome:
        """The outcome as recorded so far; after the deadline fired, a timed-out one whose
        error names what blocked the loop."""
        duration = time.perf_counter() - self.start
        blocked: str | None = None
        if deadline is not None and deadline.cut is not None:
            blocked = blocked_by(self.recorder.trace, deadline.cut)
            if timed_out is None:
                timed_out = deadline.cut
            result = None
            error = LoopBlockedError.of(blocked, self.scenario.timeout, GRACE_SECONDS)
        observed, provider = self.observed, self.provider
        requests = observed.requests
        if isinstance(observed, ScriptedModel):
            played = observed.turns[: len(requests)]
            usage = [t.usage for t in played]
            scripted_turns: int | None = len(observed.turns)
            unconsumed = len(observed.unconsumed)
        else:
            usage = list(observed.usage)
            # a cassette replay says how many interactions it holds and which went unplayed
            scripted_turns = getattr(provider, "scripted_turns", None)
            unconsumed = int(getattr(provider, "unconsumed", 0))
        return RunOutcome(
            scenario=self.scenario,
            trace=self.recorder.trace,
            result=result,
            error=error,
            recorded=list(requests),
            provider=provider,
            duration=duration,
            usage=usage,
            scripted_turns=scripted_turns,
            unconsumed=unconsumed,
            rounds=sum(1 for r in requests if r.depth == 0),
            unfired=sorted(self.injections.unfired) if self.injections is not None else [],
            timed_out=timed_out,
            blocked=blocked,
            final_messages=self.build.history.final(self.build.given_history, requests),
            hook_failures=self.hooks.failures,
            conversation=list(self.build.steps),
        )


@dataclass(frozen=True, slots=True)
class _Escaped:
    """What a run returns instead of raising a ``BaseException`` that is not an
    ``Exception``: asyncio stops its loop for a ``SystemExit`` or ``KeyboardInterrupt``
    raised in a task, and the run would lose its outcome with it."""

    error: BaseException


async def _contained(run: Awaitable[Any]) -> Any:
    """``await run``, with a ``BaseException`` that left exec (see the engine's rule: a
    tool's ``SystemExit``, ``KeyboardInterrupt``, own subclass) returned as :class:`_Escaped`.
    Cancellation and the deadline's interrupt are the runner's own and go on up."""
    try:
        return await run
    except (Exception, asyncio.CancelledError, DeadlineInterrupt):
        raise
    except BaseException as exc:
        return _Escaped(exc)


async def _finished(run: asyncio.Future[Any], seconds: float) -> bool:
    """Whether ``run`` is done within ``seconds``: ``asyncio.wait({run}, timeout=seconds)``
    for the one future (a waiter woken by the run's end or the timer), without the sets and
    the per-future bookkeeping it keeps for many. Cancelling the caller cancels the wait,
    never the run."""
    if run.done():
        return True
    waiter = asyncio.get_running_loop().create_future()

    def wake(_: Any = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    timer = waiter.get_loop().call_later(seconds, wake)
    run.add_done_callback(wake)
    try:
        await waiter
    finally:
        timer.cancel()
        run.remove_done_callback(wake)
    return run.done()


class _ThreadLoop:
    """A thread's reused event loop, closed when the thread ends (its thread-local goes)
    or, for the main thread, when the interpreter exits: no "unclosed event loop"."""

    __slots__ = ("loop",)

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def close(self) -> None:
        if not self.loop.is_closed() and not self.loop.is_running():
            self.loop.close()

    def __del__(self) -> None:
        self.close()


_THREAD = threading.local()


def _close_main_loop() -> None:
    held: _ThreadLoop | None = getattr(_THREAD, "held", None)
    if held is not None:
        held.close()


atexit.register(_close_main_loop)


def _loop() -> asyncio.AbstractEventLoop:
    """This thread's event loop for synchronous runs: one per thread, reused (a fresh loop,
    and ``asyncio.run``'s signal handling, would cost more than a typical scenario)."""
    held: _ThreadLoop | None = getattr(_THREAD, "held", None)
    if held is None or held.loop.is_closed():
        held = _THREAD.held = _ThreadLoop()
    return held.loop


def run_scenario(
    scenario: Scenario,
    provider: Provider | None = None,
    *,
    fixtures: dict[str, Any] | None = None,
) -> RunOutcome:
    """Run ``scenario`` once, synchronously (see :func:`arun_scenario`); inside a running
    event loop, await :func:`arun_scenario` instead.

    On the main thread of a POSIX process, the scenario's deadline (``timeout:`` and the
    grace to end) holds even when a tool blocks the event loop (a sync tool that sleeps, an
    endless loop): a SIGALRM timer interrupts it and the run ends timed out, naming the
    tool. The timer is armed only for runs of the user's own code (see :func:`_may_block`),
    and not where SIGALRM is already in use (pytest-timeout's ``signal`` method), nor off
    the main thread: there only the loop keeps the limit, as in :func:`arun_scenario`.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise MisuseError(
            "run_scenario() was called inside a running event loop; "
            "use `await arun_scenario(scenario)` there"
        )
    loop = _loop()
    play = _Play(scenario, provider, fixtures)
    with scenario_env(scenario.env):
        deadline = None
        if _may_block(scenario, provider):
            deadline = Deadline.arm(scenario.timeout + GRACE_SECONDS, play.recorder.trace)
        if deadline is None:
            try:
                return loop.run_until_complete(play.run())
            finally:
                _cancel_leftovers(loop)
        try:
            outcome = deadline.run(loop, play.run(deadline), _cancel_leftovers)
        finally:
            deadline.disarm()
    return outcome if outcome is not None else play.outcome(deadline=deadline)


def _may_block(scenario: Scenario, provider: Provider | None) -> bool:
    """Whether the run executes code of the user's, which may block the event loop: a
    ``python:`` tool, a ``registry:``, a ``call:`` entry point, ``setup:``/``teardown:``, or
    a provider passed in.
    The harness's own simulated tools and scripted model never block it, so a run of only
    those needs no SIGALRM timer (arming and disarming one costs about 10 µs a run)."""
    if provider is not None or scenario.registry is not None or scenario.call is not None:
        return True
    if scenario.setup or scenario.teardown:
        return True
    return any(tool.python is not None for tool in scenario.tools.values())


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel tasks a run left behind (a tool's background task), so the next run on this
    loop starts clean."""
    left = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
