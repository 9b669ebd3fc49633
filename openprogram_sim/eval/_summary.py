"""An eval's results: each sample, each scenario's pass rate with its interval, verdict,
pass@k and flakiness, as the summary prints them and the ``--json`` file holds them; and
the comparison with a baseline file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openprogram_sim.eval._stats import (
    Interval,
    SequentialTest,
    Verdict,
    fisher_exact,
    pass_at_k,
    wilson,
)
from openprogram_sim.trace import trace_calls

__all__ = [
    "JSON_VERSION", "Change", "Regression", "Sample", "ScenarioResult", "compare", "sample_calls",
]  # fmt: skip

JSON_VERSION = 1
"""The version of the ``--json`` file's layout."""

PASS_AT = (1, 3, 5, 10, 20, 50, 100)
"""The k of pass@k reported (those up to the number of samples)."""


def sample_calls(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's tool calls as :attr:`Sample.calls` keeps them (its trajectory)."""
    return [
        {"name": c.name, "args": c.args, "depth": c.depth, "round": c.round}
        for c in trace_calls(trace)
    ]


@dataclass(slots=True, kw_only=True)
class Sample:
    """One sample: the run, its cassette and its verdict."""

    index: int
    passed: bool
    checks: dict[str, bool]
    """Each applicable expectation, held or not."""
    failures: list[str]
    cassette: str
    """The cassette file it was recorded to."""
    error: str | None
    """What exec raised (None: it returned)."""
    model_calls: int
    calls: list[dict[str, Any]]
    """The tool calls made (name, args, depth, round): the sample's trajectory."""
    usage: dict[str, int] = field(default_factory=dict)
    """Tokens over its model calls, as the provider reported them (``input``, ``output``,
    ``cache_read``, ``cache_write``, ``reasoning``)."""
    cost: float | None = None
    """Dollars for :attr:`usage` at the eval's prices (None: the model has no price)."""
    retries: list[dict[str, Any]] = field(default_factory=list)
    """Each refused model call retried (429 or 5xx): its call, status, what the server
    asked, the seconds waited; also in the cassette's metadata."""
    judge_model: str | None = None
    """The ``expect.judge`` model asked after the run (None: no judge)."""
    judge_usage: dict[str, int] = field(default_factory=dict)
    """The judge's tokens; its cost, at the judge model's price, is part of :attr:`cost`."""

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index, "passed": self.passed, "checks": dict(self.checks),
            "failures": list(self.failures), "cassette": self.cassette, "error": self.error,
            "model_calls": self.model_calls, "calls": list(self.calls),
            "usage": dict(self.usage), "cost_usd": self.cost,
            "retries": [dict(r) for r in self.retries],
            "judge_model": self.judge_model, "judge_usage": dict(self.judge_usage),
        }  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Regression:
    """A regression scenario written for one distinct failure."""

    path: str
    count: int
    """How many failing samples made this trajectory."""
    samples: list[int]
    """Their numbers (from 1)."""
    failed: list[str]
    """The expectations its first sample failed."""

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "count": self.count, "samples": list(self.samples),
                "failed": list(self.failed)}  # fmt: skip


