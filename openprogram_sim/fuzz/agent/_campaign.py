"""The campaign over any agent: one loopback server, a drawn script per session, the agent
run against each, its session checked, the first failure shrunk to a file ``serve``
replays.

1. Discovery: the agent runs once against a session that answers with text; the tools of
   its first request (in whichever API it speaks) are what scripts call, and its API says
   whether arguments may travel as text and whether it streams.
2. Each Hypothesis example is one session: :func:`~._scripts.script_strategy` draws its
   script, :meth:`WireServer.open_session` gives it to a session of its own, the agent
   runs against that session's URLs under ``timeout``, and the session is ended and
   checked: turns never requested, failed requests, the client invariants (:class:`~
   openprogram_sim.wire.ClientChecks`), the user's properties on its trace, and how the
   agent's run ended (a non-zero exit status, an exception, a timeout).
3. The first failure is shrunk, keeping its kind of failure (:func:`_signature`): a few
   bold cuts first (:func:`_smaller`: every fault, all turns but one, one turn or call at a
   time, plainer calls and faults), then Hypothesis, which runs only candidates no larger
   than the case in hand and stops after :data:`SHRINK_PATIENCE` fruitless runs in a row,
   then the cuts again; all within ``shrink_time`` seconds (a timeout is not shrunk: each
   run of it costs the whole limit). It is written as a scenario file
   (:mod:`._regression`) and served again to the same agent as ``serve`` would: the file
   is kept only when that replay fails too.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import find, settings
from hypothesis.errors import Flaky, NoSuchExample

from openprogram_sim.fuzz._chunks import Violation, plan_chunks, search_chunk
from openprogram_sim.fuzz._properties import UserProperties, as_properties
from openprogram_sim.fuzz._schemas import UnsupportedSchema, valid_arguments
from openprogram_sim.fuzz.agent._regression import (
    endpoints,
    regression_document,
    replay,
    write_agent_regression,
)
from openprogram_sim.fuzz.agent._scripts import (
    FAULT_KINDS,
    RETRY_AFTER,
    fault_kind,
    script_strategy,
)
from openprogram_sim.fuzz.agent._stats import AgentStats
from openprogram_sim.fuzz.agent._target import AgentEndpoints, AgentError, AgentRun, AgentTarget
from openprogram_sim.fuzz.agent._tools import DeclaredTool, declared_tools
from openprogram_sim.wire import ClientChecks, SessionCheck, WireServer

__all__ = [
    "DEFAULT_REGRESSIONS",
    "AgentCampaignResult",
    "AgentFailure",
    "Discovery",
    "discover",
    "run_agent_campaign",
]

DEFAULT_REGRESSIONS = "agent-regressions"
"""Where a shrunk failing session is written by default: not under ``scenarios/``, whose
files run on openprogram's own loop; these are served to your agent."""

SHRINK_PATIENCE = {True: 10, False: 3}
"""Agent runs in a row that find nothing smaller after which Hypothesis's shrinking stops:
in process, and for a command (a process per run)."""

DISCOVERY_TEXT = "Hello from openprogram-sim: this session only discovers your tools."

_TEXT_WIRES = ("openai-chat", "openai-responses")
"""Wires that carry a call's arguments as text whether streaming or not."""


@dataclass(frozen=True, slots=True)
class Discovery:
    """What the agent's first request said about it."""

    api: str
    stream: bool
    tools: tuple[DeclaredTool, ...]
    run: AgentRun

    @property
    def text_args(self) -> bool:
        """Its wire carries arguments as text (so they may be text that is not JSON)."""
        return self.api in _TEXT_WIRES or (self.stream and self.api in ("anthropic", "bedrock"))


@dataclass(slots=True)
class AgentFailure:
    """A failing session, shrunk."""

    turns: list[dict[str, Any]]
    """The script served."""
    violations: list[str]
    trace: list[dict[str, Any]]
    run: AgentRun
    path: Path | None = None
    """The regression file kept (served to the agent again, it fails)."""
    unexpressed: str | None = None
    """Why no file was kept."""
    broke_properties: dict[str, Any] | None = None
    """The user's rules the session broke, as the file expects them."""


@dataclass(slots=True)
class AgentCampaignResult:
    examples: int
    seed: int
    stats: AgentStats
    elapsed: float
    discovery: Discovery
    failure: AgentFailure | None = None

    @property
    def runs_per_second(self) -> float:
        return self.stats.runs / self.elapsed if self.elapsed else 0.0


@dataclass(slots=True)
class _Session:
    turns: list[dict[str, Any]]
    run: AgentRun
    violations: list[str]
    trace: list[dict[str, Any]]
    served: int
    model_calls: int


