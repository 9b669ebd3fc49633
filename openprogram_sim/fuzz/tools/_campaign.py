"""The campaign over the user's own tools (``openprogram-sim fuzz --registry REF``).

Each generated scenario (:mod:`openprogram_sim.fuzz.tools._usergen`) calls the user's real
tools with arguments valid and invalid for their real schemas, nested runs of agentic
functions included; it runs in a sandbox process (:mod:`openprogram_sim.fuzz.tools._sandbox`)
under a real-time limit, and is checked against the loop's invariants and the tool contract
(:mod:`openprogram_sim.fuzz.tools._contract`). Campaigns are cut into seeded chunks as the
loop campaign is (:mod:`openprogram_sim.fuzz._chunks`), so the same seed gives the same
campaign whatever the workers, as long as the tools keep no state between runs: each worker
process keeps one sandbox across its chunks (a new one only after a tool broke one), and
scenarios go to it a Hypothesis example (:data:`BATCH` scenarios) at a time. A ``setup:``
(:class:`~openprogram_sim.fuzz.tools._search.SearchOptions`) resets what the tools keep.
How a chunk searches (backend, coverage-guided, a shared example database) is
:mod:`openprogram_sim.fuzz.tools._search`'s.

Shrinking: Hypothesis shrinks a failing case as usual, except a hang: the hanging call is
known from the start (the sandbox names it), and each run of a hanging case costs the whole
time limit, so a hang is not shrunk (its file tries the schema's simplest arguments first,
one run); a hang met while shrinking another failure is skipped.

A contract breach becomes a regression file that replays the one call that broke it
(:func:`~openprogram_sim.fuzz.tools._regression.contract_document`), naming the tools by
import path. It is kept only when it is right on both sides: run in the sandbox with that tool
stubbed by one that keeps the contract, it passes (so a fix passes it); run as it is, it
fails (or blocks the event loop until the sandbox kills it); and ``openprogram-sim run`` on
the written file, in a real process with a time limit, fails (exit 1) against the code as it
is. A tool that blocks the event loop gets a file too: its ``timeout:`` is the campaign's
limit, and ``openprogram-sim run`` interrupts the tool with its SIGALRM deadline (POSIX
only, see :mod:`openprogram_sim.play._deadline`) and fails the run as timed out, naming
it. Otherwise :attr:`FuzzFailure.unexpressed` says why.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Verbosity, find, given, settings, target
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky, NoSuchExample, Unsatisfiable

from openprogram_sim.fuzz._chunks import (
    Chunk,
    ChunkResult,
    Progress,
    Violation,
    plan_chunks,
    run_chunks,
)
from openprogram_sim.fuzz._properties import UserProperties, as_properties
from openprogram_sim.fuzz._regression import write_document
from openprogram_sim.fuzz._results import Breach, CampaignResult, FuzzFailure
from openprogram_sim.fuzz._schemas import valid_arguments
from openprogram_sim.fuzz._stats import FuzzStats
from openprogram_sim.fuzz.tools._corpus import Corpus, guided_scenarios
from openprogram_sim.fuzz.tools._regression import (
    contract_document,
    fixed_variant,
    property_document,
)
from openprogram_sim.fuzz.tools._sandbox import RunReport, Sandbox
from openprogram_sim.fuzz.tools._search import SearchOptions, chunk_settings, database_key
from openprogram_sim.fuzz.tools._target import ToolTarget
from openprogram_sim.fuzz.tools._usergen import UserOptions, user_scenario_strategy
from openprogram_sim.play import DEADLINE_SUPPORTED as _DEADLINE
from openprogram_sim.play import GRACE_SECONDS

__all__ = ["reproduces_by_cli", "run_tool_campaign"]

REPRODUCE_MARGIN = 20.0
"""Seconds ``openprogram-sim run`` on a regression file may take past the file's timeout
before the check gives up on it: its start and imports, and, for a tool that blocks the
event loop, the 1 s grace after which the run's SIGALRM deadline interrupts it (and the
second the run's tasks then get to end)."""

