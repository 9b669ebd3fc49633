"""A campaign cut into seeded chunks, each searched by Hypothesis, spread over processes.

Both campaigns (:mod:`.loop`, :mod:`.tools`) run this way. A chunk's seed derives from the
campaign seed and its index alone (:func:`chunk_seed`), so a campaign is the same whatever
the number of worker processes, and any scheduler can run any chunk; on a violation, the
failing chunk with the lowest index is the one reported (:func:`run_chunks`).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import math
import multiprocessing
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from openprogram_sim.fuzz._results import FuzzFailure
from openprogram_sim.fuzz._stats import FuzzStats

__all__ = [
    "Chunk",
    "ChunkResult",
    "Progress",
    "Violation",
    "chunk_seed",
    "plan_chunks",
    "run_chunks",
    "search_chunk",
    "search_settings",
]

_T = TypeVar("_T")


@dataclass(slots=True)
class Chunk:
    """One chunk's share of a campaign (picklable, for worker processes)."""

    index: int
    seed: int
    runs: int
    batch: int
    """Scenarios per Hypothesis example."""
    replay_every: int


@dataclass(slots=True)
class ChunkResult:
    """What one chunk of a campaign found (:func:`~openprogram_sim.fuzz.loop.run_chunk`)."""

    index: int
    """Which chunk, from 0."""
    seed: int
    """The chunk's own seed (derived from the campaign seed and the index)."""
    runs: int
    """Generated scenarios run."""
    stats: FuzzStats
    failure: FuzzFailure | None
    """The first violation, shrunk; None when every run kept the invariants."""
    elapsed: float


class Violation(AssertionError):
    """Raised inside a chunk's search when a run broke something, so Hypothesis shrinks it
    (the chunk keeps the failure; the search's own error is not the report)."""


Progress = Callable[[FuzzStats, float], None]
"""Told the merged stats and the wall time so far after each chunk."""


def chunk_seed(seed: int, index: int) -> int:
    digest = hashlib.sha256(f"openprogram-fuzz/{seed}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def plan_chunks(
    examples: int, seed: int, chunk_size: int, batch: int, replay_every: int
) -> list[Chunk]:
    """The chunks of the campaign ``(examples, seed, chunk_size)``, in index order."""
    out = []
    for index, first in enumerate(range(0, examples, chunk_size)):
        runs = min(chunk_size, examples - first)
        out.append(Chunk(index, chunk_seed(seed, index), runs, batch, replay_every))
    return out


def search_settings(chunk: Chunk) -> settings:
    """How a chunk searches: its examples in batches, shrinking the first failure, quietly,
    with no database or deadline (campaigns are reproduced by their seed)."""
    return settings(
        max_examples=max(1, math.ceil(chunk.runs / chunk.batch)),
        database=None,
        deadline=None,
        derandomize=False,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        print_blob=False,
    )


def search_chunk(
    chunk: Chunk,
    scenarios: st.SearchStrategy[_T],
    run_one: Callable[[_T], None],
    *,
    tolerate: tuple[type[BaseException], ...] = (),
) -> None:
    """Search ``chunk``: Hypothesis feeds ``run_one`` batches of ``chunk.batch`` scenarios
    under the chunk's seed and :func:`search_settings`, so both campaigns search alike.
    ``run_one`` keeps its own failure and raises :class:`Violation` to have it shrunk; the
    search's last error is not the report, so it (and any error in ``tolerate``) ends the
    search quietly."""

    @hypothesis_seed(chunk.seed)
    @search_settings(chunk)
    @given(st.lists(scenarios, min_size=chunk.batch, max_size=chunk.batch))
    def search(batch: list[_T]) -> None:
        for scenario in batch:
            run_one(scenario)

    with contextlib.suppress(Violation, *tolerate), _no_full_collection():
        search()


_NO_FULL_COLLECTION = 1_000_000
"""The oldest generation's threshold while a chunk is searched: never reached."""


@contextlib.contextmanager
def _no_full_collection() -> Iterator[None]:
    """No full garbage collection while a chunk is searched (the young generations are
    collected as usual; the thresholds are restored when the search ends, unless someone
    else changed them meanwhile). A full collection walks the whole heap, Hypothesis's
    search state included, and the search's garbage is short-lived."""
    if not gc.isenabled():
        yield
        return
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], _NO_FULL_COLLECTION)
    try:
        yield
    finally:
        if gc.get_threshold()[2] == _NO_FULL_COLLECTION:
            gc.set_threshold(*thresholds)


def run_chunks(
    run: Callable[[Chunk], ChunkResult],
    chunks: list[Chunk],
    workers: int,
    progress: Progress | None,
) -> tuple[FuzzStats, float, FuzzFailure | None]:
    """Run ``chunks`` with ``run`` (in ``workers`` processes when more than one; ``run``
    must then be picklable) until the first failing one; the merged stats, the wall time,
    and the failure of the lowest failing chunk (deterministic whatever the workers)."""
    stats = FuzzStats()
    start = time.perf_counter()
    results: dict[int, ChunkResult] = {}

    def collect(result: ChunkResult) -> None:
        results[result.index] = result
        stats.merge(result.stats)
        if progress is not None:
            progress(stats, time.perf_counter() - start)

    if workers == 1:
        for chunk in chunks:
            collect(run(chunk))
            if results[chunk.index].failure is not None:
                break
    else:
        _run_parallel(run, chunks, workers, collect, results)
    failed = sorted(i for i, r in results.items() if r.failure is not None)
    failure = results[failed[0]].failure if failed else None
    return stats, time.perf_counter() - start, failure


def _run_parallel(
    run: Callable[[Chunk], ChunkResult],
    chunks: list[Chunk],
    workers: int,
    collect: Callable[[ChunkResult], None],
    results: dict[int, ChunkResult],
) -> None:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures: dict[int, Future[ChunkResult]] = {c.index: pool.submit(run, c) for c in chunks}
        first_failure: int | None = None
        for index, future in futures.items():  # in chunk order: deterministic
            if first_failure is not None and index > first_failure:
                future.cancel()
                continue
            collect(future.result())
            if results[index].failure is not None and first_failure is None:
                first_failure = index
