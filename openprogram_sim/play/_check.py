"""A scenario's verdict: its outcome checked against every ``expect:`` key.

Each failed check is a :class:`Failure` with a title and a readable detail (for events:
the first expectation that did not match, the trace around the closest actual event, and
its fields beside the expected ones down to the differing key, with hints; see
:mod:`openprogram_sim.trace._explain`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openprogram_sim.errors import CassetteError, MatchTimeoutError, ScriptExhaustedError
from openprogram_sim.play._history import history_mismatch
from openprogram_sim.play._runner import RunOutcome
from openprogram_sim.scenario import (
    CriterionVerdict,
    JudgedRun,
    JudgeError,
    JudgeSpec,
    ask_judge,
    criterion_failures,
    judge_changes,
)
from openprogram_sim.trace import (
    Failure,
    TrajectoryResult,
    Violation,
    check_properties,
    describe,
    describe_pair,
    describe_rule,
    diff_lines,
    event_matches,
    match_events,
    match_trajectory,
    matches,
    render_entry,
    render_mismatch,
    show,
)

__all__ = ["Verdict", "check_outcome", "check_requests", "check_trace", "request_check"]


@dataclass(slots=True)
class Verdict:
    outcome: RunOutcome
    failures: list[Failure] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def report(self) -> str:
        """Every failure, in check order."""
        return "\n\n".join(str(f) for f in self.failures)

    @property
    def trajectory(self) -> TrajectoryResult | None:
        """The top-level ``expect.trajectory`` checked against the trace, passed or not
        (its score and measures), or None when the scenario gives none."""
        spec = self.outcome.scenario.expect.trajectory
        return match_trajectory(self.outcome.trace, spec) if spec is not None else None

    @property
    def properties(self) -> list[tuple[dict[str, Any], list[Violation]]]:
        """Each top-level ``expect.properties`` rule with its violations (none: it holds)."""
        rules = self.outcome.scenario.expect.properties
        found = check_properties(self.outcome.trace, rules) if rules else []
        return [(rule, [v for v in found if v.rule == i]) for i, rule in enumerate(rules)]


def _exhausted(error: BaseException | None) -> ScriptExhaustedError | None:
    while error is not None:
        if isinstance(error, ScriptExhaustedError):
            return error
        error = error.__cause__
    return None


def _check_raises(outcome: RunOutcome, out: list[Failure]) -> None:
    expect = outcome.scenario.expect
    where = outcome.scenario.where("expect", "raises")
    exhausted = _exhausted(outcome.error)
    if exhausted is not None:
        out.append(Failure("the model was called beyond its script", str(exhausted)))
        return
    if expect.raises is False:
        if outcome.error is not None:
            out.append(
                Failure("exec raised, and the scenario expects no error", outcome.error_text or "")
            )
        return
    if outcome.error is None:
        out.append(
            Failure(
                "exec returned, and the scenario expects it to raise",
                f"returned: {show(outcome.result)}",
                where,
            )
        )
        return
    spec = expect.raises
    message = spec if isinstance(spec, str) else getattr(spec, "message", None)
    wanted_type = getattr(spec, "type", None)
    if wanted_type is not None:
        wanted = [wanted_type] if isinstance(wanted_type, str) else list(wanted_type)
        names = [c.__name__ for c in type(outcome.error).__mro__]
        if not set(wanted) & set(names):
            out.append(
                Failure(
                    f"exec raised {names[0]}, expected {' or '.join(wanted)}",
                    f"raised: {outcome.error_text}",
                    where,
                )
            )
    if message is not None and message not in str(outcome.error):
        out.append(
            Failure(
                f"exec raised, but its message lacks {show(message)}",
                f"raised: {outcome.error_text}",
                where,
            )
        )


def _check_result(outcome: RunOutcome, out: list[Failure]) -> None:
    expected = outcome.scenario.expect.result
    if expected is None or outcome.error is not None:
        return
    if not matches(expected, outcome.result):
        want, have = describe_pair(expected, outcome.result)
        out.append(
            Failure(
                "exec returned something else",
                f"  expected: {want}\n  actual:   {have}",
                outcome.scenario.where("expect", "result"),
            )
        )


def _check_time(outcome: RunOutcome, out: list[Failure]) -> None:
    cut = outcome.timed_out
    if cut is None:
        return
    scenario = outcome.scenario
    first = max(0, cut - 10)
    shown = "\n".join(f"  #{i:<3} {render_entry(outcome.trace[i])}" for i in range(first, cut))
    after = len(outcome.trace) - cut
    if after:
        shown += f"\n  (then the abort: {after} more event(s), ending the run)"
    title = f"the run did not finish within its timeout of {scenario.timeout:g} s (real time)"
    if outcome.blocked is None:
        title += "; it was aborted"
        fix = "raise `timeout:`, or add an `abort:` point for a turn that hangs"
    else:  # the runner's SIGALRM deadline had to interrupt it
        title += f": {outcome.blocked} blocked the event loop and was interrupted"
        fix = (
            "tools run on the event loop's thread: a sync tool should return quickly, and an "
            "async one should wait without blocking (`await asyncio.sleep(...)`, an async "
            "client, `await asyncio.to_thread(...)` for blocking work)"
        )
    out.append(
        Failure(
            title,
            f"{fix}\ntrace when the time ran out ({cut} events):\n{shown or '  (empty)'}",
            scenario.where("timeout"),
        )
    )


def _check_points(outcome: RunOutcome, out: list[Failure]) -> None:
    scenario = outcome.scenario
    for name in outcome.unfired:
        if name == "abort":
            assert scenario.abort is not None
            kind, n = scenario.abort.point()
            where, what = scenario.where("abort"), "abort"
        else:
            index = int(name[len("steering[") : -1])
            entry = scenario.steering[index]
            kind, n = ("after_tool", entry.after_tool or 0)
            if entry.after_round is not None:
                kind, n = "after_round", entry.after_round
            where, what = scenario.where("steering", index), f"steering entry {index + 1}"
        out.append(
            Failure(
                f"{what} ({kind}: {n}) never fired: the run did not reach that point",
                f"the run had {_reached(outcome, kind)}",
                where,
            )
        )


def _reached(outcome: RunOutcome, kind: str) -> str:
    trace = outcome.trace
    if kind in ("after_tool", "during_tool"):
        n = sum(1 for e in trace if e["type"] == "tool_execution_end")
        return f"{n} tool call(s)"
    if kind == "after_round":
        n = sum(1 for e in trace if e["type"] == "turn_end" and e["depth"] == 0)
        return f"{n} round(s) in the outer exec"
    n = sum(1 for e in trace if e["type"] == "message_start" and e.get("role") == "assistant")
    return f"{n} model repl{'y' if n == 1 else 'ies'}"


def _check_calls(outcome: RunOutcome, out: list[Failure]) -> None:
    expect = outcome.scenario.expect
    wanted, n = expect.model_calls, outcome.model_calls
    if isinstance(wanted, int) and wanted != n:
        out.append(
            Failure(
                f"the model was called {n} times, expected {wanted}",
                where=outcome.scenario.where("expect", "model_calls"),
            )
        )
    elif wanted is not None and not isinstance(wanted, int) and not wanted.holds(n):
        out.append(
            Failure(
                f"the model was called {n} time{'' if n == 1 else 's'}, expected {wanted}",
                where=outcome.scenario.where("expect", "model_calls"),
            )
        )
    if _unconsumed_turns(outcome):
        out.append(_unconsumed(outcome))


def _recorded_judge(outcome: RunOutcome) -> dict[str, Any]:
    """What a replayed cassette says of the judge recorded into it (an eval sample's:
    ``judge: {model, base_url, interactions}``); empty for any other run."""
    cassette = getattr(outcome.provider, "cassette", None)
    meta = getattr(cassette, "metadata", None) or {}
    judge = meta.get("judge") if isinstance(meta, dict) else None
    return judge if isinstance(judge, dict) else {}


def _judge_interactions(outcome: RunOutcome) -> set[int]:
    """The interactions of a replayed cassette that its judge recorded, after the run's:
    not the run's to request."""
    found = _recorded_judge(outcome).get("interactions")
    return {int(i) - 1 for i in found if isinstance(i, int)} if isinstance(found, list) else set()