@dataclass(slots=True)
class _Runner:
    """Runs one session at a time on ``server``."""

    server: WireServer
    target: AgentTarget
    timeout: float
    properties: UserProperties
    count: int = 0
    known: dict[str, dict[str, Any]] = field(default_factory=dict)
    _simplest: dict[str, dict[str, Any]] = field(default_factory=dict)

    def simplest(self, name: str) -> dict[str, Any]:
        """The plainest call to tool ``name`` (its simplest valid arguments, as Hypothesis
        shrinks them); for a tool the agent lacks, the plainest call to its first tool."""
        if name not in self.known:
            if not self.known:
                return {"name": name, "arguments": {}}
            name = next(iter(self.known))
        if name not in self._simplest:
            self._simplest[name] = {"name": name, "arguments": _simplest_args(self.known[name])}
        return self._simplest[name]

    def session(self, turns: list[dict[str, Any]]) -> _Session:
        self.count += 1
        name = f"fuzz-{self.count}"
        self.server.open_session(name, turns)
        run = self.target.run(endpoints(self.server, name), self.timeout)
        live = self.server.session(name)
        trace = live.trace().trace
        report = self.server.end_session(name)
        found = [v for v in [run.violation(self.timeout)] if v is not None]
        found += [f.title for f in report.failures]
        found += self.properties.violations(trace) if self.properties else []
        return _Session(turns, run, found, trace, report.served, report.model_calls)


def _simplest_args(schema: dict[str, Any]) -> Any:
    try:
        return find(valid_arguments(schema or {"type": "object"}), lambda _: True,
                    settings=settings(database=None, max_examples=50))  # fmt: skip
    except (UnsupportedSchema, NoSuchExample):
        return {}


def discover(server: WireServer, target: AgentTarget, timeout: float) -> Discovery:
    """Run the agent once against a session that answers with text and read the tools of
    its first request; :class:`AgentError` when it sends none or fails on that answer."""
    server.open_session("discover", [{"text": DISCOVERY_TEXT}])
    urls = endpoints(server, "discover")
    run = target.run(urls, timeout)
    calls = server.session("discover").calls
    server.end_session("discover")
    if not calls:
        given = ", ".join(urls.env) if not target.in_process else "an AgentEndpoints"
        how = {"ok": "it finished", "timeout": f"it was stopped after {timeout:g} s"}.get(
            run.outcome, run.violation(timeout) or ""
        )
        detail = f"\n{run.detail}" if run.detail else ""
        raise AgentError(
            f"{target.label} sent no request to the scripted model ({how}); it was given "
            f"{given}: point its client at them (e.g. openai.OpenAI() reads OPENAI_BASE_URL "
            f"and OPENAI_API_KEY; the base URL was {urls.openai}){detail}"
        )
    if run.outcome != "ok":
        raise AgentError(
            f"{target.label} failed on a session that only answered with text "
            f"({run.violation(timeout)}): fix that first, fuzzing starts from it"
            + (f"\n{run.detail}" if run.detail else "")
        )
    first = calls[0]
    api = first.api or ""
    return Discovery(api, first.stream, tuple(declared_tools(api, first.body)), run)


def run_agent_campaign(
    agent: AgentTarget | str | Callable[[AgentEndpoints], Any],
    examples: int,
    seed: int = 0,
    *,
    regressions: str | Path | None = DEFAULT_REGRESSIONS,
    timeout: float = 10.0,
    properties: UserProperties | Sequence[Mapping[str, Any]] | None = None,
    faults: Sequence[str] = FAULT_KINDS,
    client_checks: ClientChecks | None = None,
    shrink_time: float = 120.0,
    progress: Callable[[AgentStats, float], None] | None = None,
    on_discovery: Callable[[Discovery], None] | None = None,
) -> AgentCampaignResult:
    """Fuzz ``agent`` (see :meth:`AgentTarget.load`) over ``examples`` sessions; the
    first failing one is shrunk and, with ``regressions``, written as a scenario file that
    ``openprogram-sim serve`` replays against the agent. Raises :class:`AgentError` when
    the agent cannot be fuzzed (it sends no request, it fails on a plain text answer)."""
    if examples < 0 or not timeout > 0 or shrink_time < 0:
        raise ValueError(
            f"run_agent_campaign needs examples >= 0, timeout > 0 and shrink_time >= 0; got "
            f"{examples}, {timeout}, {shrink_time}"
        )
    target = AgentTarget.load(agent)
    props = as_properties(properties)
    checks = client_checks or ClientChecks()
    with WireServer([{"text": DISCOVERY_TEXT}], check=SessionCheck(client=checks),
                    session_ttl=None, max_sessions=None) as server:  # fmt: skip
        found = discover(server, target, timeout)
        if on_discovery is not None:
            on_discovery(found)
        runner = _Runner(server, target, timeout, props,
                         known={t.name: t.parameters for t in found.tools})  # fmt: skip
        stats, elapsed, failure = _search(runner, found, examples, seed, faults, shrink_time,
                                          progress)  # fmt: skip
    result = AgentCampaignResult(examples, seed, stats, elapsed, found)
    if failure is not None:
        result.failure = _failure(failure, props)
        if regressions is not None:
            _write(result.failure, regressions, target, seed, checks, timeout)
    return result


