"""The loop campaign: generated scenarios run through the real runner, invariants checked.

Speed is a feature here, and three choices give it:

- Generation: each Hypothesis example draws a batch of byte strings (one per scenario)
  and the builders of :mod:`openprogram_sim.fuzz._generate` read the scenario from them.
  One large draw per scenario costs a fraction of the ~80 small draws the public
  strategies make, and the shrinker still works (lower bytes are simpler choices).
- Execution: each process keeps one event loop and runs every scenario on it
  (``asyncio.run`` per run would cost more than a typical run); scenarios go straight from
  dicts to the runner, never through YAML.
- Cores: the campaign is cut into seeded chunks (:mod:`openprogram_sim.fuzz._chunks`), so a
  campaign is the same whatever the number of worker processes; on a violation, the
  failing chunk with the lowest index is the one reported.

A violation is then written as a regression file whose expectations come from the seed's
rules (:mod:`openprogram_sim.fuzz.loop._regression`), and the file is kept only if
``openprogram-sim run`` on it fails against the loop that produced it (:func:`reproduces`);
otherwise the failure says why no file could express it (``FuzzFailure.unexpressed``).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import math
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from openprogram_sim.errors import ScenarioError
from openprogram_sim.fuzz import _generate as _s
from openprogram_sim.fuzz._chunks import (
    Chunk,
    ChunkResult,
    Progress,
    Violation,
    plan_chunks,
    run_chunks,
    search_chunk,
)
from openprogram_sim.fuzz._invariants import check_outcome_invariants
from openprogram_sim.fuzz._properties import UserProperties, as_properties
from openprogram_sim.fuzz._results import CampaignResult, FuzzFailure
from openprogram_sim.fuzz._stats import FuzzStats
from openprogram_sim.fuzz.loop._predict import UnpredictableScenario
from openprogram_sim.fuzz.loop._regression import regression_document, write_regression
from openprogram_sim.play import arun_scenario, check_outcome, run_scenario
from openprogram_sim.scenario import Scenario, load_scenario

__all__ = [
    "SCENARIO_BYTES",
    "chunk_count",
    "reproduces",
    "run_campaign",
    "run_chunk",
    "scenario_from_bytes",
]

SCENARIO_BYTES = 160
"""Bytes drawn per scenario (choices past them take their simplest value)."""

MAX_BATCH = 32
"""The most scenarios one Hypothesis example may hold: 32 x 160 bytes stays well inside the
8 KiB Hypothesis allows an example (64 did not fit: every example overran)."""

_OPTIONS = (
    1,  # min_tools
    4,  # max_tools
    ("returns", "raises", "exec"),
    1,  # min_turns
    8,  # max_turns
    4,  # max_calls
    ("text", "calls", "error", "aborted", "truncate", "raise"),
    ("full", "list", "empty", "none"),
    _s.MAX_ITERATIONS,
    2,  # max_steering
    2,  # max_follow_ups
    True,  # spin
)


def _check_batch(batch: int) -> None:
    if batch > MAX_BATCH:
        raise ValueError(
            f"a campaign's batch is at most {MAX_BATCH} (got {batch}): each Hypothesis example "
            f"draws batch x {SCENARIO_BYTES} bytes, and Hypothesis gives up on examples past "
            "8 KiB; a larger batch would save little anyway (the default is 16)"
        )


def scenario_from_bytes(blob: bytes) -> dict[str, Any]:
    """The scenario dict the campaign builds from one byte string (the defaults of
    :func:`openprogram_sim.fuzz.strategies.scenario_dicts`)."""
    return _s.scenario_dict(_s.ByteSource(blob), *_OPTIONS)


_REPLAY_MARK = "run again"
"""In the violations that come from comparing a replay (see ``check_outcome_invariants``)."""


_LOOP: asyncio.AbstractEventLoop | None = None


def _loop() -> asyncio.AbstractEventLoop:
    """This process's event loop, created once and reused by every run."""
    global _LOOP
    if _LOOP is None or _LOOP.is_closed():
        _LOOP = asyncio.new_event_loop()
    return _LOOP


def _violations(
    outcome: Any, properties: UserProperties, *, replay: Any | None = None
) -> list[str]:
    """The built-in invariants ``outcome`` breaks, then the user's properties."""
    out = check_outcome_invariants(outcome, replay=replay)
    return out + properties.violations(outcome.trace) if properties else out


def _release_error(outcome: Any) -> None:
    """Once a run is checked: the locals of the finished frames its error's tracebacks hold
    (the chain's, ``__cause__`` and ``__context__``) cleared. A run that ended by raising
    (a script run out, a provider fault) is otherwise a reference cycle, the traceback's
    frames holding the run that holds the error, and all of it left to the cyclic garbage
    collector; the failure a campaign reports keeps the trace, never the exception."""
    exc = outcome.error
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__


