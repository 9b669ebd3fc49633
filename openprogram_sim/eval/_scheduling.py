"""The samples of an eval's scenarios run K at a time (``--concurrency``, within the
provider's limit), each scenario's verdict read from its samples in the order they were
started, within ``--budget``.

- **The sequential stop stays sound.** A sample that finishes early waits for those started
  before it: the test looks at samples 1..n exactly as a run of one at a time would, and
  stops at the same n. Samples started after that n (in flight when the verdict was
  decided) are *discarded*: not counted, their cassettes removed, their cost counted in the
  spend. So ``--concurrency`` changes how long an eval takes, never its verdict.
- **Names stay deterministic.** Sample N of a scenario is ``sample-NNN.yaml`` (and session
  ``<slug>-N`` in ``--base-url``'s ``{sample}``) whatever order the samples finish in.
- **The budget.** Before a sample starts, its cost is estimated as the mean of the
  scenario's samples so far (else of the eval's); it starts only if the spend, the
  estimates of the samples in flight and its own stay within the budget. Until one sample
  has finished there is no estimate, so one runs alone.
- **Ctrl-C** (``should_stop``): no sample starts after it; those in flight finish and count.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from openprogram_sim.eval._judge import not_applicable
from openprogram_sim.eval._options import EvalOptions, scenario_slug
from openprogram_sim.eval._pricing import Price
from openprogram_sim.eval._regressions import write_regressions
from openprogram_sim.eval._sample import run_sample
from openprogram_sim.eval._stats import SequentialTest
from openprogram_sim.eval._summary import Sample, ScenarioResult
from openprogram_sim.scenario import Scenario

__all__ = ["Budget", "EvalRun", "Tally", "evaluate_all"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Tally:
    """Where an eval stands, after each sample counted (for a progress bar)."""

    done: int
    """Samples counted so far, over the scenarios."""
    passed: int
    remaining: int
    """The most samples still to take (fewer when a verdict is decided sooner)."""
    elapsed: float
    """Seconds since the eval started."""
    slots: int
    """Samples run at once."""


@dataclass(slots=True)
class Budget:
    """The dollars an eval may spend, and what it has."""

    limit: float | None
    spent: float = 0.0
    stopped: bool = False
    """Whether it kept a sample from starting."""
    estimate: float | None = None
    """The estimated cost of the sample it refused."""

    def allows(self, estimate: float | None, committed: float, running: int) -> bool:
        """Whether a sample estimated at ``estimate`` may start, with ``committed`` dollars
        estimated for the ``running`` samples in flight."""
        if self.limit is None:
            return True
        if estimate is None:  # nothing finished yet: one sample at a time, to learn
            return running == 0 and self.spent < self.limit
        return self.spent + committed + estimate <= self.limit


@dataclass(slots=True, kw_only=True)
class _Run:
    """One scenario's sampling."""

    scenario: Scenario
    """With the eval's timeout."""
    source: str
    slug: str
    folder: Path
    result: ScenarioResult
    test: SequentialTest | None
    started: int = 0
    """The last sample number started."""
    running: set[int] = field(default_factory=set)
    finished: dict[int, Sample] = field(default_factory=dict)
    """Finished samples waiting for those started before them."""
    closed: bool = False
    """No more samples start (decided, stopped)."""
    decided: bool = False
    """The verdict was decided: samples finishing after that are discarded."""
    prepared: bool = False

    @property
    def more(self) -> bool:
        return not self.closed and self.started < self.result.max_samples

    @property
    def over(self) -> bool:
        return not self.more and not self.running and not self.finished

    def estimate(self) -> float | None:
        costs = [s.cost for s in self.result.samples if s.cost is not None]
        return sum(costs) / len(costs) if costs else None


def _run_of(scenario: Scenario, options: EvalOptions, priced: bool) -> _Run:
    slug = scenario_slug(scenario.path)
    result = ScenarioResult(
        path=scenario.path,
        title=scenario.scenario,
        max_samples=options.samples,
        confidence=options.confidence,
        threshold=options.threshold,
        sequential=options.sequential,
        not_applicable=not_applicable(scenario),
        expectations=[],
        priced=priced,
    )
    return _Run(
        scenario=scenario.model_copy(update={"timeout": options.timeout}),
        source=scenario.path,
        slug=slug,
        folder=options.out / slug,
        result=result,
        test=options.test(),
    )