def _unconsumed_turns(outcome: RunOutcome) -> int:
    if not outcome.unconsumed:
        return 0
    judged = _judge_interactions(outcome)
    if not judged:
        return outcome.unconsumed
    unplayed = getattr(getattr(outcome.provider, "cassette", None), "unplayed", [])
    return len([i for i in unplayed if i not in judged])


def _unconsumed(outcome: RunOutcome) -> Failure:
    """Turns never requested: scripted ones are the script's to remove; a cassette's
    interactions are the recording's, which a changed session records again."""
    scenario, n, total = outcome.scenario, _unconsumed_turns(outcome), outcome.scripted_turns
    cassette = getattr(scenario.model, "cassette", None)
    if cassette is None:
        return Failure(
            f"{n} of {total} scripted turns were never requested",
            "remove them, or check why the loop ended early",
            scenario.where("model", outcome.model_calls),
        )
    from openprogram_sim.cassettes import record_command

    return Failure(
        f"{n} of {total} recorded interactions of cassette {cassette} were never requested",
        "the run made fewer requests than were recorded (a request that matched none counts "
        "among them): if the session changed, record the cassette again: "
        f"{record_command(scenario)}; else check why the loop ended early",
        scenario.where("model", "cassette"),
    )


def _request_index(outcome: RunOutcome, i: int, seen: dict[Any, int]) -> int | str:
    """Which recorded request expectation ``i`` is about: ``call`` when given; else, when it
    names ``depth`` and/or ``round``, the requests with those values (the n-th expectation
    with the same selectors takes the n-th of them); else the i-th request. A string says
    why none matches."""
    want = outcome.scenario.expect.requests[i]
    if want.call is not None:
        return want.call - 1
    if want.depth is None and want.round is None:
        return i
    key = (want.depth, want.round)
    nth = seen[key] = seen.get(key, -1) + 1
    hits = [
        k
        for k, r in enumerate(outcome.requests)
        if (want.depth is None or r["depth"] == want.depth)
        and (want.round is None or r["round"] == want.round)
    ]
    if nth < len(hits):
        return hits[nth]
    named = ", ".join(
        f"{n} {v}" for n, v in zip(("depth", "round"), key, strict=True) if v is not None
    )
    return f"expected a request at {named}, but the model was called {len(hits)} time(s) there"


