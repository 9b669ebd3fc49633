"""The pytest form of ``openprogram-sim eval``: with ``--openprogram-eval PROVIDER:MODEL``
each scenario item samples its scenario against the real model (up to
``--openprogram-samples``), each sample recorded as a cassette under
``--openprogram-eval-out``, and passes on the sequential test's verdict; its JUnit
properties carry the rates, a failing one shows the summary and the regressions written,
and ``--openprogram-report`` gets the eval view. Only pytest and the standard library are
imported at start-up; the eval is imported when the option is given.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from openprogram_sim.plugin._items import ScenarioItem, display_path, relpath

if TYPE_CHECKING:
    from openprogram_sim.eval import EvalOptions, ScenarioResult

__all__ = [
    "EVAL_ATTR",
    "EVAL_OPTIONS",
    "EvalFailed",
    "EvalItem",
    "EvalNotRun",
    "eval_options",
    "eval_record",
    "headline",
]

EVAL_ATTR = "openprogram_eval"
"""The attribute of a pytest ``TestReport`` carrying an eval item's one-line summary (to
the xdist controller, which prints them at the end)."""

_REFINES = (
    ("openprogram_samples", "--openprogram-samples"),
    ("openprogram_threshold", "--openprogram-threshold"),
    ("openprogram_confidence", "--openprogram-confidence"),
    ("openprogram_base_url", "--openprogram-base-url"),
    ("openprogram_no_early_stop", "--openprogram-no-early-stop"),
    ("openprogram_eval_out", "--openprogram-eval-out"),
    ("openprogram_eval_timeout", "--openprogram-eval-timeout"),
    ("openprogram_concurrency", "--openprogram-concurrency"),
    ("openprogram_max_retries", "--openprogram-max-retries"),
    ("openprogram_budget", "--openprogram-budget"),
    ("openprogram_pricing", "--openprogram-pricing"),
)
"""The options that only mean something with ``--openprogram-eval``."""

EVAL_OPTIONS = pytest.StashKey["EvalOptions"]()
"""Where the config keeps the checked eval options."""

_FLAGS = {
    "--model": "--openprogram-eval",
    "--samples": "--openprogram-samples",
    "--threshold": "--openprogram-threshold",
    "--confidence": "--openprogram-confidence",
    "--timeout": "--openprogram-eval-timeout",
    "--concurrency": "--openprogram-concurrency",
    "--max-retries": "--openprogram-max-retries",
    "--budget": "--openprogram-budget",
    "--pricing": "--openprogram-pricing",
}
"""The CLI's flags that :class:`~openprogram_sim.eval.EvalOptions` names, as the plugin's."""


def eval_options(config: pytest.Config) -> EvalOptions | None:
    """The checked options of ``--openprogram-eval`` (None without it); a bad value, or a
    refining option without it, is a usage error naming the option and the fix."""
    model = config.getoption("openprogram_eval", None)
    if model is None:
        stray = [flag for dest, flag in _REFINES if config.getoption(dest, None)]
        if stray:
            raise pytest.UsageError(
                f"{', '.join(stray)}: only used with --openprogram-eval PROVIDER:MODEL "
                "(e.g. --openprogram-eval openai:gpt-4o-mini)"
            )
        return None
    from openprogram_sim.eval import EvalOptions, RetryPolicy, load_pricing

    def given(dest: str, default: Any) -> Any:
        value = config.getoption(dest, None)
        return default if value is None else value

    out = Path(given("openprogram_eval_out", "reports/eval"))
    base = config.invocation_params.dir
    if not out.is_absolute() and Path.cwd() != base:  # shown as given when it can be
        out = base / out
    try:
        options = EvalOptions(
            model=model,
            samples=given("openprogram_samples", 10),
            base_url=config.getoption("openprogram_base_url", None),
            threshold=config.getoption("openprogram_threshold", None),
            confidence=given("openprogram_confidence", 0.95),
            sequential=not config.getoption("openprogram_no_early_stop", False),
            out=out,
            timeout=given("openprogram_eval_timeout", 120.0),
            concurrency=given("openprogram_concurrency", 1),
            retries=RetryPolicy(max_retries=given("openprogram_max_retries", 4)),
            budget=config.getoption("openprogram_budget", None),
            pricing=load_pricing(config.getoption("openprogram_pricing", None) or (), start=base),
        )
    except ValueError as exc:
        raise pytest.UsageError(plugin_flags(str(exc))) from None
    if options.budget is not None and options.prices().price(model) is None:
        raise pytest.UsageError(
            f"--openprogram-budget {options.budget:g}: the pricing table has no price for "
            f"{model}, so no cost can be counted against it; give one with "
            "--openprogram-pricing FILE or [tool.openprogram.pricing] in pyproject.toml"
        )
    return options


def plugin_flags(text: str) -> str:
    """A message of the eval's, which names the CLI's flags, naming the plugin's."""
    for cli, flag in _FLAGS.items():
        text = re.sub(rf"(?<![\w-]){re.escape(cli)}\b", flag, text)
    return text