def _prepare(run: _Run) -> None:
    run.folder.mkdir(parents=True, exist_ok=True)
    for old in run.folder.glob("sample-*.yaml"):  # a rerun's samples replace the last run's
        old.unlink()
    run.prepared = True


class _Inline:
    """One sample at a time in the calling thread (``--concurrency 1``): a second Ctrl-C
    stops the sample running at once, as it interrupts the thread that runs it."""

    def submit(self, fn: Callable[..., Sample], *args: object) -> cf.Future[Sample]:
        future: cf.Future[Sample] = cf.Future()
        try:
            future.set_result(fn(*args))
        except Exception as exc:  # raised again by future.result()
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        return None


class EvalRun:
    """An eval under way: iterate it for each scenario's result, in order, as soon as it
    and those before it are done; :attr:`budget` holds the spend."""

    def __init__(
        self,
        scenarios: Iterable[Scenario],
        options: EvalOptions,
        on_sample: Callable[[ScenarioResult, Sample], None] | None,
        on_progress: Callable[[Tally], None] | None,
        should_stop: Callable[[], bool] | None,
    ) -> None:
        self.options = options
        self.prices = options.prices()
        self.price: Price | None = self.prices.price(options.model)
        if options.budget is not None and self.price is None:
            raise ValueError(
                f"--budget {options.budget:g}: the pricing table has no price for "
                f"{options.model}, so the spend cannot be counted; give one with --pricing "
                "FILE or [tool.openprogram.pricing] in pyproject.toml (docs/evals.md)"
            )
        self.runs = [_run_of(s, options, self.price is not None) for s in scenarios]
        self.budget = Budget(options.budget)
        self.slots = options.slots()
        self.on_sample = on_sample
        self.on_progress = on_progress
        self.should_stop = should_stop or (lambda: False)
        self.futures: dict[cf.Future[Sample], tuple[_Run, int]] = {}
        self.start = time.monotonic()
        self.errors: list[tuple[int, int, BaseException]] = []
        """What samples raised: (scenario, sample, error)."""

    # -- starting samples ----------------------------------------------------------------

    def _estimate(self, run: _Run) -> float | None:
        own = run.estimate()
        if own is not None:
            return own
        costs = [s.cost for r in self.runs for s in r.result.samples if s.cost is not None]
        return sum(costs) / len(costs) if costs else None

    def _committed(self) -> float:
        return sum(self._estimate(run) or 0.0 for run, _ in self.futures.values())

    def _fill(self, pool: cf.ThreadPoolExecutor | _Inline) -> None:
        if self.should_stop():
            self._stop_all(interrupted=True)
        for run in self.runs:
            while run.more and len(self.futures) < self.slots:
                estimate = self._estimate(run)
                if not self.budget.allows(estimate, self._committed(), len(self.futures)):
                    if estimate is not None or not self.futures:
                        self.budget.stopped, self.budget.estimate = True, estimate
                        self._stop_all(budget=True)
                    return
                if not run.prepared:
                    _prepare(run)
                run.started += 1
                run.running.add(run.started)
                args = (run.scenario, self.options, run.folder, run.started)
                future = pool.submit(run_sample, *args)
                self.futures[future] = (run, run.started)
            if run.more:
                return  # a scenario's samples start before the next scenario's

    def _stop_all(self, *, interrupted: bool = False, budget: bool = False) -> None:
        for run in self.runs:
            if run.more:
                run.result.interrupted = run.result.interrupted or interrupted
                run.result.budget_stopped = run.result.budget_stopped or budget
            run.closed = True

    # -- samples finished ----------------------------------------------------------------

    def _finished(self, run: _Run, index: int, sample: Sample) -> None:
        run.running.discard(index)
        if self.price is not None:
            sample.cost = self.price.cost(sample.usage)
            if sample.judge_model is not None and sample.judge_usage:
                # a judge on a model the table has no price for adds nothing (said once)
                judged = self.prices.cost(sample.judge_model, sample.judge_usage)
                sample.cost += judged or 0.0
        self.budget.spent += sample.cost or 0.0
        if run.decided:
            self._discard(run, sample)
            return
        run.finished[index] = sample
        self._count_in_order(run)

    def _count_in_order(self, run: _Run) -> None:
        result = run.result
        while result.n + 1 in run.finished:
            sample = run.finished.pop(result.n + 1)
            result.samples.append(sample)
            for key in sample.checks:
                if key not in result.expectations:
                    result.expectations.append(key)
            if self.on_sample is not None:
                self.on_sample(result, sample)
            if run.test is not None and run.test.decide(result.passed, result.n) != "undecided":
                run.closed = run.decided = True
                for later in sorted(run.finished):
                    self._discard(run, run.finished.pop(later))
                break
        if self.on_progress is not None:
            self.on_progress(self._tally())

    def _discard(self, run: _Run, sample: Sample) -> None:
        run.result.discarded.append(sample.index)
        run.result.discarded.sort()
        run.result.discarded_cost += sample.cost or 0.0
        Path(sample.cassette).unlink(missing_ok=True)

    def _tally(self) -> Tally:
        done = sum(r.result.n for r in self.runs)
        remaining = sum(
            r.result.max_samples - r.result.n if r.more else len(r.running) + len(r.finished)
            for r in self.runs
        )
        return Tally(
            done=done,
            passed=sum(r.result.passed for r in self.runs),
            remaining=remaining,
            elapsed=time.monotonic() - self.start,
            slots=self.slots,
        )

    # -- the loop ------------------------------------------------------------------------

    def _finish(self, run: _Run) -> ScenarioResult:
        result = run.result
        if not run.prepared:  # never started (the budget): its last run's files stay
            return result
        result.regressions = write_regressions(
            result.samples, run.source, self.options.out / "regressions", run.slug
        )
        return result

    def __iter__(self) -> Iterator[ScenarioResult]:
        emitted = 0
        pool: cf.ThreadPoolExecutor | _Inline = (
            _Inline()
            if self.slots == 1
            else cf.ThreadPoolExecutor(self.slots, thread_name_prefix="openprogram-eval")
        )
        try:
            while emitted < len(self.runs):
                if self.errors and not self.futures:
                    raise min(self.errors, key=lambda e: e[:2])[2]  # the first sample's, always
                self._fill(pool)
                while not self.errors and emitted < len(self.runs) and self.runs[emitted].over:
                    run = self.runs[emitted]
                    emitted += 1
                    if not run.prepared and run.result.interrupted:
                        return  # interrupted before it started: nothing to report
                    yield self._finish(run)
                if not self.futures:
                    continue
                done, _ = cf.wait(self.futures, timeout=0.2, return_when=cf.FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: self.futures[f][1]):
                    run, index = self.futures.pop(future)
                    error = future.exception()
                    if error is None:
                        self._finished(run, index, future.result())
                        continue
                    # a setup mistake: no more samples; those in flight end, then it is raised
                    run.running.discard(index)
                    self.errors.append((self.runs.index(run), index, error))
                    self._stop_all()
        except KeyboardInterrupt:  # the second Ctrl-C: do not wait for the samples in flight
            self._stop_all(interrupted=True)
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        except BaseException:
            self._stop_all()
            pool.shutdown(wait=True, cancel_futures=True)  # their cassettes end whole
            raise
        pool.shutdown(wait=True)


def evaluate_all(
    scenarios: Iterable[Scenario],
    options: EvalOptions,
    *,
    on_sample: Callable[[ScenarioResult, Sample], None] | None = None,
    on_progress: Callable[[Tally], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> EvalRun:
    """Sample each of ``scenarios`` under ``options`` (``options.slots()`` samples at
    once), yielding each scenario's result in order as soon as it and those before it are
    done. Raises ``ValueError`` at once for a ``--budget`` without a price; a sample's
    error (:class:`~openprogram_sim.eval.EvalSetupError`) after the samples in flight end.
    ``should_stop`` (Ctrl-C) is asked before samples start: once it says so none does,
    and scenarios never started are not yielded."""
    return EvalRun(scenarios, options, on_sample, on_progress, should_stop)