@dataclass(slots=True, kw_only=True)
class ScenarioResult:
    """One scenario's samples and what they say."""

    path: str
    title: str
    max_samples: int
    confidence: float
    threshold: float | None
    sequential: bool = True
    not_applicable: list[str] = field(default_factory=list)
    """``expect:`` keys given that a real model's run is not judged by."""
    expectations: list[str] = field(default_factory=list)
    """The applicable keys checked, in order."""
    samples: list[Sample] = field(default_factory=list)
    regressions: list[Regression] = field(default_factory=list)
    """The regression scenarios written for its failing samples."""
    interrupted: bool = False
    """Whether sampling was stopped by the user (Ctrl-C) before it ended."""
    budget_stopped: bool = False
    """Whether ``--budget`` stopped sampling before the verdict was decided (the next
    sample's estimated cost would have passed it)."""
    discarded: list[int] = field(default_factory=list)
    """Samples that were in flight when the verdict was decided (``--concurrency``): not
    counted (the verdict is read from the samples in the order they started), their
    cassettes removed."""
    discarded_cost: float = 0.0
    """What the discarded samples cost (part of the spend)."""
    priced: bool = True
    """Whether the model had a price (False: tokens are reported without a cost)."""

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def passed(self) -> int:
        """Samples that passed."""
        return sum(s.passed for s in self.samples)

    @property
    def rate(self) -> float:
        return self.passed / self.n if self.n else 0.0

    @property
    def interval(self) -> Interval:
        """The Wilson interval of the pass rate at the eval's confidence."""
        return wilson(self.passed, self.n, self.confidence)

    @property
    def flaky(self) -> bool:
        """Whether some samples passed and some failed."""
        return 0 < self.passed < self.n

    @property
    def stopped_early(self) -> bool:
        """Whether the verdict was decided before the last sample."""
        return self.n < self.max_samples and not (self.interrupted or self.budget_stopped)

    def test(self) -> SequentialTest | None:
        if self.threshold is None:
            return None
        looks = None if self.sequential else 1
        return SequentialTest(self.threshold, self.confidence, self.max_samples, looks)

    @property
    def verdict(self) -> Verdict:
        """With a threshold, the sequential test's; without, ``pass`` when every sample
        passed."""
        test = self.test()
        if test is None:
            return "pass" if self.n and self.passed == self.n else "fail"
        return test.decide(self.passed, self.n)

    @property
    def ok(self) -> bool:
        """Whether the scenario clears the gate (an undecided verdict does not)."""
        return self.verdict == "pass"

    def usage(self) -> dict[str, int]:
        """Tokens over every sample."""
        total: dict[str, int] = {}
        for sample in self.samples:
            for key, value in sample.usage.items():
                total[key] = total.get(key, 0) + value
        return total

    def cost(self) -> float | None:
        """Dollars over every sample counted (None: the model has no price)."""
        if not self.priced:
            return None
        return sum(s.cost or 0.0 for s in self.samples)

    def spent(self) -> float | None:
        """Dollars spent: :meth:`cost` and the discarded samples'."""
        cost = self.cost()
        return None if cost is None else cost + self.discarded_cost

    @property
    def retries(self) -> int:
        """Model calls retried over every sample."""
        return sum(len(s.retries) for s in self.samples)

    def pass_at(self) -> dict[int, float]:
        return {k: pass_at_k(self.n, self.passed, k) for k in PASS_AT if k <= self.n}

    def rates(self) -> dict[str, tuple[int, int]]:
        """Each expectation's (held, samples)."""
        return {
            key: (sum(s.checks.get(key, False) for s in self.samples), self.n)
            for key in self.expectations
        }

    def to_json(self) -> dict[str, Any]:
        interval = self.interval
        test = self.test()
        bound = test.interval(self.passed, self.n) if test is not None and self.n else None
        return {
            "path": self.path,
            "title": self.title,
            "samples": self.n,
            "max_samples": self.max_samples,
            "passed": self.passed,
            "rate": self.rate,
            "interval": {"low": interval.low, "high": interval.high, "method": "wilson"},
            "confidence": self.confidence,
            "threshold": self.threshold,
            "verdict": self.verdict,
            "decision_interval": (
                None if bound is None else {"low": bound.low, "high": bound.high,
                                            "method": "clopper-pearson",
                                            "level": bound.confidence}
            ),
            "stopped_early": self.stopped_early,
            "interrupted": self.interrupted,
            "budget_stopped": self.budget_stopped,
            "discarded": list(self.discarded),
            "flaky": self.flaky,
            "pass_at_k": {str(k): v for k, v in self.pass_at().items()},
            "expectations": {k: {"passed": p, "samples": n} for k, (p, n) in self.rates().items()},
            "not_applicable": list(self.not_applicable),
            "usage": self.usage(),
            "cost_usd": self.cost(),
            "spent_usd": self.spent(),
            "retries": self.retries,
            "regressions": [r.to_json() for r in self.regressions],
            "sample_results": [s.to_json() for s in self.samples],
        }  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """A scenario's pass rate against the baseline's: Fisher's exact test on the two
    (passed, failed) counts."""

    path: str
    before: tuple[int, int]
    """The baseline's (passed, samples)."""
    after: tuple[int, int]
    p_value: float
    alpha: float

    @property
    def significant(self) -> bool:
        """Whether the rates differ beyond chance (p-value below ``alpha``)."""
        return self.p_value < self.alpha

    @property
    def direction(self) -> str:
        b, a = self.before, self.after
        before, after = b[0] / b[1] if b[1] else 0.0, a[0] / a[1] if a[1] else 0.0
        return "drop" if after < before else "rise" if after > before else "same"

    @property
    def dropped(self) -> bool:
        return self.significant and self.direction == "drop"

    def describe(self) -> str:
        (bp, bn), (ap, an) = self.before, self.after
        said = f"{self.direction} beyond chance" if self.significant else "no change beyond chance"
        return (
            f"{bp}/{bn} -> {ap}/{an}: {said} (Fisher's exact test, p = {self.p_value:.4f}, "
            f"alpha {self.alpha:g})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "before": {"passed": self.before[0], "samples": self.before[1]},
            "after": {"passed": self.after[0], "samples": self.after[1]},
            "p_value": self.p_value, "alpha": self.alpha, "significant": self.significant,
            "direction": self.direction,
        }  # fmt: skip


def compare(results: list[ScenarioResult], baseline: dict[str, Any], alpha: float) -> list[Change]:
    """Each scenario of ``results`` that the ``baseline`` (a ``--json`` file's contents)
    also holds, compared with it; scenarios matched by path."""
    before = {s["path"]: s for s in baseline.get("scenarios", [])}
    out = []
    for result in results:
        old = before.get(result.path)
        if old is None or not result.n:
            continue
        bp, bn = int(old["passed"]), int(old["samples"])
        p = fisher_exact(bp, bn - bp, result.passed, result.n - result.passed)
        out.append(
            Change(path=result.path, before=(bp, bn), after=(result.passed, result.n),
                   p_value=p, alpha=alpha)
        )  # fmt: skip
    return out
