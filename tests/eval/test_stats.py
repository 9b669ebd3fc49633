"""The eval's statistics against hand-computed and published values, and seeded
simulations of what they guarantee (coverage, the sequential verdict's error rate)."""

from __future__ import annotations

import math
import random

import pytest

from openprogram_sim.eval import (
    SequentialTest,
    binomial_cdf,
    binomial_sf,
    clopper_pearson,
    fisher_exact,
    pass_at_k,
    wilson,
)


def test_wilson_for_8_of_10_at_95_percent() -> None:
    # p = 0.8, z = 1.959964: centre (0.8 + z²/20)/(1 + z²/10) = 0.71675, half 0.22657
    interval = wilson(8, 10)
    assert (round(interval.low, 4), round(interval.high, 4)) == (0.4902, 0.9433)
    assert str(interval) == "[0.490, 0.943]"
    assert (wilson(0, 10).low, wilson(10, 10).high) == (0.0, 1.0)
    assert (wilson(0, 0).low, wilson(0, 0).high) == (0.0, 1.0)


def test_clopper_pearson_for_8_of_10_and_the_ends() -> None:
    interval = clopper_pearson(8, 10)
    assert (round(interval.low, 4), round(interval.high, 4)) == (0.4439, 0.9748)
    # at the ends the bounds have a closed form: 1 - (alpha/2)^(1/n) and (alpha/2)^(1/n)
    assert clopper_pearson(0, 10).high == pytest.approx(1 - 0.025**0.1, abs=1e-9)
    assert clopper_pearson(10, 10).low == pytest.approx(0.025**0.1, abs=1e-9)
    # the bounds are where the tails equal alpha/2
    assert binomial_sf(8, 10, interval.low) == pytest.approx(0.025, abs=1e-9)
    assert binomial_cdf(8, 10, interval.high) == pytest.approx(0.025, abs=1e-9)


def test_fisher_exact_two_sided() -> None:
    # [[8, 2], [1, 5]], margins 10/6 and 9/7: tables with x = 8, 9 (and 2, 3) are no likelier
    # than the observed; their hypergeometric sum is 560/16016 = 0.0350
    assert round(fisher_exact(8, 2, 1, 5), 4) == 0.0350
    assert fisher_exact(8, 2, 1, 5) == pytest.approx(560 / 16016, abs=1e-12)
    # the lady tasting tea table R's fisher.test documents: p = 0.4857
    assert round(fisher_exact(3, 1, 1, 3), 4) == 0.4857
    assert fisher_exact(5, 5, 5, 5) == pytest.approx(1.0)


def test_pass_at_k() -> None:
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - 21 / 45)
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 6, 5) == 1.0  # fewer than k failures: some sample of k passes
    with pytest.raises(
        ValueError, match=r"pass@k needs 1 <= k <= n \(n = 10 samples\), got k = 11"
    ):
        pass_at_k(10, 3, 11)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: wilson(11, 10), "successes must be an integer in 0..10, got 11"),
        (lambda: wilson(1, 10, 1.5), "confidence must be between 0 and 1 (e.g. 0.95), got 1.5"),
        (lambda: SequentialTest(1.2), "the threshold is a pass rate in [0, 1], got 1.2"),
        (lambda: fisher_exact(1, -1, 0, 0), "a 2x2 table holds counts >= 0"),
    ],
)
def test_bad_input_names_the_value(call: object, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        call()  # type: ignore[operator]
    assert message in str(caught.value)


def coverage(method: object, p: float, n: int, runs: int, seed: int) -> float:
    rng = random.Random(seed)
    covers = {k: p in method(k, n) for k in range(n + 1)}  # type: ignore[operator]
    hits = sum(covers[sum(rng.random() < p for _ in range(n))] for _ in range(runs))
    return hits / runs


def test_the_intervals_cover_the_true_rate_at_about_their_level() -> None:
    """Seeded: 2000 experiments of 40 samples at p = 0.3 and at p = 0.85. Clopper-Pearson
    covers at least 95% (it is exact); Wilson about 95%, a little below or above."""
    for p, seed in ((0.3, 1), (0.85, 2)):
        cp = coverage(clopper_pearson, p, 40, 2000, seed)
        w = coverage(wilson, p, 40, 2000, seed)
        assert cp >= 0.95, (p, cp)
        assert 0.93 <= w <= 0.975, (p, w)
    # fixed by the seed: the same experiments, two intervals
    assert (coverage(clopper_pearson, 0.3, 40, 2000, 1), coverage(wilson, 0.3, 40, 2000, 1)) == (
        0.952,
        0.9365,
    )


def sequential(test: SequentialTest, p: float, rng: random.Random) -> tuple[str, int]:
    passed = 0
    for n in range(1, test.max_samples + 1):
        passed += rng.random() < p
        verdict = test.decide(passed, n)
        if verdict != "undecided":
            return verdict, n
    return "undecided", test.max_samples


@pytest.mark.slow
def test_the_sequential_verdict_is_rarely_wrong_and_stops_early_when_clear() -> None:
    """At the threshold itself (p = P) any verdict is wrong; over 400 seeded evals of up to
    100 samples, at most 5% may reach one. Far from it the verdict comes early: at p = 0.97
    within 60 samples (24 at the soonest, all passing), at p = 0.3 within 42."""
    test = SequentialTest(threshold=0.7, confidence=0.95, max_samples=100)
    rng = random.Random(3)
    wrong = [sequential(test, 0.7, rng)[0] != "undecided" for _ in range(400)]
    assert sum(wrong) == 1  # fixed by the seed; the guarantee is <= 20 of 400
    high = [sequential(test, 0.97, rng) for _ in range(100)]
    low = [sequential(test, 0.3, rng) for _ in range(100)]
    assert all(v == "pass" for v, _ in high) and max(n for _, n in high) == 60
    assert all(v == "fail" for v, _ in low) and max(n for _, n in low) == 42


def test_the_sequential_bounds_are_clopper_pearson_at_the_split_level() -> None:
    test = SequentialTest(threshold=0.9, confidence=0.95, max_samples=50)
    assert test.alpha_per_look == pytest.approx(0.001)
    for k, n in ((3, 10), (12, 20), (20, 20), (45, 50)):
        bound = test.interval(k, n)
        verdict = "pass" if bound.low > 0.9 else "fail" if bound.high < 0.9 else "undecided"
        assert test.decide(k, n) == verdict, (k, n, bound)
    assert test.decide(3, 10) == "fail"  # upper bound of 3/10 at 99.9%: 0.79
    assert test.decide(20, 20) == "undecided"  # lower bound 0.708: not above 0.9 yet
    once = SequentialTest(threshold=0.9, confidence=0.95, max_samples=50, looks=1)
    assert once.decide(3, 10) == "undecided"  # one look, after the last sample
    assert once.decide(30, 50) == "fail"
    assert math.isclose(once.alpha_per_look, 0.05)


def test_the_public_names_of_eval() -> None:
    import openprogram_sim.eval as face

    public = {n for n in vars(face) if not n.startswith("_")} - {"annotations"}
    assert set(face.__all__) <= public
    assert {n for n in public if not isinstance(getattr(face, n), type(face))} == set(face.__all__)
