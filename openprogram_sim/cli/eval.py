"""``openprogram-sim eval SCENARIO... --model PROVIDER:MODEL --samples N``: each scenario's
exec run against a real model up to N times, each sample recorded as a cassette and judged
by the expectations that apply to a real model; a pass rate, its interval and a verdict per
scenario (see docs/evals.md)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from openprogram.errors import OpenProgramError
from openprogram_sim.cli._arguments import add_pythonpath
from openprogram_sim.errors import CassetteError, ScenarioError

__all__ = ["add_parser", "command"]

_VERDICT = {"pass": "PASS", "fail": "FAIL", "undecided": "UNDECIDED"}


def _limits(pairs: list[str]) -> dict[str, int]:
    """The pyproject's limits, then each ``--max-concurrency-per-provider PROVIDER=N``."""
    from openprogram_sim.eval import pyproject_limits

    out = pyproject_limits()
    for pair in pairs:
        provider, sep, limit = pair.partition("=")
        if not sep or not provider or not limit.strip().isdigit():
            raise ValueError(
                f"--max-concurrency-per-provider {pair!r} is not PROVIDER=N (e.g. openai=4)"
            )
        out[provider.strip()] = int(limit)
    return out


def _options(args: argparse.Namespace) -> Any:
    from openprogram_sim.eval import EvalOptions, RetryPolicy, load_pricing

    return EvalOptions(
        model=args.model,
        samples=args.samples,
        base_url=args.base_url,
        threshold=args.threshold,
        confidence=args.confidence,
        sequential=not args.no_early_stop,
        out=Path(args.out),
        timeout=args.timeout,
        concurrency=args.concurrency,
        provider_limits=_limits(args.max_concurrency_per_provider),
        retries=RetryPolicy(max_retries=args.max_retries),
        budget=args.budget,
        pricing=load_pricing(args.pricing),
    )


def _load(args: argparse.Namespace) -> list[Any]:
    from openprogram_sim.scenario import discover, load_scenario

    files = discover(list(args.scenarios))
    if not files:
        raise ValueError(f"no scenario files under {' '.join(args.scenarios)}")
    base = Path.cwd().resolve()
    return [
        load_scenario(f, shown_as=_relative(f, base), pythonpath=args.pythonpath) for f in files
    ]


def _relative(path: Path, base: Path) -> str:
    """``path`` relative to the working directory when under it (as ``run`` shows it), so
    a results file compares with a baseline written from another checkout."""
    try:
        return str(path.resolve().relative_to(base))
    except ValueError:
        return str(path)


def _baseline(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"--baseline {path}: cannot read it as an eval's --json file ({exc})"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list):
        raise ValueError(
            f"--baseline {path}: not an eval's --json file (no scenarios: list); write one "
            "with openprogram-sim eval ... --json FILE"
        )
    return data


def _unpriced(options: Any, scenarios: list[Any]) -> None:
    """Say once that the model, or a judge's, has no price (its tokens are reported
    without a cost)."""
    prices = options.prices()
    if prices.price(options.model) is None:
        print(
            f"openprogram-sim eval: no price for {options.model} in the pricing table "
            f"(dated {prices.date}); tokens are reported without a cost (give one with "
            "--pricing FILE or [tool.openprogram.pricing] in pyproject.toml)",
            file=sys.stderr,
        )
    judges = {s.expect.judge.model for s in scenarios if s.expect.judge is not None}
    for model in sorted(m for m in judges if prices.price(m) is None):
        print(
            f"openprogram-sim eval: no price for the judge model {model} in the pricing "
            f"table (dated {prices.date}); its tokens are reported without a cost and the "
            "budget does not count them",
            file=sys.stderr,
        )


def _sample(args: argparse.Namespace, options: Any, scenarios: list[Any], stop: _Interrupt) -> Any:
    from openprogram_sim.eval import ProgressBar, evaluate_all

    out = sys.stdout
    results: list[Any] = []
    bar = ProgressBar(len(scenarios) * options.samples, enabled=not args.quiet)
    run = evaluate_all(scenarios, options, on_progress=bar.update, should_stop=stop.is_set)
    with bar:
        try:
            for result in run:
                results.append(result)
                bar.echo(_result_text(result, options), out)
        except KeyboardInterrupt:  # the second Ctrl-C, or one before the handler was in place
            stop.set()
    return results, run.budget