class EvalFailed(AssertionError):
    """A scenario's eval did not clear its gate (a failed or undecided verdict)."""

    def __init__(self, result: ScenarioResult) -> None:
        super().__init__(f"eval verdict {result.verdict}: {result.passed}/{result.n} passed")
        self.result = result


class EvalNotRun(Exception):
    """The eval cannot run as set up (every request refused, no request got through, or
    the scenario cannot be sampled): the message says why and what to check."""


class EvalItem(ScenarioItem):
    """A scenario item run as an eval against a real model: sampled, judged, and passed on
    the sequential test's verdict."""

    result: ScenarioResult | None = None

    def runtest(self) -> None:
        from openprogram.errors import OpenProgramError
        from openprogram_sim.errors import CassetteError, ScenarioError
        from openprogram_sim.eval import EvalSetupError, eval_properties, evaluate

        scenario = self.scenario
        assert scenario is not None, "a scenario item runs once"
        options = self.config.stash[EVAL_OPTIONS]
        if scenario.fixtures:
            raise EvalNotRun(
                f"{scenario.where('fixtures')}: a scenario that names pytest fixtures "
                "(fixtures:) cannot be sampled: an eval runs each sample outside pytest's "
                "fixtures; run it without --openprogram-eval, or give its tools without them"
            )
        try:
            self.result = result = evaluate(scenario, options)
        except (EvalSetupError, ScenarioError, CassetteError, OpenProgramError) as exc:
            raise EvalNotRun(str(exc)) from None

        self.user_properties += eval_properties(result)
        if not result.ok:
            raise EvalFailed(result)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | Any:
        path = relpath(self.config, self.path)
        model = self.config.stash[EVAL_OPTIONS].model
        if isinstance(excinfo.value, EvalNotRun):
            return f"eval could not run: {self.title}\n  file: {path}\n  model: {model}\n\n" + str(
                excinfo.value
            )
        if isinstance(excinfo.value, EvalFailed):
            from openprogram_sim.eval import eval_summary

            head = f"eval failed: {self.title}\n  file: {path}\n  model: {model}"
            return f"{head}\n\n{eval_summary(excinfo.value.result)}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, 0, f"eval: {self.title}"


def headline(item: EvalItem) -> str | None:
    """The item's one-line summary (verdict, rate, interval, samples), after it ran."""
    result = item.result
    if result is None:
        return None
    interval = result.interval
    early = ", stopped early" if result.stopped_early else ""
    flaky = ", flaky" if result.flaky else ""
    return (
        f"{result.verdict.upper():9} {display_path(item.config, item.path)}  "
        f"{result.passed}/{result.n} passed (rate {result.rate:.3f}, "
        f"{result.confidence:.0%} interval {interval}{flaky}{early})"
    )


def eval_record(item: EvalItem, report: pytest.TestReport) -> dict[str, Any] | None:
    """The report record of an eval item: its :func:`~openprogram_sim.eval.eval_records`
    view (JSON-safe, so it travels from an xdist worker), with its node id."""
    if report.when != "call" or item.result is None:
        return None
    from openprogram_sim.eval import eval_records

    scenarios = {item.result.path: item.scenario} if item.scenario is not None else None
    (view,) = eval_records([item.result], scenarios=scenarios)
    view["id"] = item.nodeid
    view["kind"] = "eval"
    return view