def _run_chunk(chunk: Chunk, properties: UserProperties | None = None) -> ChunkResult:
    properties = properties or UserProperties()
    loop = _loop()
    stats = FuzzStats()
    state: dict[str, Any] = {"left": chunk.runs, "failure": None, "replay_failed": False}
    start = time.perf_counter()

    def run_one(blob: bytes) -> None:
        searching = state["failure"] is None
        if searching:
            if state["left"] <= 0:
                return
            state["left"] -= 1
        data = scenario_from_bytes(blob)
        scenario = Scenario.model_validate(data)
        outcome = loop.run_until_complete(arun_scenario(scenario))
        replay = None
        # while shrinking, replay only when the violation was a replay that differed
        if not chunk.replay_every:
            replaying = False
        elif searching:
            replaying = stats.runs % chunk.replay_every == 0
        else:
            replaying = state["replay_failed"]
        if replaying:
            replay = loop.run_until_complete(arun_scenario(scenario))
        violations = _violations(outcome, properties, replay=replay)
        if searching:
            stats.add(outcome)
            stats.replays += replay is not None
        _release_error(outcome)
        if replay is not None:
            _release_error(replay)
        if violations:
            # every failing call overwrites this: the last one is Hypothesis's shrunk case
            if searching:
                state["replay_failed"] = any(_REPLAY_MARK in v for v in violations)
            state["failure"] = FuzzFailure(
                data, violations, outcome.trace, outcome.model_calls, chunk.index, chunk.seed
            )
            raise Violation("\n".join(violations))

    search_chunk(chunk, st.binary(min_size=SCENARIO_BYTES, max_size=SCENARIO_BYTES), run_one)
    elapsed = time.perf_counter() - start
    return ChunkResult(chunk.index, chunk.seed, chunk.runs, stats, state["failure"], elapsed)


# --------------------------------------------------------------------------- campaigns


def run_campaign(
    examples: int,
    seed: int = 0,
    workers: int = 1,
    *,
    regressions: str | Path | None = "scenarios/regressions",
    chunk_size: int = 1024,
    batch: int = 16,
    replay_every: int = 4,
    progress: Progress | None = None,
    properties: UserProperties | Sequence[Mapping[str, Any]] | None = None,
) -> CampaignResult:
    """Run ``examples`` generated scenarios and check the invariants on each (every
    ``replay_every``-th run is run twice and the traces compared; 0: never; ``batch``
    scenarios, at most :data:`MAX_BATCH`, go into each Hypothesis example). ``workers`` > 1
    spreads chunks over processes. On a violation, the shrunk case is written as a scenario
    file under ``regressions`` (None: not written).

    ``properties``: your own invariants, rules of ``expect.properties`` (a list, or a
    :class:`~openprogram_sim.fuzz.UserProperties` with a trajectory and where each rule was
    written), checked on every run too; a regression file for a broken one expects it."""
    if examples < 0 or workers < 1 or chunk_size < 1 or batch < 1 or replay_every < 0:
        raise ValueError(
            "run_campaign needs examples >= 0, workers >= 1, chunk_size >= 1, batch >= 1 "
            f"and replay_every >= 0; got {examples}, {workers}, {chunk_size}, {batch}, "
            f"{replay_every}"
        )
    _check_batch(batch)
    props = as_properties(properties)
    chunks = plan_chunks(examples, seed, chunk_size, batch, replay_every)
    run = functools.partial(_run_chunk, properties=props)
    stats, elapsed, failure = run_chunks(run, chunks, workers, progress)
    outcome = CampaignResult(examples, seed, workers, stats, elapsed, failure)
    if failure is not None and regressions is not None:
        _write(failure, regressions, seed, props)
    return outcome


def chunk_count(examples: int, chunk_size: int = 1024) -> int:
    """How many chunks a campaign of ``examples`` runs is cut into."""
    return math.ceil(examples / chunk_size) if examples > 0 else 0


def run_chunk(
    index: int,
    examples: int,
    seed: int = 0,
    *,
    chunk_size: int = 1024,
    batch: int = 16,
    replay_every: int = 4,
    regressions: str | Path | None = None,
    properties: UserProperties | Sequence[Mapping[str, Any]] | None = None,
) -> ChunkResult:
    """Run chunk ``index`` of the campaign ``(examples, seed, chunk_size)``: the same cases
    whichever process, worker or host runs it, so any scheduler (pytest-xdist running the
    chunks as test items, a CI matrix) can spread a campaign with no coordination. A
    violation is shrunk and, with ``regressions``, written as :func:`run_campaign` writes
    it (``properties`` as there)."""
    _check_batch(batch)
    props = as_properties(properties)
    chunks = plan_chunks(examples, seed, chunk_size, batch, replay_every)
    if not 0 <= index < len(chunks):
        raise ValueError(f"chunk {index} does not exist: the campaign has {len(chunks)}")
    done = _run_chunk(chunks[index], props)
    if done.failure is not None and regressions is not None:
        _write(done.failure, regressions, seed, props)
    return done