def _check_requests(outcome: RunOutcome, out: list[Failure]) -> None:
    scenario = outcome.scenario
    seen: dict[Any, int] = {}
    for i, want in enumerate(scenario.expect.requests):
        index = _request_index(outcome, i, seen)
        where = scenario.where("expect", "requests", i)
        if isinstance(index, str):
            out.append(Failure(index, where=where))
            continue
        if index >= len(outcome.requests):
            out.append(
                Failure(
                    f"expected request {index + 1}, but the model was called "
                    f"{len(outcome.requests)} times",
                    where=where,
                )
            )
            continue
        actual = outcome.requests[index]
        fields = _loosen_messages(want.model_dump(exclude_none=True, exclude={"call"}))
        bad = {k: v for k, v in fields.items() if not matches(v, actual.get(k))}
        if bad:
            rows = [f"  {line}" for k, v in bad.items() for line in diff_lines(k, v, actual.get(k))]
            out.append(
                Failure(
                    f"request {index + 1} (depth {actual['depth']}, round "
                    f"{actual['round']}) differs",
                    "\n".join(rows),
                    where,
                )
            )


def _subset(value: Any) -> Any:
    if isinstance(value, dict) and not any(str(k).startswith("$") for k in value):
        return {"$subset": value}
    return value


def _loosen_messages(fields: dict[str, Any]) -> dict[str, Any]:
    """Message fields compare like event fields: the ones given must match."""
    if "last_message" in fields:
        fields["last_message"] = _subset(fields["last_message"])
    if isinstance(fields.get("messages"), list):
        fields["messages"] = [_subset(m) for m in fields["messages"]]
    return fields


