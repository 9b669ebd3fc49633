"""Live-model evals: scenarios run against a real model, N samples each, judged by the
expectations that apply to a real model, with pass rates, intervals and a sequential
verdict (``openprogram-sim eval``; see docs/evals.md).

- :func:`evaluate`: one scenario sampled under :class:`EvalOptions`, each
  :class:`Sample` recorded as a cassette and judged (:func:`judge`), into a
  :class:`ScenarioResult`; :func:`compare` holds results against a baseline's;
  :func:`write_regressions` distills each distinct failure into a scenario.
- :func:`wilson`, :func:`clopper_pearson`: confidence intervals for a pass rate.
- :func:`pass_at_k`: the unbiased pass@k estimate.
- :class:`SequentialTest`: the verdict against a threshold, checked after every sample.
- :func:`fisher_exact`: a pass rate against a baseline's.
"""

from openprogram_sim.eval._judge import APPLICABLE, NOT_APPLICABLE, Judgement, judge
from openprogram_sim.eval._options import EvalOptions, scenario_slug
from openprogram_sim.eval._regressions import trajectory_key, write_regressions
from openprogram_sim.eval._sample import EvalSetupError
from openprogram_sim.eval._sampling import evaluate
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
from openprogram_sim.eval._summary import (
    JSON_VERSION,
    Change,
    Regression,
    Sample,
    ScenarioResult,
    compare,
)

__all__ = [
    "APPLICABLE",
    "JSON_VERSION",
    "NOT_APPLICABLE",
    "Change",
    "EvalOptions",
    "EvalSetupError",
    "Interval",
    "Judgement",
    "Regression",
    "Sample",
    "ScenarioResult",
    "SequentialTest",
    "Verdict",
    "binomial_cdf",
    "binomial_sf",
    "clopper_pearson",
    "compare",
    "evaluate",
    "fisher_exact",
    "judge",
    "pass_at_k",
    "scenario_slug",
    "trajectory_key",
    "wilson",
    "write_regressions",
]
