"""The eval view of the HTML report: one self-contained page with, per scenario, its pass
rate, interval, verdict (and how the sequential test reached it), flakiness, pass@k, each
expectation's rate and the tokens (and cost, when the results carry it); then its samples,
failures first, each with its failures, its cassette's path and its timeline.

A :class:`~openprogram_sim.eval.Sample` keeps its cassette, not its trace: each sample's
timeline is the trace of its cassette replayed offline through the same adapter (no socket,
no key; its tools run again, as a distilled regression's do). A replay whose calls differ
from the sample's (a tool whose result changed) says so above its timeline.

The page has the report's look and its script (:mod:`openprogram_sim.report` draws each
timeline when its row is first opened); every text from a run goes in escaped (the
template) or through ``textContent`` (the script).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from openprogram_sim.cassettes._atomic import atomic_write
from openprogram_sim.errors import SimError
from openprogram_sim.eval._junit import decision, ending
from openprogram_sim.eval._summary import Sample, ScenarioResult, sample_calls
from openprogram_sim.play import run_scenario
from openprogram_sim.report import embed_json, outcome_runs
from openprogram_sim.scenario import CassetteModel, Scenario, load_scenario

__all__ = ["eval_records", "render_eval_report", "sample_runs", "write_eval_report"]

_VERDICTS = ("pass", "fail", "undecided")


def _asset(package: str, name: str) -> str:
    return resources.files(package).joinpath("templates", name).read_text(encoding="utf-8")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("openprogram_sim.eval", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["json"] = embed_json
    env.filters["rate"] = lambda v: f"{float(v):.3f}"
    env.filters["percent"] = lambda v: f"{float(v) * 100:.1f}%"
    return env


# --------------------------------------------------------------------------- timelines


def _replay_scenario(scenario: Scenario, cassette: str) -> Scenario:
    """``scenario`` with its model the sample's cassette (an absolute path, so the file's
    folder does not matter)."""
    model = CassetteModel(cassette=str(Path(cassette).resolve()))
    return scenario.model_copy(update={"model": model})


def sample_runs(scenario: Scenario, sample: Sample) -> tuple[list[dict[str, Any]], str | None]:
    """The report runs of ``sample`` (its trace and timeline; a conversation's execs each a
    run), from its cassette replayed through ``scenario``; and a note when the replay is
    not the sample (the cassette is gone, or the calls differ), else None."""
    if not Path(sample.cassette).is_file():
        return [], f"no timeline: the cassette {sample.cassette} is not there any more"
    try:
        outcome = run_scenario(_replay_scenario(scenario, sample.cassette))
    except SimError as exc:
        return [], f"no timeline: replaying {sample.cassette} failed ({exc})"
    runs = outcome_runs(outcome)
    made = sample_calls(outcome.trace)
    if _plain(made) != _plain(sample.calls):
        made_by = ", ".join(_call_text(c) for c in sample.calls) or "no tool calls"
        return runs, (
            "this timeline is the cassette replayed, and its tool calls differ from the "
            f"sample's (a tool whose result changed since?): the sample made {made_by}"
        )
    if outcome.error_text != sample.error:
        return runs, (
            "this timeline is the cassette replayed, and it ended otherwise than the sample "
            f"(a tool whose result changed since?): the replay raised {outcome.error_text}"
            if outcome.error_text is not None
            else f"this timeline is the cassette replayed, which did not raise {sample.error}"
        )
    return runs, None


def _plain(calls: Sequence[Mapping[str, Any]]) -> list[Any]:
    return [json.loads(json.dumps(c, sort_keys=True, default=str)) for c in calls]


def _call_text(call: Mapping[str, Any]) -> str:
    args = call.get("args")
    if isinstance(args, Mapping):
        inner = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}"
                          for k, v in args.items())  # fmt: skip
    else:
        inner = "" if args is None else json.dumps(args, ensure_ascii=False, default=str)
    return f"{call.get('name')}({inner})"


# --------------------------------------------------------------------------- records


def _sample_record(
    result: ScenarioResult, sample: Sample, scenario: Scenario | None
) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    note: str | None = f"no timeline: the scenario {result.path} could not be loaded"
    if scenario is not None:
        runs, note = sample_runs(scenario, sample)
    props: dict[str, Any] = {"model_calls": sample.model_calls, "tool_calls": len(sample.calls)}
    props.update({f"tokens_{k}": v for k, v in sample.usage.items() if v})
    if sample.cost is not None:
        props["cost_usd"] = f"{sample.cost:.6f}"
    if sample.retries:
        props["retries"] = len(sample.retries)
    failed = [k for k, held in sample.checks.items() if not held]
    return {
        "id": f"{result.path} sample {sample.index}",
        "kind": "sample",
        "index": sample.index,
        "status": "passed" if sample.passed else "failed",
        "failed": failed,
        "checks": dict(sample.checks),
        "failure": "\n\n".join(sample.failures),
        "cassette": sample.cassette,
        "calls": [_call_text(c) for c in sample.calls],
        "error": sample.error,
        "note": note,
        "description": "",
        "props": props,
        "result": None,
        "runs": runs,
    }


def _scenario_view(result: ScenarioResult, scenario: Scenario | None) -> dict[str, Any]:
    interval = result.interval
    ordered = sorted(result.samples, key=lambda s: (s.passed, s.index))  # failures first
    samples = [_sample_record(result, s, scenario) for s in ordered]
    rates = [
        {"key": k, "passed": p, "n": n, "rate": p / n if n else 0.0}
        for k, (p, n) in result.rates().items()
    ]
    return {
        "path": result.path,
        "title": result.title,
        "verdict": result.verdict,
        "ok": result.ok,
        "passed": result.passed,
        "n": result.n,
        "max_samples": result.max_samples,
        "rate": result.rate,
        "interval": {"low": interval.low, "high": interval.high},
        "confidence": result.confidence,
        "threshold": result.threshold,
        "decision": decision(result),
        "stopping": ending(result),
        "stopped_early": result.stopped_early,
        "interrupted": result.interrupted,
        "budget_stopped": result.budget_stopped,
        "flaky": result.flaky,
        "pass_at_k": [{"k": k, "value": v} for k, v in result.pass_at().items()],
        "expectations": rates,
        "not_applicable": list(result.not_applicable),
        "usage": {k: v for k, v in result.usage().items() if v},
        "cost": result.cost(),
        "spent": result.spent(),
        "retries": result.retries,
        "regressions": [r.to_json() for r in result.regressions],
        "samples": samples,
    }


def _load(result: ScenarioResult, pythonpath: Sequence[str | Path]) -> Scenario | None:
    try:
        return load_scenario(result.path, pythonpath=pythonpath)
    except (SimError, OSError):
        return None


def eval_records(
    results: Iterable[ScenarioResult],
    *,
    scenarios: Mapping[str, Scenario] | None = None,
    pythonpath: Sequence[str | Path] = (),
) -> list[dict[str, Any]]:
    """Each result as the page shows it (plain, JSON-safe dicts, which travel from a
    pytest-xdist worker as they are): the scenario's figures and its samples' records,
    failures first, each with its timeline replayed from its cassette through its scenario
    (``scenarios[result.path]``, else the file at ``result.path`` loaded)."""
    views = []
    for result in results:
        scenario = (scenarios or {}).get(result.path)
        if scenario is None:
            scenario = _load(result, pythonpath)
        views.append(_scenario_view(result, scenario))
    return views


def _numbered(
    results: Iterable[ScenarioResult | Mapping[str, Any]],
    scenarios: Mapping[str, Scenario] | None,
    pythonpath: Sequence[str | Path],
) -> list[dict[str, Any]]:
    """The views of ``results`` (a result, or its :func:`eval_records` view as it came),
    each sample given its row on the page."""
    views: list[dict[str, Any]] = []
    for item in results:
        if isinstance(item, ScenarioResult):
            views += eval_records([item], scenarios=scenarios, pythonpath=pythonpath)
        else:
            views.append(dict(item))
    row = 0
    for view in views:
        samples = []
        for sample in view["samples"]:
            samples.append({**sample, "row": row})
            row += 1
        view["samples"] = samples
    return views


# --------------------------------------------------------------------------- page


_DETAIL_KEYS = ("id", "kind", "description", "props", "result", "error", "runs")
"""What the report's script reads to draw a sample's body when it is opened."""


def _totals(views: list[dict[str, Any]]) -> dict[str, Any]:
    usage: dict[str, int] = {}
    for view in views:
        for key, value in view["usage"].items():
            usage[key] = usage.get(key, 0) + value
    costs = [v["cost"] for v in views if v["cost"] is not None]
    samples = [s for v in views for s in v["samples"]]
    return {
        "scenarios": len(views),
        "counts": {verdict: sum(v["verdict"] == verdict for v in views) for verdict in _VERDICTS},
        "samples": len(samples),
        "failed_samples": sum(s["status"] == "failed" for s in samples),
        "usage": usage,
        "cost": sum(costs) if costs else None,
    }


def render_eval_report(
    results: Iterable[ScenarioResult | Mapping[str, Any]],
    *,
    title: str = "openprogram eval",
    model: str = "",
    source: str = "",
    scenarios: Mapping[str, Scenario] | None = None,
    pythonpath: Sequence[str | Path] = (),
) -> str:
    """The eval view's HTML page for ``results``: each a :class:`ScenarioResult`, or its
    view from :func:`eval_records` (as a pytest-xdist worker sends it)."""
    views = _numbered(results, scenarios, pythonpath)
    samples = [s for v in views for s in v["samples"]]
    template = _environment().get_template("eval.html.j2")
    return template.render(
        title=title,
        model=model,
        source=source,
        generated=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        totals=_totals(views),
        scenarios=views,
        details=[{k: s.get(k) for k in _DETAIL_KEYS} for s in samples],
        css=Markup(_asset("openprogram_sim.report", "report.css")),
        eval_css=Markup(_asset("openprogram_sim.eval", "eval.css")),
        js=Markup(_asset("openprogram_sim.report", "report.js")),
    )


def write_eval_report(
    results: Iterable[ScenarioResult | Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    title: str = "openprogram eval",
    model: str = "",
    source: str = "",
    scenarios: Mapping[str, Scenario] | None = None,
    pythonpath: Sequence[str | Path] = (),
) -> Path:
    """Write the eval view of ``results`` (each a :class:`ScenarioResult`, or its view from
    :func:`eval_records`) to ``path`` as one self-contained HTML file,
    atomically (a temporary file beside it, then ``os.replace``). ``model`` is shown in
    the header (``PROVIDER:MODEL``); ``scenarios`` maps a result's ``path`` to its loaded
    scenario, which replays each sample's cassette for its timeline (a result not in it is
    loaded from its file, with ``pythonpath``)::

        results = [evaluate(scenario, options)]
        write_eval_report(results, "reports/eval.html", model=options.model,
                          scenarios={scenario.path: scenario})
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = render_eval_report(
        results, title=title, model=model, source=source, scenarios=scenarios,
        pythonpath=pythonpath,
    )  # fmt: skip
    atomic_write(target, text, mode=0o644)
    return target