def _check_events(outcome: RunOutcome, out: list[Failure]) -> None:
    scenario = outcome.scenario
    expect = scenario.expect
    trace = outcome.trace
    if expect.events:
        mismatch = match_events(expect.events, trace, expect.events_mode)
        if mismatch is not None:
            out.append(
                Failure(
                    f"events ({expect.events_mode}) did not match",
                    render_mismatch(
                        mismatch, trace, total=len(expect.events), schemas=_tool_schemas(outcome)
                    ),
                    scenario.where("expect", "events", mismatch.index),
                )
            )
    for k, unwanted in enumerate(expect.not_events):
        hits = [i for i, e in enumerate(trace) if event_matches(unwanted, e)]
        if hits:
            shown = "\n".join(f"  #{i:<3} {render_entry(trace[i])}" for i in hits[:5])
            out.append(
                Failure(
                    f"an event that must not occur occurred {len(hits)} time(s): "
                    f"{describe(unwanted)}",
                    shown,
                    scenario.where("expect", "not_events", k),
                )
            )
    for event_type, count in expect.counts.items():
        actual = sum(1 for e in trace if e["type"] == event_type)
        if actual != count:
            out.append(
                Failure(
                    f"{event_type} occurred {actual} time(s), expected {count}",
                    where=scenario.where("expect", "counts", event_type),
                )
            )


def _check_trajectory(outcome: RunOutcome, out: list[Failure]) -> None:
    scenario = outcome.scenario
    spec = scenario.expect.trajectory
    if spec is None:
        return
    result = match_trajectory(outcome.trace, spec)
    if not result.passed:

        def line(item: int, member: int | None) -> int | None:
            path = ("expect", "trajectory", "calls", item)
            return scenario.line(*path, member) if member is not None else scenario.line(*path)

        out.append(
            Failure(result.title(), result.explain(line), scenario.where("expect", "trajectory"))
        )


def _check_properties(outcome: RunOutcome, out: list[Failure]) -> None:
    scenario = outcome.scenario
    rules = scenario.expect.properties
    if not rules:
        return
    found = check_properties(outcome.trace, rules)
    for i, rule in enumerate(rules):
        broken = [v for v in found if v.rule == i]
        if broken:
            ((name, _),) = rule.items()
            out.append(
                Failure(
                    f"property {i + 1} ({name}) does not hold: {describe_rule(rule)}",
                    "\n".join(str(v) for v in broken),
                    scenario.where("expect", "properties", i),
                )
            )


def _judge_cassette(outcome: RunOutcome, spec: JudgeSpec) -> tuple[Any, str] | Failure | None:
    """The cassette the judge's recorded calls are replayed from, and how the scenario
    names it: ``judge.cassette`` when given, else the run's own cassette when it holds a
    judge's calls (an eval sample's); None under a script without one."""
    scenario = outcome.scenario
    if spec.cassette is None:
        cassette = getattr(outcome.provider, "cassette", None)
        if cassette is None or not _judge_interactions(outcome):
            return None
        return cassette, "the cassette"
    from openprogram_sim.cassettes import Cassette  # vcrpy loads for a judge replayed only

    path = Path(spec.cassette)
    if not path.is_absolute() and scenario.path:
        path = Path(scenario.path).parent / path
    where = scenario.where("expect", "judge", "cassette")
    try:
        loaded = Cassette(path, record_mode="none").load()
    except CassetteError as exc:
        return Failure("expect.judge.cassette cannot be replayed", str(exc), where)
    judge = loaded.metadata.get("judge")
    if not isinstance(judge, dict) or not judge.get("interactions"):
        return Failure(
            f"expect.judge.cassette {spec.cassette} holds no judge's calls",
            "name the cassette of an eval sample whose scenario has this expect.judge (each "
            "sample's cassette under openprogram-sim eval's --out holds its judge's calls)",
            where,
        )
    return loaded, f"cassette {spec.cassette}"


