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
- :func:`write_eval_report`: the HTML report's eval view (each sample's timeline replayed
  from its cassette); :func:`write_eval_junit`: JUnit XML, the rates as properties
  (:func:`eval_properties`), a failure's text from :func:`eval_summary`.
"""

from openprogram_sim.eval._judge import APPLICABLE, NOT_APPLICABLE, Judgement, judge
from openprogram_sim.eval._junit import decision, eval_properties, eval_summary, write_eval_junit
from openprogram_sim.eval._options import EvalOptions, pyproject_limits, scenario_slug
from openprogram_sim.eval._pricing import Price, PriceTable, load_pricing
from openprogram_sim.eval._progress import ProgressBar
from openprogram_sim.eval._regressions import trajectory_key, write_regressions
from openprogram_sim.eval._report import eval_records, render_eval_report, write_eval_report
from openprogram_sim.eval._retries import RetryingTransport, RetryPolicy
from openprogram_sim.eval._sample import EvalSetupError, replay_sample
from openprogram_sim.eval._sampling import evaluate
from openprogram_sim.eval._scheduling import Budget, EvalRun, Tally, evaluate_all
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
from openprogram_sim.eval._verdict import ask_recorded

__all__ = [
    "APPLICABLE",
    "JSON_VERSION",
    "NOT_APPLICABLE",
    "Budget",
    "Change",
    "EvalOptions",
    "EvalRun",
    "EvalSetupError",
    "Interval",
    "Judgement",
    "Price",
    "PriceTable",
    "ProgressBar",
    "Regression",
    "RetryPolicy",
    "RetryingTransport",
    "Sample",
    "ScenarioResult",
    "SequentialTest",
    "Tally",
    "Verdict",
    "ask_recorded",
    "binomial_cdf",
    "binomial_sf",
    "clopper_pearson",
    "compare",
    "decision",
    "eval_properties",
    "eval_records",
    "eval_summary",
    "evaluate",
    "evaluate_all",
    "fisher_exact",
    "judge",
    "load_pricing",
    "pass_at_k",
    "pyproject_limits",
    "render_eval_report",
    "replay_sample",
    "scenario_slug",
    "trajectory_key",
    "wilson",
    "write_eval_junit",
    "write_eval_report",
    "write_regressions",
]

for _value in [globals()[_n] for _n in __all__]:
    if isinstance(_value, type) and _value.__module__.startswith(f"{__name__}._"):
        _value.__module__ = __name__  # the public module users see in reprs
del _value