BATCH = 16
"""Scenarios per Hypothesis example, sent to the sandbox in one message (Hypothesis's
per-example bookkeeping costs about as much as drawing a scenario: at 16 a scenario is drawn
in about 0.2 ms less CPU than at 8 and 0.5 ms less than at 4; the shrinker simplifies the
ones a failure does not need). Coverage-guided campaigns send one: ``target()`` scores one
run."""

LINES_LABEL = "lines of your tools run"
"""The ``target()`` label of the coverage-guided mode."""

DEFAULT_WORKERS = 2
"""Worker processes a campaign over the user's tools uses when not told (``--workers``): each
worker draws while its sandbox runs, so two keep a 2-core machine busy."""

_SHRINK_HANGS = 2
"""Hangs met while shrinking another failure before shrinking stops running cases."""


@dataclass(frozen=True, slots=True)
class _Job:
    """One chunk's work (picklable, for worker processes)."""

    target: ToolTarget
    options: UserOptions
    search: SearchOptions
    properties: UserProperties

    def __call__(self, chunk: Chunk) -> ChunkResult:
        # Started first: the sandbox imports the user's code while this process does.
        lines = self.search.coverage_guided
        sandbox = _kept_sandbox(self.target, lines=lines, properties=self.properties).start()
        # Hypothesis also draws constants it reads from the loaded local modules (a city
        # name, a unit): a worker process loads the user's, as the caller's process has.
        self.target.imported()
        return _run_tool_chunk(chunk, sandbox, self.target, self.options, self.search)


_KEPT: list[Sandbox] = []
"""This process's sandbox, kept across chunks and campaigns over the same tools (it starts
a new child itself after a tool broke one)."""


def _kept_sandbox(target: ToolTarget, *, lines: bool, properties: UserProperties) -> Sandbox:
    """The kept sandbox for ``target``, or a new one (closing one kept for other tools)."""
    kept = _KEPT[0] if _KEPT else None
    if kept and (kept.target, kept.lines, kept.properties) != (target, lines, properties):
        _close_kept()
    if not _KEPT:
        _KEPT.append(Sandbox(target, lines=lines, properties=properties))
    return _KEPT[0]


@atexit.register
def _close_kept() -> None:
    while _KEPT:
        _KEPT.pop().close()


def _breach_of(report: RunReport) -> Breach | None:
    """The breach a regression file replays: one with a call, the most serious first."""
    with_call = [b for b in report.breaches if b.call is not None]
    order = ("escapes", "hangs", "not_json", "error_lost")
    return min(with_call, key=lambda b: order.index(b.kind), default=None)


def _failed(
    state: dict[str, Any], report: RunReport, data: dict[str, Any], chunk: Chunk, *,
    searching: bool,
) -> None:  # fmt: skip
    """Keep the chunk's first failure (``report``, of the run of ``data``) and raise
    :class:`Violation` so that Hypothesis shrinks it; a hang while shrinking is skipped."""
    if report.killed and not searching:  # a hang while shrinking: not worth its time
        state["hangs"] += 1
        state["stop"] = state["hangs"] >= _SHRINK_HANGS
        return
    breach = _breach_of(report)
    state["failure"] = FuzzFailure(
        data, report.violations, report.trace, report.model_calls, chunk.index, chunk.seed,
        breach=breach,
    )  # fmt: skip
    if breach is not None and breach.kind == "hangs":
        state["stop"] = True  # the hanging call is known: no shrinking
    raise Violation("\n".join(report.violations))


