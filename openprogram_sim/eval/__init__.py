"""Live-model evals: scenarios run against a real model, N samples each, judged by the
expectations that apply to a real model, with pass rates, intervals and a sequential
verdict (``openprogram-sim eval``; see docs/evals.md).

- :func:`wilson`, :func:`clopper_pearson`: confidence intervals for a pass rate.
- :func:`pass_at_k`: the unbiased pass@k estimate.
- :class:`SequentialTest`: the verdict against a threshold, checked after every sample.
- :func:`fisher_exact`: a pass rate against a baseline's.
"""

from openprogram_sim.eval._stats import (
    Interval,
    SequentialTest,
    Verdict,
    binomial_cdf,
    binomial_sf,
    clopper_pearson,
    fisher_exact,
    pass_at_k,
    wilson,
)

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
