"""An eval's results as JUnit XML: one test case per scenario, its rates as ``<property>``
pairs (:func:`eval_properties`, which the pytest plugin's eval items carry too), and a
``<failure>`` with the summary and the samples' reasons (:func:`eval_summary`) when the
scenario does not clear its gate (a failed or undecided verdict)."""

from __future__ import annotations

import datetime as _dt
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

from openprogram_sim.cassettes._atomic import atomic_write
from openprogram_sim.eval._summary import ScenarioResult

__all__ = ["decision", "ending", "eval_properties", "eval_summary", "write_eval_junit"]

_PREFIX = "openprogram.eval."
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
"""Characters XML 1.0 cannot hold, even escaped (a model's text may carry them)."""
_SHOWN_FAILURES = 5
"""Distinct failure reasons a summary lists (the rest counted)."""


def _number(value: float) -> str:
    return repr(round(float(value), 6))


def eval_properties(result: ScenarioResult) -> list[tuple[str, str]]:
    """``result``'s figures as JUnit ``<property>`` pairs::

        openprogram.eval.pass_rate              0.725
        openprogram.eval.passed                 29
        openprogram.eval.n                      40
        openprogram.eval.interval.low           0.572
        openprogram.eval.interval.high          0.839
        openprogram.eval.verdict                pass | fail | undecided
        openprogram.eval.pass_at.3              0.98
        openprogram.eval.flaky                  true | false
        openprogram.eval.expectation.trajectory.rate   0.725

    (also ``max_samples``, ``confidence``, ``interval.method``, ``threshold``, ``decision``,
    ``stopped_early``, ``interrupted``, ``budget_stopped``, ``discarded``, each
    expectation's ``passed`` and ``n``, the tokens as ``tokens.KIND``, ``cost_usd`` when
    the model has a price (and ``spent_usd`` when discarded samples cost more),
    ``retries`` when a call was retried, and ``regression.N``)."""
    interval = result.interval
    out = [
        ("pass_rate", _number(result.rate)),
        ("passed", str(result.passed)),
        ("n", str(result.n)),
        ("max_samples", str(result.max_samples)),
        ("confidence", _number(result.confidence)),
        ("interval.low", _number(interval.low)),
        ("interval.high", _number(interval.high)),
        ("interval.method", "wilson"),
        ("threshold", "" if result.threshold is None else _number(result.threshold)),
        ("verdict", result.verdict),
        ("decision", decision(result)),
        ("stopped_early", _bool(result.stopped_early)),
        ("interrupted", _bool(result.interrupted)),
        ("budget_stopped", _bool(result.budget_stopped)),
        ("discarded", str(len(result.discarded))),
        ("flaky", _bool(result.flaky)),
    ]
    out += [(f"pass_at.{k}", _number(v)) for k, v in result.pass_at().items()]
    for key, (held, n) in result.rates().items():
        head = f"expectation.{key}."
        out += [(head + "rate", _number(held / n if n else 0.0)), (head + "passed", str(held)),
                (head + "n", str(n))]  # fmt: skip
    out += [(f"tokens.{k}", str(v)) for k, v in result.usage().items() if v]
    cost, spent = result.cost(), result.spent()
    if cost is not None:
        out.append(("cost_usd", _number(cost)))
    if spent is not None and spent != cost:
        out.append(("spent_usd", _number(spent)))
    if result.retries:
        out.append(("retries", str(result.retries)))
    out += [(f"regression.{i}", r.path) for i, r in enumerate(result.regressions, start=1)]
    return [(_PREFIX + name, value) for name, value in out]


def _bool(value: bool) -> str:
    return "true" if value else "false"


def ending(result: ScenarioResult) -> str:
    """How sampling ended: decided early, stopped by the user or the budget, or every
    sample taken."""
    said = f"{result.n} of {result.max_samples} samples"
    if result.stopped_early:
        said = f"stopped early after {said}: the verdict was decided"
    elif result.interrupted:
        said = f"interrupted after {said}"
    elif result.budget_stopped:
        said = f"stopped by the budget after {said} (the next would have passed it)"
    if result.discarded:
        said += (
            f"; {len(result.discarded)} sample(s) in flight when it ended discarded "
            f"({', '.join(map(str, result.discarded))})"
        )
    return said