def command(args: argparse.Namespace) -> int:
    from openprogram_sim.eval import EvalSetupError, compare

    out = sys.stdout
    results: list[Any] = []
    stop = _Interrupt()
    try:
        options = _options(args)
        baseline = _baseline(args.baseline)
        scenarios = _load(args)
        _unpriced(options, scenarios)
        with stop.installed():
            results, budget = _sample(args, options, scenarios, stop)
    except (ScenarioError, CassetteError, OpenProgramError, EvalSetupError, ValueError) as exc:
        print(f"openprogram-sim eval: {exc}", file=sys.stderr)
        return 2
    if args.report:
        _write_report(Path(args.report), results, scenarios, options, args)
    if stop.is_set():
        print(
            f"openprogram-sim eval: interrupted after {len(results)} scenario(s); the samples "
            f"taken are under {args.out}",
            file=sys.stderr,
        )
        return 2
    changes = compare(results, baseline, 1 - options.confidence) if baseline else []
    for change in changes:
        mark = "CHANGED" if change.significant else "same"
        print(f"baseline  {mark:8} {change.path}  {change.describe()}", file=out)
    if args.json:
        _write_json(Path(args.json), results, changes, options, args, budget)
    if args.junitxml:
        from openprogram_sim.eval import write_eval_junit

        write_eval_junit(results, args.junitxml, model=options.model)
    print("\n" + _totals(results, changes, options, budget, baseline is not None), file=out)
    failed = [r for r in results if not r.ok]
    dropped = [c for c in changes if c.dropped]
    return 1 if failed or dropped else 0


def _dollars(value: float) -> str:
    return f"${value:.4f}" if value >= 0.01 or value == 0 else f"${value:.6f}"


def _totals(
    results: list[Any], changes: list[Any], options: Any, budget: Any, against: bool
) -> str:
    """The eval's last lines: the verdicts, the samples, the spend and the budget."""
    dropped = [c for c in changes if c.dropped]
    counts = {v: sum(r.verdict == v for r in results) for v in ("pass", "fail", "undecided")}
    said = f"{counts['pass']} passed, {counts['fail']} failed"
    if counts["undecided"]:
        budget_cut = sum(r.verdict == "undecided" and r.budget_stopped for r in results)
        why = "raise --samples" if budget_cut < counts["undecided"] else "the budget stopped them"
        said += f", {counts['undecided']} undecided (not passed: {why})"
    if against:
        said += f"; {len(dropped)} dropped against the baseline"
    total = sum(r.n for r in results)
    spent = [r.spent() for r in results]
    money = (
        f"; {_dollars(sum(s for s in spent if s is not None))} spent"
        if results and all(s is not None for s in spent)
        else ""
    )
    retried = sum(r.retries for r in results)
    retries = f"; {retried} model call(s) retried" if retried else ""
    lines = [
        f"{len(results)} scenarios: {said} ({options.model}, {total} samples{money}{retries}; "
        f"cassettes under {options.out})"
    ]
    if budget.stopped:
        lines.append(
            f"budget {_dollars(budget.limit)}: stopped by it after {_dollars(budget.spent)} spent "
            f"(the next sample was estimated at {_dollars(budget.estimate or 0.0)}); "
            f"{sum(r.budget_stopped for r in results)} scenario(s) not finished"
        )
    return "\n".join(lines)