def _signature(done: _Session) -> frozenset[str]:
    """The kinds of failure a session shows (a client check by name, how the agent's run
    ended, turns never requested...): shrinking keeps a case only while it shows one of
    the first failure's, so it does not slip to another bug."""
    kinds: set[str] = {done.run.outcome} if done.run.outcome != "ok" else set()
    for v in done.violations:
        if v.startswith("client check "):
            kinds.add(v.split(" ")[2])
        elif v.startswith("the agent "):
            continue
        else:
            kinds.add(re.sub(r"#\d+\s*|\d+", "", v).split(":")[0][:60])
    return frozenset(kinds)


@dataclass(slots=True)
class _Search:
    """One campaign's search: Hypothesis generates and shrinks, then :meth:`simplify`."""

    runner: _Runner
    examples: int
    shrink_time: float
    progress: Callable[[AgentStats, float], None] | None
    stats: AgentStats = field(default_factory=AgentStats)
    failure: _Session | None = None
    left: int = 0
    stop: bool = False
    until: float = 0.0
    start: float = field(default_factory=time.perf_counter)
    seen: dict[str, _Session] = field(default_factory=dict)
    stale: int = 0
    """Agent runs in a row in Hypothesis's shrinking that found nothing smaller."""
    patience: int = 10
    """Such runs after which its shrinking stops (it has found what it can)."""

    def run(self, turns: list[dict[str, Any]]) -> _Session:
        key = json.dumps(turns, sort_keys=True)
        done = self.seen.get(key)
        if done is None:  # (the shrinker reaches one script by several paths)
            done = self.seen[key] = self.runner.session(turns)
        return done

    def same_bug(self, done: _Session) -> bool:
        assert self.failure is not None
        return bool(done.violations) and bool(_signature(done) & _signature(self.failure))

    def one(self, turns: list[dict[str, Any]]) -> None:
        """Hypothesis's test: run one session; raise :class:`Violation` on a failure."""
        if self.failure is None:
            if self.left <= 0:
                return
            self.left -= 1
            done = self.runner.session(turns)
            self.stats.add(turns, done.served, done.trace, self.runner.known, done.run.label,
                           done.run.seconds, done.model_calls)  # fmt: skip
            if self.progress is not None:
                self.progress(self.stats, time.perf_counter() - self.start)
            if not done.violations:
                return
            self.until = time.perf_counter() + self.shrink_time
            self.stop = done.run.outcome == "timeout"  # each run of it costs the whole limit
            self.failure = done
            self.simplify()  # first the few runs that drop whole turns and calls
        else:
            if self.stop or time.perf_counter() > self.until:
                return  # shrinking is over: what failed last is the smallest case
            assert self.failure is not None
            if _size(turns) > _size(self.failure.turns):
                return  # not smaller than the case in hand: not worth an agent's run
            fresh = json.dumps(turns, sort_keys=True) not in self.seen
            done = self.run(turns)
            if done.run.outcome == "timeout" or not self.same_bug(done):
                self.stale += fresh
                self.stop = self.stale >= self.patience
                return
            self.failure, self.stale = done, 0
        raise Violation("\n".join(self.failure.violations))

    def simplify(self) -> None:
        """Drop one turn, or one call of a round, at a time while the same bug shows: a
        few runs, before Hypothesis shrinks what is left (its candidates larger than the
        case in hand are not run) and after (it may stop in a local minimum), within the
        time left."""
        changed = True
        while changed and self.failure is not None and not self.stop:
            changed = False
            for candidate in _smaller(self.failure.turns, self.runner.simplest):
                if time.perf_counter() > self.until:
                    return
                done = self.run(candidate)
                if done.run.outcome != "timeout" and self.same_bug(done):
                    self.failure, changed = done, True
                    break


