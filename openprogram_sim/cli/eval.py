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
from typing import Any, TextIO

from openprogram.errors import OpenProgramError
from openprogram_sim.cli._arguments import add_pythonpath
from openprogram_sim.errors import CassetteError, ScenarioError

__all__ = ["add_parser", "command"]

_VERDICT = {"pass": "PASS", "fail": "FAIL", "undecided": "UNDECIDED"}


def _options(args: argparse.Namespace) -> Any:
    from openprogram_sim.eval import EvalOptions

    return EvalOptions(
        model=args.model,
        samples=args.samples,
        base_url=args.base_url,
        threshold=args.threshold,
        confidence=args.confidence,
        sequential=not args.no_early_stop,
        out=Path(args.out),
        timeout=args.timeout,
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


def command(args: argparse.Namespace) -> int:
    from openprogram_sim.eval import EvalSetupError, compare, evaluate

    out = sys.stdout
    results: list[Any] = []
    stop = _Interrupt()
    try:
        options = _options(args)
        baseline = _baseline(args.baseline)
        scenarios = _load(args)
        with stop.installed():
            for scenario in scenarios:
                result = evaluate(scenario, options, should_stop=stop.is_set)
                results.append(result)
                _print_result(result, options, out)
                if stop.is_set():
                    break
    except (ScenarioError, CassetteError, OpenProgramError, EvalSetupError, ValueError) as exc:
        print(f"openprogram-sim eval: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the second Ctrl-C, or one before the handler was in place
        stop.set()
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
        _write_json(Path(args.json), results, changes, options, args)
    failed = [r for r in results if not r.ok]
    dropped = [c for c in changes if c.dropped]
    counts = {v: sum(r.verdict == v for r in results) for v in ("pass", "fail", "undecided")}
    said = f"{counts['pass']} passed, {counts['fail']} failed"
    if counts["undecided"]:
        said += f", {counts['undecided']} undecided (not passed: raise --samples)"
    if baseline is not None:
        said += f"; {len(dropped)} dropped against the baseline"
    total = sum(r.n for r in results)
    print(
        f"\n{len(results)} scenarios: {said} ({options.model}, {total} samples; cassettes "
        f"under {options.out})",
        file=out,
    )
    return 1 if failed or dropped else 0


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


def _decision(result: Any) -> str:
    test = result.test()
    if test is None:
        return "every sample must pass (no --threshold)"
    bound = test.interval(result.passed, result.n)
    level = f"{bound.confidence:.4g}"
    how = {
        "pass": f"lower bound {bound.low:.3f} > {test.threshold:g}",
        "fail": f"upper bound {bound.high:.3f} < {test.threshold:g}",
        "undecided": f"bound [{bound.low:.3f}, {bound.high:.3f}] holds {test.threshold:g}",
    }[result.verdict]
    return f"threshold {test.threshold:g}: {how} (Clopper-Pearson at {level})"


def _print_result(result: Any, options: Any, out: TextIO) -> None:
    interval = result.interval
    head = (
        f"{_VERDICT[result.verdict]:9} {result.path}  {result.passed}/{result.n} passed "
        f"(rate {result.rate:.3f}, {options.confidence:.0%} interval {interval})"
    )
    print(head + ("  flaky" if result.flaky else ""), file=out)
    stop = (
        f"stopped after {result.n} of {result.max_samples} samples: the verdict was decided"
        if result.stopped_early
        else f"interrupted after {result.n} of {result.max_samples} samples"
        if result.interrupted
        else f"{result.n} samples"
    )
    print(f"          {stop}; {_decision(result)}", file=out)
    at = "  ".join(f"pass@{k} {v:.3f}" for k, v in result.pass_at().items())
    print(f"          {at}", file=out)
    rates = "  ".join(f"{k} {p}/{n}" for k, (p, n) in result.rates().items())
    print(f"          expectations: {rates}", file=out)
    used = result.usage()
    if any(used.values()):
        tokens = ", ".join(f"{v} {k}" for k, v in used.items() if v)
        each = sum(used.get(k, 0) for k in ("input", "output")) / max(result.n, 1)
        print(f"          tokens: {tokens} ({each:.0f} in and out a sample)", file=out)
    if result.not_applicable:
        print(
            f"          not applicable: {', '.join(result.not_applicable)} (they pin what a "
            "script does)",
            file=out,
        )
    for regression in result.regressions:
        print(
            f"          regression: {regression.path} ({regression.count} failing sample(s) "
            f"made this trajectory; it fails on {', '.join(regression.failed)})",
            file=out,
        )
    failing = [s for s in result.samples if not s.passed]
    if failing and result.verdict != "pass":
        first = failing[0]
        print(f"          first failing sample: {first.cassette}", file=out)
        for line in first.failures[0].splitlines()[:6]:
            print(f"            {line}", file=out)


def _write_json(
    path: Path, results: list[Any], changes: list[Any], options: Any, args: argparse.Namespace
) -> None:
    from openprogram_sim.eval import JSON_VERSION

    by_path = {c.path: c for c in changes}
    scenarios = []
    for result in results:
        entry = result.to_json()
        change = by_path.get(result.path)
        entry["baseline"] = change.to_json() if change is not None else None
        scenarios.append(entry)
    data = {
        "version": JSON_VERSION,
        "model": options.model,
        "confidence": options.confidence,
        "threshold": options.threshold,
        "max_samples": options.samples,
        "baseline": args.baseline,
        "scenarios": scenarios,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


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
        "decided. Exit status: 0 every scenario passed, 1 one did not (or dropped against "
        "--baseline), 2 a file could not be loaded or the eval could not run.",
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
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument(
        "--baseline",
        metavar="FILE",
        help="an earlier --json file: flag scenarios whose pass rate changed beyond chance",
    )
    add_pythonpath(parser, "scenario")
    parser.set_defaults(func=command)