async def _replay_judge(
    cassette: Any, spec: JudgeSpec, outcome: RunOutcome
) -> dict[str, CriterionVerdict]:
    """The judge asked again through the cassette that recorded it: its recorded calls
    answer (no key, no socket) when the run did what the recorded one did."""
    base_url = (cassette.metadata.get("judge") or {}).get("base_url") or None
    async with cassette.client() as client:
        extra = {"base_url": base_url} if base_url else {}
        provider = cassette.provider(spec.model, client=client, stream=False, **extra)
        return await ask_judge(provider, spec, JudgedRun.of(outcome))


def _run_async(work: Coroutine[Any, Any, Any]) -> Any:
    """``work`` run to its end from synchronous code (in a thread of its own when this
    thread already runs an event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


def _check_judge(outcome: RunOutcome, out: list[Failure]) -> None:
    """``expect.judge``, replayed: from ``judge.cassette``, or from the run's own cassette
    when it is an eval sample's holding its judge's calls; each criterion checked. Under a
    script without ``judge.cassette`` the judge is not asked: it judges a real model's runs
    (``openprogram-sim eval``)."""
    scenario = outcome.scenario
    spec = scenario.expect.judge
    found = _judge_cassette(outcome, spec) if spec is not None else None
    if spec is None or found is None:
        return
    if isinstance(found, Failure):
        out.append(found)
        return
    cassette, named = found
    where = scenario.where("expect", "judge")
    changed = judge_changes(spec, cassette.metadata.get("judge") or {})
    if changed:
        out.append(
            Failure(
                f"expect.judge is not the judge recorded in {named}: " + "; ".join(changed),
                "its recorded calls answer only the judge that was asked; record the sample "
                "again (openprogram-sim eval) to judge it by this one",
                where,
            )
        )
        return
    try:
        verdicts = _run_async(_replay_judge(cassette, spec, outcome))
    except JudgeError as exc:
        out.append(
            Failure(
                "the judge's recorded verdict could not be replayed",
                f"{exc}\n(the judge's request is rebuilt from this run: a run that does "
                "something else than the recorded one asks the judge something else)",
                where,
            )
        )
        return
    out += criterion_failures(
        spec, verdicts, lambda i: scenario.where("expect", "judge", "criteria", i)
    )


def _tool_schemas(outcome: RunOutcome) -> dict[str, Any]:
    """Each tool's argument schema as the model was sent it (for the hint that events carry
    the arguments the model sent, not the schema's defaults)."""
    return {spec.name: spec.parameters for r in outcome.recorded for spec in r.tool_specs}


def _check_hooks(outcome: RunOutcome, out: list[Failure]) -> None:
    scenario = outcome.scenario
    for failure in outcome.hook_failures:
        where: tuple[str | int, ...] = (failure.phase, failure.index)
        if failure.phase == "fixtures" or scenario.line(*where) is None:
            where = (failure.phase,)  # `setup: pkg.module:fn`, one reference, not a list
        out.append(Failure(failure.title, failure.traceback, scenario.where(*where)))


def _check_history(outcome: RunOutcome, out: list[Failure]) -> None:
    scenario = outcome.scenario
    expect = scenario.expect
    if expect.history is None:
        return
    wanted = [m.fields() for m in expect.history]
    mismatch = history_mismatch(wanted, outcome.history, expect.history_mode)
    if mismatch is not None:
        index, detail = mismatch
        where = ("expect", "history") if index < 0 else ("expect", "history", index)
        title = f"history ({expect.history_mode}) did not match"
        out.append(Failure(title, detail, scenario.where(*where)))


class _Requests:
    """What :func:`_check_requests` reads of an outcome: the scenario and the requests."""

    def __init__(self, scenario: Any, requests: list[dict[str, Any]]) -> None:
        self.scenario = scenario
        self.requests = requests


def check_requests(scenario: Any, requests: list[dict[str, Any]]) -> list[Failure]:
    """``scenario``'s ``expect.requests`` against ``requests`` (dicts as
    :func:`~openprogram_sim.play.request_to_dict` gives them, or as the wire server
    reads them from what a client sent): the same check, and diff, ``run`` uses."""
    out: list[Failure] = []
    _check_requests(_Requests(scenario, requests), out)  # type: ignore[arg-type]
    return out