def decision(result: ScenarioResult, *, threshold: str = "threshold") -> str:
    """How the verdict was reached: the sequential test's bound against the threshold
    (``threshold`` names the setting, ``--threshold`` where the CLI prints it)."""
    test = result.test()
    if test is None:
        return f"every sample must pass (no {threshold})"
    if not result.n:
        return f"threshold {test.threshold:g}: no samples"
    bound = test.interval(result.passed, result.n)
    how = {
        "pass": f"lower bound {bound.low:.3f} > {test.threshold:g}",
        "fail": f"upper bound {bound.high:.3f} < {test.threshold:g}",
        "undecided": f"bound [{bound.low:.3f}, {bound.high:.3f}] holds {test.threshold:g}",
    }[result.verdict]
    return f"threshold {test.threshold:g}: {how} (Clopper-Pearson at {bound.confidence:.4g})"


def _headline(result: ScenarioResult) -> str:
    interval = result.interval
    flaky = ", flaky" if result.flaky else ""
    return (
        f"{result.verdict.upper()} {result.path}: {result.passed}/{result.n} samples passed "
        f"(rate {result.rate:.3f}, {result.confidence:.0%} interval {interval}{flaky}); "
        f"{decision(result)}"
    )


def eval_summary(result: ScenarioResult) -> str:
    """What a scenario's eval says, as a failing test shows it: the headline (verdict,
    rate, interval, how it was decided), how sampling ended, each expectation's rate, the
    regressions written and the distinct reasons its samples failed, each with the samples
    and the first one's cassette."""
    lines = [_headline(result), ending(result)]
    if result.verdict == "undecided" and not (result.interrupted or result.budget_stopped):
        lines.append("undecided: not passed; raise the samples (--openprogram-samples, --samples)")
    elif result.verdict == "undecided" and result.budget_stopped:
        lines.append(
            "undecided: not passed; the budget ran out first (--openprogram-budget, --budget)"
        )
    rates = ", ".join(f"{k} {p}/{n}" for k, (p, n) in result.rates().items())
    if rates:
        lines.append(f"expectations held: {rates}")
    for r in result.regressions:
        lines.append(
            f"regression: {r.path} ({r.count} failing sample(s); fails on {', '.join(r.failed)})"
        )
    reasons: dict[str, list[int]] = {}
    first: dict[str, str] = {}
    for sample in result.samples:
        for failure in sample.failures:
            reasons.setdefault(failure, []).append(sample.index)
            first.setdefault(failure, sample.cassette)
    for reason, indices in list(reasons.items())[:_SHOWN_FAILURES]:
        shown = ", ".join(str(i) for i in indices[:10]) + (" ..." if len(indices) > 10 else "")
        lines.append(f"\nfailed in sample(s) {shown} (first: {first[reason]}):")
        lines += [f"  {line}" for line in reason.splitlines()]
    if len(reasons) > _SHOWN_FAILURES:
        lines.append(f"\n... and {len(reasons) - _SHOWN_FAILURES} more distinct failure(s)")
    return "\n".join(lines)


def _text(value: str) -> str:
    return _NOT_XML.sub("\ufffd", value)


def _case(result: ScenarioResult) -> ET.Element:
    case = ET.Element(
        "testcase",
        {"classname": "openprogram.eval", "name": _text(f"{result.path}::{result.title}"),
         "file": _text(result.path), "time": "0"},
    )  # fmt: skip
    props = ET.SubElement(case, "properties")
    for name, value in eval_properties(result):
        ET.SubElement(props, "property", {"name": _text(name), "value": _text(value)})
    if not result.ok:
        failure = ET.SubElement(
            case,
            "failure",
            {"message": _text(_headline(result)), "type": f"eval.{result.verdict}"},
        )
        failure.text = _text(eval_summary(result))
    return case


def write_eval_junit(
    results: Iterable[ScenarioResult],
    path: str | os.PathLike[str],
    *,
    name: str = "openprogram eval",
    model: str = "",
) -> Path:
    """Write ``results`` as a JUnit XML file (atomically): a ``<testsuite>`` named ``name``
    with one ``<testcase>`` per scenario carrying :func:`eval_properties`, failed (with
    :func:`eval_summary`) when its verdict is not ``pass``; ``model`` is a suite
    property."""
    cases = [_case(r) for r in results]
    failures = sum(1 for c in cases if c.find("failure") is not None)
    suites = ET.Element("testsuites", {"name": _text(name)})
    suite = ET.SubElement(
        suites,
        "testsuite",
        {"name": _text(name), "tests": str(len(cases)), "failures": str(failures),
         "errors": "0", "skipped": "0", "time": "0",
         "timestamp": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")},
    )  # fmt: skip
    if model:
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", {"name": _PREFIX + "model", "value": _text(model)})
    suite.extend(cases)
    ET.indent(suites)
    text = ET.tostring(suites, encoding="unicode", xml_declaration=False)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, '<?xml version="1.0" encoding="utf-8"?>\n' + text + "\n", mode=0o644)
    return target