class _Interrupt:
    """Ctrl-C during an eval: the first press ends it after the sample running (its cassette
    is kept, the summary printed); a second stops at once."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        self._event.set()

    def _handle(self, signum: int, frame: object) -> None:
        if self._event.is_set():
            raise KeyboardInterrupt
        self._event.set()
        print(
            "openprogram-sim eval: stopping after this sample (Ctrl-C again to stop now)",
            file=sys.stderr,
            flush=True,
        )

    @contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, self._handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


def _stopping(result: Any) -> str:
    if result.stopped_early:
        return f"stopped after {result.n} of {result.max_samples} samples: the verdict was decided"
    if result.interrupted:
        return f"interrupted after {result.n} of {result.max_samples} samples"
    if result.budget_stopped:
        return f"stopped by --budget after {result.n} of {result.max_samples} samples"
    return f"{result.n} samples"


def _money_lines(result: Any) -> list[str]:
    lines = []
    used = result.usage()
    cost = result.cost()
    if any(used.values()):
        tokens = ", ".join(f"{v} {k}" for k, v in used.items() if v)
        each = sum(used.get(k, 0) for k in ("input", "output")) / max(result.n, 1)
        priced = (
            f"; cost {_dollars(cost)} ({_dollars(cost / max(result.n, 1))} a sample)"
            if cost is not None
            else "; no price for the model"
        )
        lines.append(f"tokens: {tokens} ({each:.0f} in and out a sample){priced}")
    if result.discarded:
        spent = result.spent()
        lines.append(
            f"discarded: sample(s) {', '.join(map(str, result.discarded))}, in flight when "
            "the verdict was decided (not counted; their cassettes removed"
            + (f"; {_dollars(result.discarded_cost)} of the spend)" if spent is not None else ")")
        )
    if result.retries:
        statuses = sorted({r["status"] for s in result.samples for r in s.retries})
        lines.append(
            f"retries: {result.retries} model call(s) retried (HTTP "
            f"{', '.join(map(str, statuses))}); each kept in its sample's cassette"
        )
    return lines


def _result_text(result: Any, options: Any) -> str:
    """A scenario's lines in the summary."""
    from openprogram_sim.eval import decision

    interval = result.interval
    head = (
        f"{_VERDICT[result.verdict]:9} {result.path}  {result.passed}/{result.n} passed "
        f"(rate {result.rate:.3f}, {options.confidence:.0%} interval {interval})"
    )
    lines = [head + ("  flaky" if result.flaky else "")]
    lines.append(f"{_stopping(result)}; {decision(result, threshold='--threshold')}")
    if result.n:
        lines.append("  ".join(f"pass@{k} {v:.3f}" for k, v in result.pass_at().items()))
        lines.append("expectations: " + "  ".join(
            f"{k} {p}/{n}" for k, (p, n) in result.rates().items()
        ))  # fmt: skip
    lines += _money_lines(result)
    if result.not_applicable:
        lines.append(
            f"not applicable: {', '.join(result.not_applicable)} (they pin what a script does)"
        )
    for regression in result.regressions:
        lines.append(
            f"regression: {regression.path} ({regression.count} failing sample(s) made this "
            f"trajectory; it fails on {', '.join(regression.failed)})"
        )
    failing = [s for s in result.samples if not s.passed]
    out = [lines[0], *(" " * 10 + line for line in lines[1:])]
    if failing and result.verdict != "pass":
        first = failing[0]
        out.append(f"          first failing sample: {first.cassette}")
        out += [f"            {line}" for line in first.failures[0].splitlines()[:6]]
    return "\n".join(out)


def _write_json(
    path: Path,
    results: list[Any],
    changes: list[Any],
    options: Any,
    args: argparse.Namespace,
    budget: Any,
) -> None:
    from openprogram_sim.cassettes._atomic import atomic_write
    from openprogram_sim.eval import JSON_VERSION

    by_path = {c.path: c for c in changes}
    scenarios = []
    for result in results:
        entry = result.to_json()
        change = by_path.get(result.path)
        entry["baseline"] = change.to_json() if change is not None else None
        scenarios.append(entry)
    spent = [r.spent() for r in results]
    data = {
        "version": JSON_VERSION,
        "model": options.model,
        "confidence": options.confidence,
        "threshold": options.threshold,
        "max_samples": options.samples,
        "concurrency": options.slots(),
        "max_retries": options.retries.max_retries,
        "baseline": args.baseline,
        "cost": {
            "spent_usd": sum(s for s in spent if s is not None)
            if all(s is not None for s in spent)
            else None,
            "budget_usd": options.budget,
            "stopped_by_budget": budget.stopped,
            "next_sample_estimate_usd": budget.estimate if budget.stopped else None,
            "pricing": options.prices().describe(options.model),
        },
        "retries": sum(r.retries for r in results),
        "scenarios": scenarios,
    }
    atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _write_report(
    path: Path, results: list[Any], scenarios: list[Any], options: Any, args: argparse.Namespace
) -> None:
    from openprogram_sim.eval import write_eval_report

    write_eval_report(
        results,
        path,
        model=options.model,
        source=" ".join(args.scenarios),
        scenarios={s.path: s for s in scenarios},
        pythonpath=args.pythonpath or (),
    )