def check_trace(scenario: Any, trace: list[dict[str, Any]]) -> list[Failure]:
    """``scenario``'s ``expect.trajectory`` and ``expect.properties`` against ``trace`` (a
    served session's): the same checks, and messages, ``run`` uses."""
    out: list[Failure] = []
    traced = _Traced(scenario, trace)
    _check_trajectory(traced, out)  # type: ignore[arg-type]
    _check_properties(traced, out)  # type: ignore[arg-type]
    return out


class _Traced:
    """What :func:`check_trace` reads of an outcome: the scenario and a trace."""

    def __init__(self, scenario: Any, trace: list[dict[str, Any]]) -> None:
        self.scenario = scenario
        self.trace = trace


def request_check(scenario: Any) -> Callable[[list[dict[str, Any]]], list[Failure]]:
    """:func:`check_requests` bound to ``scenario``: the ``check=`` that
    :func:`~openprogram_sim.wire.serve` runs on each session's requests. A failure's
    ``where`` is relative to the working directory when the file is under it: a served
    report goes to clients, which need not learn where the scenario lives."""

    def check(requests: list[dict[str, Any]]) -> list[Failure]:
        found = check_requests(scenario, requests)
        return [dataclasses.replace(f, where=relative_where(f.where)) for f in found]

    return check


def relative_where(where: str) -> str:
    """``where`` (``file:line``, or a file) with an absolute file under the working
    directory made relative to it; any other as it is."""
    name, colon, line = where.rpartition(":")
    if not (colon and line.isdigit()):
        name, line = where, ""
    path = Path(name)
    if not name or not path.is_absolute():
        return where
    try:
        here = Path.cwd()
    except OSError:  # the working directory was removed
        return where
    for base in (here, here.resolve()):
        if path.is_relative_to(base):
            rel = path.relative_to(base)
            return f"{rel}:{line}" if line else str(rel)
    return where


_Check = Callable[[RunOutcome, list[Failure]], None]

_ONE_EXEC: tuple[_Check, ...] = (
    _check_raises,
    _check_result,
    _check_calls,
    _check_points,
    _check_requests,
    _check_events,
    _check_trajectory,
    _check_properties,
    _check_history,
)
"""What each exec of a conversation is checked for (as a scenario of one exec)."""


def _check_conversation(outcome: RunOutcome, out: list[Failure]) -> None:
    """Each exec of a conversation against its step's ``expect:``, its failures titled by
    the exec (their lines are in the step)."""
    for i, step in enumerate(outcome.steps):
        failures: list[Failure] = []
        _run_checks(_ONE_EXEC, step, failures)
        for failure in failures:
            failure.title = f"exec {i + 1}: {failure.title}"
        out.extend(failures)


def _run_checks(checks: tuple[_Check, ...], outcome: RunOutcome, out: list[Failure]) -> None:
    for check in checks:
        try:
            check(outcome, out)
        except MatchTimeoutError as exc:  # a pattern that backtracks: the check fails, named
            out.append(Failure("a $regex expectation could not be checked", str(exc)))


def check_outcome(outcome: RunOutcome) -> Verdict:
    """Check ``outcome`` against its scenario's ``expect:`` (a conversation: each exec
    against its step's, then the whole against the top level's). ``expect.judge`` is
    checked when the run replayed an eval sample's cassette that holds its judge's calls
    (the judge replayed from it); under a script it is not asked (docs/judge.md)."""
    failures: list[Failure] = []
    steps: tuple[_Check, ...] = (_check_hooks, _check_time, *_ONE_EXEC, _check_judge)
    if outcome.scenario.conversation is not None:  # result and raises are each exec's
        steps = (_check_hooks, _check_time, _check_conversation, _check_calls)
        steps += (_check_requests, _check_events, _check_trajectory, _check_properties)
        steps += (_check_history, _check_judge)
    if outcome.timed_out is not None:  # the rest would only restate the abort
        steps = (_check_hooks, _check_time)
    if not outcome.started:  # its setup failed: there is nothing else to check
        steps = (_check_hooks,)
    _run_checks(steps, outcome, failures)
    return Verdict(outcome, failures)