def _run_tool_chunk(
    chunk: Chunk,
    sandbox: Sandbox,
    tools: ToolTarget,
    options: UserOptions,
    search: SearchOptions,
) -> ChunkResult:
    stats = FuzzStats()
    state: dict[str, Any] = {"left": chunk.runs, "failure": None, "stop": False, "hangs": 0}
    start = time.perf_counter()
    keys = search.scenario_keys()

    def run_batch(batch: list[dict[str, Any]]) -> None:
        searching = state["failure"] is None
        if searching:
            if state["left"] <= 0:
                return
            batch = batch[: state["left"]]
        elif state["stop"]:
            return
        datas = [{**data, **keys} for data in batch] if keys else batch
        reports = sandbox.run_batch(datas)
        if search.coverage_guided:
            target(float(max(r.lines for r in reports)), label=LINES_LABEL)
            for data, report in zip(batch, reports, strict=False):
                corpus.offer(data, report.lines, report.new_lines)
        if searching:
            state["left"] -= len(reports)
            for report in reports:
                stats.merge(report.stats or FuzzStats(runs=1))
        if reports[-1].violations:
            corpus.frozen = True  # Hypothesis replays and shrinks it over this corpus
            _failed(state, reports[-1], datas[len(reports) - 1], chunk, searching=searching)

    scenarios = user_scenario_strategy(tools, options)
    corpus = Corpus()
    if search.coverage_guided:
        scenarios = guided_scenarios(scenarios, tools, corpus)

    @chunk_settings(chunk, search)  # outside the seed, which would drop its database
    @hypothesis_seed(chunk.seed)
    @given(st.lists(scenarios, min_size=chunk.batch, max_size=chunk.batch))
    def search_batches(batch: list[dict[str, Any]]) -> None:
        run_batch(batch)

    # One key for every campaign over these tools: they replay each other's failures.
    search_batches._hypothesis_internal_database_key = database_key(tools)  # type: ignore[attr-defined]
    # Flaky: a hang is not run again while Hypothesis replays it
    with contextlib.suppress(Violation, Flaky):
        search_batches()
    elapsed = time.perf_counter() - start
    return ChunkResult(chunk.index, chunk.seed, chunk.runs, stats, state["failure"], elapsed)


def run_tool_campaign(
    target: ToolTarget,
    examples: int,
    seed: int = 0,
    workers: int = 1,
    *,
    regressions: str | Path | None = "scenarios/regressions",
    timeout: float = 2.0,
    max_turns: int = 6,
    chunk_size: int = 512,
    progress: Progress | None = None,
    options: UserOptions | None = None,
    search: SearchOptions | None = None,
    properties: UserProperties | Sequence[Mapping[str, Any]] | None = None,
) -> CampaignResult:
    """Run ``examples`` generated scenarios over the user's tools (``target``, see
    :meth:`ToolTarget.load`), each in a sandbox process under ``timeout`` seconds of real
    time, checking the loop's invariants and the tool contract. On a failure, the case is
    shrunk and, for a contract breach, a regression file replaying the breaking call is
    written under ``regressions`` (None: not written) and kept if it reproduces.

    ``options``: what the scenarios hold (its ``max_turns`` and ``timeout`` are replaced by
    the arguments); ``search``: the backend, coverage-guided mode, example database and
    ``setup:``/``teardown:`` (:class:`~openprogram_sim.fuzz.tools._search.SearchOptions`,
    checked here: :class:`~openprogram_sim.fuzz.tools._search.SearchError` when one cannot
    be used); ``properties``: your own invariants (rules of ``expect.properties``, or a
    :class:`~openprogram_sim.fuzz.UserProperties`), checked in the sandbox on every run; a
    run that breaks one gets a file expecting them (:func:`property_document`)."""
    props = as_properties(properties)
    if examples < 0 or workers < 1 or chunk_size < 1 or not timeout > 0 or max_turns < 1:
        raise ValueError(
            "run_tool_campaign needs examples >= 0, workers >= 1, chunk_size >= 1, "
            f"timeout > 0 and max_turns >= 1; got {examples}, {workers}, {chunk_size}, "
            f"{timeout}, {max_turns}"
        )
    options = replace(options or UserOptions(), max_turns=max_turns, timeout=timeout)
    search = (search or SearchOptions()).checked()
    batch = 1 if search.coverage_guided else BATCH
    chunks = plan_chunks(examples, seed, chunk_size, batch, 0)
    try:
        job = _Job(target, options, search, props)
        stats, elapsed, failure = run_chunks(job, chunks, workers, progress)
    finally:
        _close_kept()
    result = CampaignResult(examples, seed, workers, stats, elapsed, failure)
    if failure is not None and regressions is not None:
        _write(failure, target, regressions, seed, timeout, search, props)
    return result


# --------------------------------------------------------------------------- regression files