def _rate(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number between 0 and 1") from None


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "eval",
        help="run scenarios against a real model, N samples each: pass rates, intervals, verdicts",
        description="Run each SCENARIO's exec (its tools simulated or real) through "
        "openprogram's real adapter for --model (the key from the usual environment "
        "variable) up to --samples times; its scripted model: turns are not played. Each "
        "sample is recorded as a cassette under --out (secrets scrubbed) and judged by the "
        "expectations that apply to a real model (trajectory, properties, result, raises). "
        "With --threshold P a scenario passes when the pass rate's lower bound clears P and "
        "fails when its upper bound falls below it, and sampling stops as soon as that is "
        "decided. Exit status: 0 every scenario passed, 1 one did not (undecided, stopped by "
        "--budget before its verdict, or dropped against --baseline), 2 a file could not be "
        "loaded, an option is wrong, the eval could not run, or it was interrupted.",
    )
    parser.add_argument("scenarios", nargs="+", metavar="SCENARIO", help="files or folders")
    parser.add_argument(
        "--model", required=True, metavar="PROVIDER:MODEL", help="e.g. openai:gpt-4o-mini"
    )
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="the adapter's base URL; {sample} in it is replaced by a name per sample (a "
        "wire server's session: http://127.0.0.1:PORT/s/{sample}/v1)",
    )
    parser.add_argument(
        "--samples", type=int, default=10, metavar="N", help="the most samples per scenario"
    )
    parser.add_argument(
        "--threshold",
        type=_rate,
        metavar="P",
        help="the pass rate a scenario must clear (default: every sample must pass)",
    )
    parser.add_argument(
        "--confidence",
        type=_rate,
        default=0.95,
        metavar="C",
        help="the confidence of the intervals and the verdict (default 0.95)",
    )
    parser.add_argument(
        "--no-early-stop",
        action="store_true",
        help="take every sample and decide once at the end (the verdict's test is then not "
        "split over the looks, so it is less conservative)",
    )
    parser.add_argument(
        "--out",
        default="reports/eval",
        metavar="DIR",
        help="where each sample's cassette is written (default reports/eval/)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="real time each sample's run may take (default 120; the scenario's timeout: is "
        "set for the scripted model)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        metavar="K",
        help="samples run at once, over the scenarios too (default 1); the verdict is read "
        "from the samples in the order they started, so K changes the time, not the verdict",
    )
    parser.add_argument(
        "--max-concurrency-per-provider",
        action="append",
        default=[],
        metavar="PROVIDER=N",
        help="never more than N samples at once against PROVIDER, whatever --concurrency "
        "says (repeatable, e.g. openai=4 anthropic=2)",
    )
    parser.add_argument(
        "--max-retries",
        type=int,
        default=4,
        metavar="N",
        help="retries of a model call refused with HTTP 429 or 5xx (default 4; its "
        "retry-after-ms or retry-after honoured, else exponential backoff with jitter)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        metavar="USD",
        help="dollars the eval may spend: a sample whose estimated cost (the mean of those "
        "so far) would pass it is not started; needs a price for --model",
    )
    parser.add_argument(
        "--pricing",
        action="append",
        default=[],
        metavar="FILE",
        help="a TOML price table over the bundled one (its layout; repeatable, later wins); "
        "[tool.openprogram.pricing] in pyproject.toml is read too",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bar (it is drawn only when stderr is a terminal)",
    )
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument(
        "--report",
        metavar="PATH",
        help="write the HTML report's eval view (written on Ctrl-C too, with what ran)",
    )
    parser.add_argument(
        "--junitxml",
        metavar="PATH",
        help="write JUnit XML: a test case per scenario, its rates as properties",
    )
    parser.add_argument(
        "--baseline",
        metavar="FILE",
        help="an earlier --json file: flag scenarios whose pass rate changed beyond chance",
    )
    add_pythonpath(parser, "scenario")
    parser.set_defaults(func=command)