def _size(turns: list[dict[str, Any]]) -> tuple[int, int]:
    """How large a script is: its turns, its calls (simpler values are Hypothesis's to
    judge: a candidate no larger than the case in hand is run)."""
    return len(turns), sum(len(t.get("tool_calls") or []) for t in turns)


def _smaller(
    turns: list[dict[str, Any]], simplest: Callable[[str], dict[str, Any]]
) -> list[list[dict[str, Any]]]:
    """Scripts simpler than ``turns``, the boldest first: every fault left out, one turn
    kept with the final text, a turn left out (never the final text), one call of a round
    of several left out; then each turn made plainer (:func:`_plainer`)."""
    out: list[list[dict[str, Any]]] = []
    plain = [t for t in turns if fault_kind(t) is None]
    if len(plain) < len(turns):
        out.append(plain)  # every fault at once
    if len(turns) > 2:  # one turn and the final text: most bugs need no more
        out += [[turns[i], turns[-1]] for i in range(len(turns) - 1)]
    out += [turns[:i] + turns[i + 1 :] for i in range(len(turns) - 1)]
    for i, turn in enumerate(turns):
        calls = turn.get("tool_calls") or []
        for j in range(len(calls) if len(calls) > 1 else 0):
            out.append([*turns[:i], {**turn, "tool_calls": calls[:j] + calls[j + 1 :]},
                        *turns[i + 1 :]])  # fmt: skip
    for i, turn in enumerate(turns):
        out += [[*turns[:i], t, *turns[i + 1 :]] for t in _plainer(turn, simplest) if t != turn]
    return out


def _plainer(
    turn: dict[str, Any], simplest: Callable[[str], dict[str, Any]]
) -> list[dict[str, Any]]:
    """``turn`` made plainer one way at a time: a re-chunked turn written at once, a call
    made the plainest one (``simplest("")``: the agent's first tool with its simplest valid
    arguments; ``simplest(name)``: that tool's), a fault's wait or cut the shortest."""
    out = []
    if set(turn.get("wire") or {}) == {"interval"}:
        out.append({k: v for k, v in turn.items() if k != "wire"})
    calls = turn.get("tool_calls") or []
    for j, call in enumerate(calls):
        for plain in (simplest(""), simplest(call["name"])):
            out.append({**turn, "tool_calls": [*calls[:j], plain, *calls[j + 1 :]]})
    if "retry_after" in turn:
        out.append({**turn, "retry_after": RETRY_AFTER[0]})
    if "cut_after" in (turn.get("wire") or {}):
        out.append({**turn, "wire": {**turn["wire"], "cut_after": 0}})
    return out


def _search(
    runner: _Runner, found: Discovery, examples: int, seed: int, faults: Sequence[str],
    shrink_time: float, progress: Callable[[AgentStats, float], None] | None,
) -> tuple[AgentStats, float, _Session | None]:  # fmt: skip
    strategy = script_strategy(found.tools, faults=faults, stream=found.stream,
                               text_args=found.text_args)  # fmt: skip
    patience = SHRINK_PATIENCE[runner.target.in_process]
    search = _Search(runner, examples, shrink_time, progress, left=examples, patience=patience)
    chunk = plan_chunks(max(examples, 1), seed, max(examples, 1), 1, 0)[0]
    if examples:
        with contextlib.suppress(Flaky):  # a shrink cut short replays as a pass
            search_chunk(chunk, strategy, search.one)
        search.simplify()
    return search.stats, time.perf_counter() - search.start, search.failure


def _failure(done: _Session, properties: UserProperties) -> AgentFailure:
    broken = properties.broken(done.trace) if properties else {}
    return AgentFailure(
        turns=done.turns, violations=done.violations, trace=done.trace, run=done.run,
        broke_properties=broken or None,
    )  # fmt: skip


def _write(
    failure: AgentFailure, directory: str | Path, target: AgentTarget, seed: int,
    checks: ClientChecks, timeout: float,
) -> None:  # fmt: skip
    """Write the file and keep it only if serving it to the agent again fails."""
    document = regression_document(failure.turns, failure.violations, seed=seed, checks=checks,
                                   broken=failure.broke_properties)  # fmt: skip
    limit = timeout if failure.run.outcome == "timeout" else None
    path = write_agent_regression(directory, document, target, seed, limit=limit)
    again = replay(path, target, timeout=timeout, show=False)
    if not again.passed:
        failure.path = path
        return
    path.unlink()
    failure.unexpressed = (
        f"served again as openprogram-sim serve serves the file, the session passed (the "
        f"agent: {again.run.label}): what broke is not visible to the server (e.g. a crash "
        "after the last turn was requested), or the agent does not fail the same way twice"
    )