def _nested_runs(failure: FuzzFailure, breach: Breach, target: ToolTarget) -> int:
    """How many nested runs the breaking call made (from the failing trace; a killed run
    has none: an agentic tool is assumed to run one)."""
    call = breach.call
    assert call is not None
    agentic = target.get(call.tool).agentic
    trace = failure.trace
    starts = [i for i, e in enumerate(trace) if e["type"] == "tool_execution_start"
              and e["tool_call_id"] == call.call_id]  # fmt: skip
    if not starts:
        return 1 if agentic else 0
    runs = 0
    for e in trace[starts[0] + 1 :]:
        if e["type"] == "tool_execution_end" and e["tool_call_id"] == call.call_id:
            break
        runs += e["type"] == "agent_start" and e["depth"] == call.depth + 1
    return runs


def _with_keys(document: dict[str, Any], keys: dict[str, Any]) -> dict[str, Any]:
    """``document`` with ``keys`` (its ``setup:``/``teardown:``) placed before ``exec:``."""
    if not keys:
        return document
    out: dict[str, Any] = {}
    for key, value in document.items():
        if key == "exec":
            out.update(keys)
        out[key] = value
    return out


def _write(
    failure: FuzzFailure,
    target: ToolTarget,
    directory: str | Path,
    seed: int,
    limit: float,
    search: SearchOptions | None = None,
    properties: UserProperties | None = None,
) -> None:
    breach = failure.breach
    broken = (properties or UserProperties()).broken(failure.trace)
    if broken and (breach is None or breach.call is None):
        _write_properties(failure, target, directory, seed, limit, broken)
        return
    if breach is None or breach.call is None:
        failure.unexpressed = (
            "no single call of your tools broke the contract (a loop invariant broke, which "
            "the seed's rules cannot decide for a scenario that runs your Python)"
        )
        return
    if breach.kind == "error_lost":
        failure.unexpressed = (
            "the tool raised and its result was not an error: a bug of the loop, which a file "
            "over your tools cannot pin down without your tool's behaviour"
        )
        return
    nested = _nested_runs(failure, breach, target)
    tries = [breach]
    if breach.kind == "hangs":  # not shrunk: first try the schema's simplest arguments
        simplest = _simplest(target.get(breach.call.tool).parameters)
        if simplest is not None and simplest != breach.call.args:
            tries.insert(0, replace(breach, call=replace(breach.call, args=simplest)))
    problems: list[str] = []
    chosen: dict[str, Any] | None = None
    keys = (search or SearchOptions()).scenario_keys()
    with Sandbox(target) as sandbox:
        for attempt in tries:
            document = contract_document(target, attempt, failure.violations,
                                         nested_runs=nested, limit=limit, seed=seed)  # fmt: skip
            document = _with_keys(document, keys)
            problem, final = _check_both_sides(sandbox, document, target, breach.call.tool)
            if problem is None:
                chosen = document
                break
            problems.append(problem)
            if final:  # no other arguments change it
                break
    if chosen is None:
        failure.unexpressed = problems[-1]
        return
    path = write_document(directory, chosen)
    failure.reproduced, why = reproduces_by_cli(path, target.pythonpath, limit)
    if failure.reproduced:
        failure.path = path
        return
    path.unlink()
    failure.unexpressed = f"the regression file would not reproduce it: {why}"


def _write_properties(
    failure: FuzzFailure,
    target: ToolTarget,
    directory: str | Path,
    seed: int,
    limit: float,
    broken: dict[str, Any],
) -> None:
    """The file for a run that broke the user's properties: kept when, in the sandbox, it
    passes without them and fails with them, and ``openprogram-sim run`` fails on it."""
    failure.broke_properties = broken
    document = property_document(target, failure, broken, seed=seed)
    bare = {**document, "expect": {k: v for k, v in document["expect"].items()
                                   if k not in ("properties", "trajectory")}}  # fmt: skip
    with Sandbox(target) as sandbox:
        without, with_them = sandbox.verdict(bare), sandbox.verdict(document)
    if not without.passed:
        failure.unexpressed = (
            "replayed as a file, the run fails without your properties too "
            f"({'; '.join(without.failures) or 'it did not finish'})"
        )
        return
    if with_them.passed:
        failure.unexpressed = "replayed as a file, the run keeps your properties"
        return
    path = write_document(directory, document)
    failure.reproduced, why = reproduces_by_cli(path, target.pythonpath, limit)
    if failure.reproduced:
        failure.path = path
        return
    path.unlink()
    failure.unexpressed = f"the regression file would not reproduce it: {why}"


