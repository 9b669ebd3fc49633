"""The run's top level: the file's ``exec:``, the user's entry point (``call:``), or a
``conversation:``, several execs on one history.

A conversation runs its execs in order on one runtime: each continues the history the one
before it left (the scenario's ``history:``, then every prompt, reply and result), the
``model:`` turns are consumed across them, and each exec's steering, follow-ups and abort
are counted within it. A step without ``exec.content`` continues without a new prompt
(``aexec(None, history=...)``: the history is sent as it stands, e.g. ending with the tool
results an abort left, which the model has not seen). Every exec's events go to the one
trace, each between its own ``agent_start`` and ``agent_end`` at depth 0. An exec that
raises does not end the conversation (its ``expect:`` says whether it should have); the
conversation ends after an exec that ran out of scripted turns, or that an abort it did not
ask for ended (the time limit's).

Each exec leaves a :class:`~openprogram_sim.play._history.StepRecord`; :func:`step_outcomes`
makes of each a run outcome of its own, whose scenario is the step seen as a file of one exec
(its ``expect:``, its points, its lines), so that every check applies to it unchanged.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable
from typing import Any

from openprogram import Runtime
from openprogram.errors import RunAbortedError
from openprogram_sim.errors import ScriptExhaustedError
from openprogram_sim.play._build import Build, Injections, history_messages
from openprogram_sim.play._history import StepRecord
from openprogram_sim.scenario import Scenario

__all__ = ["Conversation", "entry", "step_outcomes", "step_scenario"]


def entry(scenario: Scenario, runtime: Runtime, build: Build) -> Awaitable[Any]:
    """The run's top level: the file's ``exec:``, the user's entry point (``call:``), or
    its ``conversation:`` (what the last exec returned)."""
    if scenario.call is not None:
        return runtime.acall(build.python(scenario.call), **scenario.args)
    if scenario.conversation is not None:
        return Conversation(scenario, runtime, build).run()
    build.given_history = history_messages(scenario)
    return runtime.aexec(
        scenario.exec.content, history=build.given_history, **build.exec_kwargs(scenario.exec)
    )


class Conversation:
    """Runs a scenario's ``conversation:``; each exec's record goes to ``build.steps``."""

    def __init__(self, scenario: Scenario, runtime: Runtime, build: Build) -> None:
        self.scenario = scenario
        self.runtime = runtime
        self.build = build
        self.requests: list[Any] = getattr(runtime.provider, "requests", [])
        """The model calls so far, as recorded (the scripted model's, or the recording
        wrapper's around another provider)."""

    async def run(self) -> Any:
        history = history_messages(self.scenario)
        result: Any = None
        for i in range(len(self.scenario.conversation or ())):
            record = await self._exec(i, history)
            self.build.steps.append(record)
            history = [*history, *record.added]
            result = record.result
            if self._ends_here(record):
                break
        return result

    async def _exec(self, index: int, history: list[Any]) -> StepRecord:
        build, runtime = self.build, self.runtime
        step = (self.scenario.conversation or [])[index]
        view = step_scenario(self.scenario, index)
        start, calls, began = len(build.trace), len(self.requests), time.perf_counter()
        injections = Injections(view, runtime, build, calls_before=calls)
        unsubscribe = runtime.subscribe(injections)
        for follow in step.follow_ups:
            runtime.follow_up(follow.text)
        build.given_history, build.history.added = list(history), None
        result: Any = None
        error: Exception | None = None
        try:
            result = await runtime.aexec(
                step.exec.content, history=history, **build.exec_kwargs(step.exec)
            )
        except Exception as exc:  # the step's expect: decides whether it should have raised
            error = exc
        finally:
            unsubscribe()
        return StepRecord(
            index=index,
            trace=(start, len(build.trace)),
            calls=(calls, len(self.requests)),
            result=result,
            error=error,
            given=list(history),
            added=list(build.history.added or ()),
            unfired=sorted(injections.unfired),
            duration=time.perf_counter() - began,
        )

    def _ends_here(self, record: StepRecord) -> bool:
        """Whether no exec may follow this one: the script ran out, or an abort the step did
        not ask for (the time limit's) ended it."""
        error: BaseException | None = record.error
        step = (self.scenario.conversation or [])[record.index]
        asked = step.abort is not None and "abort" not in record.unfired
        if isinstance(error, RunAbortedError) and not asked:
            return True
        while error is not None:
            if isinstance(error, ScriptExhaustedError):
                return True
            error = error.__cause__
        return False


class _StepLines:
    """The file's line map seen from one step: a step's ``expect:`` is at
    ``conversation[i].expect``."""

    def __init__(self, lines: Any, index: int) -> None:
        self.lines = lines
        self.index = index

    def line(self, path: tuple[Any, ...], *, key: bool = True) -> int | None:
        line: int | None = self.lines.line(("conversation", self.index, *path), key=key)
        return line


def step_scenario(scenario: Scenario, index: int) -> Scenario:
    """Step ``index`` of ``scenario``'s conversation as a scenario of one exec: its
    ``exec:``, points and ``expect:``, with lines and locations inside the step."""
    step = (scenario.conversation or [])[index]
    view = scenario.model_copy(
        update={
            "exec": step.exec,
            "steering": step.steering,
            "follow_ups": step.follow_ups,
            "abort": step.abort,
            "expect": step.expect,
            "conversation": None,
        }
    )
    view._lines = _StepLines(scenario._lines, index) if scenario._lines is not None else None
    return view


def step_outcomes(outcome: Any) -> list[Any]:
    """Each exec of a conversation's ``outcome`` (a :class:`~openprogram_sim.play.RunOutcome`)
    as a run outcome of its own: its scenario (:func:`step_scenario`), its events, model
    calls, result or error, unfired points and the history it left. Its trace and requests
    are counted from the exec's first entry and first model call."""
    out = []
    for record in outcome.conversation:
        (t0, t1), (c0, c1) = record.trace, record.calls
        recorded = outcome.recorded[c0:c1]
        out.append(
            dataclasses.replace(
                outcome,
                scenario=step_scenario(outcome.scenario, record.index),
                trace=outcome.trace[t0:t1],
                result=record.result,
                error=record.error,
                recorded=recorded,
                duration=record.duration,
                usage=outcome.usage[c0:c1],
                scripted_turns=None,
                unconsumed=0,
                rounds=sum(1 for r in recorded if r.depth == 0),
                unfired=record.unfired,
                timed_out=None,
                blocked=None,
                hook_failures=[],
                final_messages=[*record.given, *record.added],
                conversation=[],
                _requests=None,
            )
        )
    return out
