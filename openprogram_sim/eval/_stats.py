"""The statistics of an eval, with the standard library only: intervals for a pass rate,
pass@k, the sequential verdict against a threshold, and the comparison with a baseline.

- :func:`wilson` and :func:`clopper_pearson`: confidence intervals for a binomial rate
  (Clopper-Pearson exact, by bisection on the binomial tail sums).
- :func:`pass_at_k`: the unbiased estimator 1 - C(n-c, k)/C(n, k).
- :class:`SequentialTest`: repeated Clopper-Pearson checks after every sample, each at
  level ``(1 - confidence) / max_samples`` (Bonferroni): whatever the true rate and
  whenever it stops, the verdict is wrong with probability at most ``1 - confidence``.
- :func:`fisher_exact`: the two-sided p-value of Fisher's exact test on a 2x2 table, for a
  pass rate against a baseline's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

__all__ = [
    "Interval",
    "SequentialTest",
    "Verdict",
    "binomial_cdf",
    "binomial_sf",
    "clopper_pearson",
    "fisher_exact",
    "pass_at_k",
    "wilson",
]

Verdict = Literal["pass", "fail", "undecided"]
"""Against a threshold P: ``pass`` when the interval's lower bound is above P, ``fail``
when its upper bound is below P, ``undecided`` while it holds P."""


@dataclass(frozen=True, slots=True)
class Interval:
    """A confidence interval for a pass rate."""

    low: float
    high: float
    confidence: float
    method: Literal["wilson", "clopper-pearson"]

    def __contains__(self, p: object) -> bool:
        return isinstance(p, int | float) and self.low <= p <= self.high

    def __str__(self) -> str:
        return f"[{self.low:.3f}, {self.high:.3f}]"


def _check(successes: int, n: int, confidence: float) -> None:
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"the number of samples must be an integer >= 0, got {n!r}")
    if not isinstance(successes, int) or not 0 <= successes <= n:
        raise ValueError(f"successes must be an integer in 0..{n}, got {successes!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence!r}")


def wilson(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """The Wilson score interval of ``successes`` in ``n`` (``[0, 1]`` for no samples)::

    >>> str(wilson(8, 10))
    '[0.490, 0.943]'
    """
    _check(successes, n, confidence)
    if n == 0:
        return Interval(0.0, 1.0, confidence, "wilson")
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(low, high, confidence, "wilson")


def _log_pmf(i: int, n: int, p: float) -> float:
    log_comb = math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
    return log_comb + i * math.log(p) + (n - i) * math.log1p(-p)


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X ≤ k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    return min(1.0, math.fsum(math.exp(_log_pmf(i, n, p)) for i in range(k + 1)))


def binomial_sf(k: int, n: int, p: float) -> float:
    """P(X ≥ k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    return min(1.0, math.fsum(math.exp(_log_pmf(i, n, p)) for i in range(k, n + 1)))


def _bisect(predicate_low: bool, tail: float, k: int, n: int) -> float:
    """The p where the tail sum equals ``tail``: for the lower bound P(X ≥ k | p) rises
    with p; for the upper bound P(X ≤ k | p) falls with p."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        value = binomial_sf(k, n, mid) if predicate_low else binomial_cdf(k, n, mid)
        too_far = value > tail if predicate_low else value < tail
        if too_far:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2


def clopper_pearson(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """The exact (Clopper-Pearson) interval of ``successes`` in ``n``: the rates p for which
    neither binomial tail of the observed count is below ``(1 - confidence) / 2``. It covers
    the true rate with probability at least ``confidence`` for every n and p::

    >>> str(clopper_pearson(8, 10))
    '[0.444, 0.975]'
    """
    _check(successes, n, confidence)
    tail = (1 - confidence) / 2
    low = 0.0 if successes == 0 else _bisect(True, tail, successes, n)
    high = 1.0 if successes == n else _bisect(False, tail, successes, n)
    return Interval(low, high, confidence, "clopper-pearson")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k, the chance that at least one of k samples passes,
    from ``c`` passing samples in ``n``: 1 - C(n-c, k)/C(n, k) (Chen et al., 2021)."""
    _check(c, n, 0.5)
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n (n = {n} samples), got k = {k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass(frozen=True, slots=True)
class SequentialTest:
    """The verdict on a pass rate against ``threshold``, checked after every sample.

    After each of up to ``max_samples`` samples, the Clopper-Pearson interval at level
    ``1 - alpha_per_look`` (``alpha_per_look = (1 - confidence) / max_samples``, a
    Bonferroni split) is compared with the threshold: ``pass`` when its lower bound is above
    it, ``fail`` when its upper bound is below it. Each look's interval misses the true rate
    with probability at most ``alpha_per_look``, so the chance that any look misses it, and
    so that the verdict where sampling stopped is wrong, is at most ``1 - confidence``,
    whatever the true rate. It is conservative: near the threshold it stays undecided.
    ``looks=1`` checks once, after the last sample (no early stop, no split).
    """

    threshold: float
    confidence: float = 0.95
    max_samples: int = 100
    looks: int | None = None
    """How many checks the error is split over (default: ``max_samples``, one per sample)."""

    def __post_init__(self) -> None:
        if not 0 <= self.threshold <= 1:
            raise ValueError(f"the threshold is a pass rate in [0, 1], got {self.threshold!r}")
        _check(0, self.max_samples, self.confidence)
        if self.max_samples < 1:
            raise ValueError(f"max_samples must be >= 1, got {self.max_samples}")

    @property
    def alpha_per_look(self) -> float:
        return (1 - self.confidence) / (self.looks or self.max_samples)

    def interval(self, successes: int, n: int) -> Interval:
        """The interval this test decides on (at level ``1 - alpha_per_look``)."""
        return clopper_pearson(successes, n, 1 - self.alpha_per_look)

    def decide(self, successes: int, n: int) -> Verdict:
        """The verdict after ``n`` samples, ``successes`` of them passing. The bounds are
        compared through the tails at the threshold (the same answer as computing them)."""
        _check(successes, n, self.confidence)
        if n == 0 or (self.looks == 1 and n < self.max_samples):
            return "undecided"
        tail = self.alpha_per_look / 2
        p = self.threshold
        # lower bound > P  <=>  P(X >= k | P) < tail;  upper bound < P  <=>  P(X <= k | P) < tail
        if successes > 0 and p < 1 and binomial_sf(successes, n, p) < tail:
            return "pass"
        if successes < n and p > 0 and binomial_cdf(successes, n, p) < tail:
            return "fail"
        return "undecided"


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """The two-sided p-value of Fisher's exact test on ``[[a, b], [c, d]]`` (rows: the two
    runs; columns: passed, failed): the chance, with the margins fixed and the two rates
    equal, of a table no likelier than this one::

    >>> round(fisher_exact(8, 2, 1, 5), 4)
    0.035
    """
    for value in (a, b, c, d):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"a 2x2 table holds counts >= 0, got {(a, b, c, d)!r}")
    row1, col1, total = a + b, a + c, a + b + c + d
    low, high = max(0, col1 - (total - row1)), min(row1, col1)

    def log_p(x: int) -> float:
        return _log_comb(row1, x) + _log_comb(total - row1, col1 - x) - _log_comb(total, col1)

    observed = log_p(a)
    probabilities = (math.exp(log_p(x)) for x in range(low, high + 1))
    cut = math.exp(observed) * (1 + 1e-7)
    return min(1.0, math.fsum(q for q in probabilities if q <= cut))


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