def _simplest(schema: dict[str, Any]) -> Any:
    """The simplest valid arguments for ``schema`` (what Hypothesis shrinks toward), or None
    when the schema has none."""
    quiet = settings(database=None, deadline=None, suppress_health_check=list(HealthCheck),
                     verbosity=Verbosity.quiet)  # fmt: skip
    try:
        return find(valid_arguments(schema), lambda _: True, settings=quiet)
    except (NoSuchExample, Unsatisfiable):
        return None


def _check_both_sides(
    sandbox: Sandbox, document: dict[str, Any], target: ToolTarget, tool: str
) -> tuple[str | None, bool]:
    """Why ``document`` is no regression file (None: it is one), and whether that is final
    (other arguments would not change it). Run in the sandbox, the file must pass with
    ``tool`` stubbed by one that keeps the contract (a fix passes it), and fail as it is.
    Blocking the event loop until the sandbox kills it counts as failing where
    ``openprogram-sim run`` has its SIGALRM deadline (POSIX), which interrupts the tool and
    fails the run as timed out (:func:`reproduces_by_cli` then checks that it does); ending
    the process does not."""
    fixed = fixed_variant(document, target, tool)
    if fixed is not None:  # no stub plays several nested runs: the real-process check decides
        report = sandbox.verdict(fixed)
        if not report.passed:
            failures = "; ".join(report.failures)
            return f"the file would fail on a fixed {tool} too ({failures})", True
    report = sandbox.verdict(document)
    if report.killed:
        return _killed_problem(report, tool), True
    if report.passed:
        return (
            "replayed alone, the call passes the file: the text the model is sent for its "
            "value parses as JSON (a scenario file sees only that text), or the breach needs "
            "the calls before it"
        ), False
    return None, False


def _killed_problem(report: RunReport, tool: str) -> str | None:
    """Why a replay the sandbox had to kill makes no file (None: it makes one)."""
    if not any(b.kind == "hangs" for b in report.breaches):  # it ended the process
        return (
            f"replayed alone, the call ends the process that runs it ({report.violations[0]}), "
            "so a file replaying it would end `openprogram-sim run` or pytest rather than fail"
        )
    if not _DEADLINE:
        return (
            f"{tool} blocks the event loop, and without SIGALRM (this is not a POSIX system) "
            "`openprogram-sim run` keeps a file's `timeout:` on its event loop alone, which "
            "cannot stop such a tool, so a file replaying the call would hang rather than fail"
        )
    return None


def reproduces_by_cli(
    path: str | Path, pythonpath: Sequence[str] = (), limit: float = 5.0
) -> tuple[bool, str]:
    """Whether ``openprogram-sim run PATH`` fails on it (exit 1), in a real process in the
    current directory; a run that outlives ``limit`` plus :data:`REPRODUCE_MARGIN` is killed
    and does not count. Returns the verdict and what happened."""
    command = [sys.executable, "-m", "openprogram_sim.cli", "run", str(path)]
    for folder in pythonpath:
        command += ["--pythonpath", folder]
    wait = limit + REPRODUCE_MARGIN
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=wait)
    except subprocess.TimeoutExpired:
        return False, _held(wait)
    if done.returncode == 1:
        return True, "it fails"
    tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
    return False, f"`openprogram-sim run` exits {done.returncode} on it ({tail[0]})"


def _held(wait: float) -> str:
    """Why a run of a regression file outlived the check's ``wait``."""
    head = f"`openprogram-sim run` did not finish on it within {math.ceil(wait)} s: "
    if not _DEADLINE:
        return head + (
            "without SIGALRM (this is not a POSIX system) the run's `timeout:` cannot stop a "
            "tool that blocks the event loop, so a file would hang rather than fail"
        )
    return head + (
        "something held it past the file's `timeout:` that the run's SIGALRM deadline "
        f"({GRACE_SECONDS:g} s later) could not interrupt either (C code that does not return "
        "to Python, a tool that catches BaseException and goes on blocking; "
        "see openprogram's docs/limits.md), so a file would hang rather than fail"
    )