def _removals(data: dict[str, Any]) -> list[Callable[[dict[str, Any]], None]]:
    """Edits that make a scenario smaller: drop a tool no turn calls, a steering point, a
    follow-up, an exec option (the cap included), a turn's thinking or latency, a whole
    turn. Applied last first, so the indices of the edits still to try stay valid."""
    called = {
        str(c["name"]) if "name" in c else next(iter(c))
        for turn in data["model"]
        for c in turn.get("tool_calls") or []
    }
    edits: list[Callable[[dict[str, Any]], None]] = []

    def pop(*path: Any) -> Callable[[dict[str, Any]], None]:
        def edit(d: dict[str, Any]) -> None:
            node = d
            for key in path[:-1]:
                node = node[key]
            del node[path[-1]]

        return edit

    edits += [pop("tools", name) for name in data["tools"] if name not in called]
    edits += [pop("steering", i) for i in reversed(range(len(data.get("steering", []))))]
    edits += [pop("follow_ups", i) for i in reversed(range(len(data.get("follow_ups", []))))]
    options = ("tool_choice", "parallel_tool_calls", "max_iterations")
    edits += [pop("exec", k) for k in options if k in data["exec"]]
    for i, turn in enumerate(data["model"]):
        edits += [pop("model", i, k) for k in ("thinking", "latency") if k in turn]
    if len(data["model"]) > 1:
        edits += [pop("model", i) for i in range(len(data["model"]))]
    return edits


def _file_fails(data: dict[str, Any], expect: dict[str, Any] | None = None) -> bool:
    """Whether the regression file the rules give for ``data`` (and ``expect``: the user's
    properties it carries) fails against this loop (checked in memory; :func:`reproduces`
    checks the written file)."""
    try:
        document = regression_document(_valid(data), [], properties=expect)
        scenario = Scenario.model_validate(document)
    except (UnpredictableScenario, ValueError):
        return False
    outcome = _loop().run_until_complete(arun_scenario(scenario))
    return not check_outcome(outcome).passed


def _valid(data: dict[str, Any]) -> Scenario:
    """``data`` as a scenario whose names all resolve (ValueError otherwise)."""
    scenario = Scenario.model_validate(data)
    names = set(scenario.tools)
    if any(set(t.exec.tools or ()) - names for t in scenario.tools.values() if t.exec):
        raise ValueError("a nested exec offers a tool the scenario lacks")
    if set(scenario.exec.tools or ()) - names:
        raise ValueError("exec offers a tool the scenario lacks")
    return scenario


def _simplify(
    failure: FuzzFailure, properties: UserProperties, expect: dict[str, Any], *, as_file: bool
) -> None:
    """After Hypothesis: drop what the failure does not need, one edit at a time, keeping
    an edit only if the run still violates an invariant (``properties`` included) and
    (``as_file``) the regression file, with the user's rules in ``expect``, still fails (an
    edit that breaks the scenario's references is not kept)."""
    loop = _loop()
    for edit in reversed(_removals(failure.scenario)):
        candidate = copy.deepcopy(failure.scenario)
        try:
            edit(candidate)
            scenario = _valid(candidate)
        except (KeyError, IndexError, ValueError):
            continue
        outcome = loop.run_until_complete(arun_scenario(scenario))
        violations = _violations(outcome, properties)
        if violations and (not as_file or _file_fails(candidate, expect)):
            failure.scenario, failure.violations = candidate, violations
            failure.trace, failure.model_calls = outcome.trace, outcome.model_calls


def _write(
    failure: FuzzFailure,
    directory: str | Path,
    seed: int,
    properties: UserProperties | None = None,
) -> None:
    """Write the regression file and keep it only if it reproduces; else say why not. The
    user's rules that the run breaks go into it (``expect.properties``)."""
    properties = properties or UserProperties()
    replay = any(_REPLAY_MARK in v for v in failure.violations)
    expect = properties.broken(failure.trace)
    as_file = not replay and _file_fails(failure.scenario, expect)
    if not replay:
        _simplify(failure, properties, expect, as_file=as_file)
    expect = properties.broken(failure.trace)
    failure.broke_properties = expect or None
    try:
        path = write_regression(
            directory, _valid(failure.scenario), failure.violations, seed=seed, properties=expect
        )
    except UnpredictableScenario as exc:
        failure.unexpressed = f"the seed's rules do not decide this scenario: {exc}"
        return
    failure.reproduced = reproduces(path)
    if failure.reproduced:
        failure.path = path
        return
    problem = _load_problem(path)
    path.unlink()
    if problem is not None:  # e.g. a rule of yours that names a tool the file lacks
        failure.unexpressed = f"the regression file would not load: {problem}"
        return
    failure.unexpressed = (
        "the regression file the seed's rules give passes against this loop, so it would "
        "not reproduce the violation"
        + (" (a replay that differs is not something one run of a file can show)" if replay else "")
    )


def _load_problem(path: Path) -> str | None:
    """Why the file at ``path`` does not load (None: it does)."""
    try:
        load_scenario(path)
    except ScenarioError as exc:
        return str(exc).replace(str(path), path.name)
    return None


def reproduces(path: str | Path) -> bool:
    """Whether ``openprogram-sim run PATH`` fails against the loop as it is now: the file
    loads, and its run misses one of its own expectations (exactly what ``run`` checks;
    the invariants are not consulted). A file that does not load does not reproduce."""
    try:
        scenario = load_scenario(path)
    except ScenarioError:
        return False
    return not check_outcome(run_scenario(scenario)).passed
