"""``openprogram-sim run``: load scenario files, run them, check them, print the verdicts."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from openprogram.errors import OpenProgramError
from openprogram_sim.cli._arguments import add_pythonpath
from openprogram_sim.coverage._cli import RunCoverage
from openprogram_sim.coverage._cli import add_arguments as add_coverage_arguments
from openprogram_sim.errors import ScenarioError
from openprogram_sim.play import Verdict, check_outcome, run_scenario
from openprogram_sim.report._otel_export import OtelMissingError, require_sdk
from openprogram_sim.report._trace_out import TraceOut
from openprogram_sim.scenario import discover, load_scenario

__all__ = ["ScenarioResult", "add_parser", "command", "run_paths"]

PROGRESS_THRESHOLD = 20

_STATUSES = ("passed", "failed", "error", "interrupted")


@dataclass(slots=True)
class ScenarioResult:
    """One file's result: a verdict, the load error that prevented a run, or the Ctrl-C
    that stopped it (``interrupted``: the run, and the files after it, never finished)."""

    path: Path
    verdict: Verdict | None = None
    load_error: ScenarioError | None = None
    interrupted: bool = False

    @property
    def status(self) -> str:
        """``passed``, ``failed``, ``error`` (the file does not load, its run crashed: see
        :attr:`RunOutcome.crashed`, or its ``setup:``/``teardown:`` failed, as pytest counts
        a fixture's failure) or ``interrupted``."""
        if self.load_error is not None:
            return "error"
        if self.interrupted:
            return "interrupted"
        assert self.verdict is not None
        if self.verdict.passed:
            return "passed"
        outcome = self.verdict.outcome
        return "error" if outcome.crashed or outcome.hook_failures else "failed"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": str(self.path), "status": self.status}
        if self.load_error is not None:
            data["errors"] = [str(i) for i in self.load_error.issues]
            return data
        if self.verdict is None:  # interrupted
            return data
        assert self.verdict is not None
        outcome = self.verdict.outcome
        data.update(
            title=outcome.scenario.scenario,
            tags=outcome.scenario.tags,
            rounds=outcome.rounds,
            model_calls=outcome.model_calls,
            duration_s=round(outcome.duration, 6),
            result=outcome.result if _jsonable(outcome.result) else repr(outcome.result),
            error=outcome.error_text,
            crash=outcome.crash if not self.verdict.passed else None,
            failures=[
                {"title": f.title, "where": f.where, "detail": f.detail}
                for f in self.verdict.failures
            ],
            trace=outcome.trace,
        )
        from openprogram_sim.report import expectation_checks  # the report's own view

        data.update(expectation_checks(self.verdict))  # trajectory: [...], properties: [...]
        return data


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


class _Progress:
    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.stream = stream
        self.on = total >= PROGRESS_THRESHOLD and stream.isatty()

    def update(self, done: int) -> None:
        if self.on:
            width = 30
            filled = width * done // self.total
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total}")
            self.stream.flush()

    def close(self) -> None:
        if self.on:
            self.stream.write("\r" + " " * 50 + "\r")
            self.stream.flush()


def run_paths(
    paths: Sequence[str | Path],
    *,
    keyword: str | None = None,
    tags: Sequence[str] = (),
    pythonpath: Sequence[str] = (),
    provider: Callable[[], Any] | None = None,
    before_each: Callable[[Path], None] | None = None,
    on_skip: Callable[[Path, str], None] | None = None,
) -> list[ScenarioResult]:
    """Load and run every scenario under ``paths``; ``keyword`` keeps those whose title or
    path contains it, ``tags`` those with any of the tags given (``"not TAG"`` drops those
    with TAG); ``pythonpath`` adds folders the scenarios' own Python is imported from;
    ``provider`` makes the model for each run (default: the scenario's scripted turns);
    ``before_each`` is called with each file just before it runs (``--coverage-source``
    switches its coverage context there); ``on_skip(path, reason)`` is told of each file
    under a folder that is not a scenario (a cassette) and is left alone. Files that do not
    load are always reported; the Python a file names is imported only when it runs, after
    the filters (a file filtered out imports nothing), and one whose Python does not import,
    or is refused, is reported as a file that does not load."""
    files = discover(list(paths), on_skip=on_skip)
    base = Path.cwd().resolve()
    results: list[ScenarioResult] = []
    progress = _Progress(len(files), sys.stderr)
    for i, file in enumerate(files):
        try:
            scenario = load_scenario(file, shown_as=_relative(file, base), pythonpath=pythonpath)
        except ScenarioError as exc:
            results.append(ScenarioResult(file, load_error=exc))
            continue
        if keyword and keyword not in scenario.scenario and keyword not in str(file):
            continue
        if not _tagged(scenario.tags, tags):
            continue
        model = provider() if provider is not None else None
        if before_each is not None:
            before_each(file)
        try:
            outcome = run_scenario(scenario, model)  # imports the Python the file names
        except ScenarioError as exc:  # that Python does not import, or is refused
            results.append(ScenarioResult(file, load_error=exc))
            progress.update(i + 1)
            continue
        except KeyboardInterrupt:  # Ctrl-C (or a tool raising it): stop, report what ran
            results.append(ScenarioResult(file, interrupted=True))
            break
        results.append(ScenarioResult(file, verdict=check_outcome(outcome)))
        progress.update(i + 1)
    progress.close()
    return results


def _print_skipped(path: Path, reason: str) -> None:
    shown = _relative(path, Path.cwd().resolve())
    print(f"openprogram-sim: left alone {shown}: {reason}", file=sys.stderr)


def _tagged(have: Sequence[str], wanted: Sequence[str]) -> bool:
    """Whether a scenario with tags ``have`` passes the ``-m`` filters ``wanted``."""
    drop = {w[4:].strip() for w in wanted if w.startswith("not ")}
    keep = {w for w in wanted if not w.startswith("not ")}
    if drop & set(have):
        return False
    return not keep or bool(keep & set(have))


def _line(result: ScenarioResult, base: Path, width: int = 0) -> str:
    path = _relative(result.path, base).ljust(width)
    if result.load_error is not None:
        return f"ERROR {path}  (could not load: {len(result.load_error.issues)} problem(s))"
    if result.verdict is None:
        reason = "KeyboardInterrupt (Ctrl-C): this run and the files after it did not finish"
        return f"INTERRUPTED {path}  ({reason})"
    outcome = result.verdict.outcome
    mark = {"passed": "PASS ", "failed": "FAIL ", "error": "ERROR"}[result.status]
    rounds = f"{outcome.rounds} round{'s' if outcome.rounds != 1 else ''}"
    return (
        f"{mark} {path}  {rounds:>9}  {outcome.duration * 1000:7.1f} ms  "
        f"{outcome.scenario.scenario}"
    )


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base))
    except (ValueError, OSError, RuntimeError):  # outside base, or a link that loops
        return str(path)


def _print_text(results: list[ScenarioResult], elapsed: float, out: TextIO) -> None:
    base = Path.cwd().resolve()
    width = max((len(_relative(r.path, base)) for r in results), default=0)
    for result in results:
        print(_line(result, base, width).rstrip(), file=out)
    for result in results:
        if result.status in ("passed", "interrupted"):
            continue
        print(f"\n{'=' * 78}\n{result.status.upper()}: {_relative(result.path, base)}", file=out)
        if result.load_error is not None:
            for issue in result.load_error.issues:
                print(f"  {issue}", file=out)
        elif result.verdict is not None:
            print(f"  {result.verdict.outcome.scenario.scenario}", file=out)
            crash = result.verdict.outcome.crash
            if crash is not None:
                print(f"  the run crashed: {crash}", file=out)
            for failure in result.verdict.failures:
                print(f"\n- {failure.title}", file=out)
                for line in failure.explained.splitlines():
                    print(f"  {line}", file=out)
    counts = {s: sum(1 for r in results if r.status == s) for s in _STATUSES}
    parts = [f"{counts['passed']} passed"]
    parts += [f"{counts[s]} {s}" for s in _STATUSES[1:] if counts[s]]
    print(f"\n{len(results)} scenarios: {', '.join(parts)} in {elapsed:.2f}s", file=out)


def command(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    try:
        provider = _provider(args.model, args.base_url)
        trace_out = _trace_out(args.trace_out, args.otel)
    except (OpenProgramError, ValueError, OtelMissingError) as exc:
        print(f"openprogram-sim: {exc}", file=sys.stderr)
        return 2
    try:
        coverage = RunCoverage.from_args(args)
        if coverage is not None:
            coverage.start()
    except ValueError as exc:
        print(f"openprogram-sim: {exc}", file=sys.stderr)
        return 2
    try:
        results = run_paths(
            args.paths or ["scenarios"],
            keyword=args.keyword,
            tags=args.tags,
            pythonpath=args.pythonpath,
            provider=provider,
            before_each=coverage.before_each if coverage is not None else None,
            on_skip=_print_skipped if args.verbose else None,
        )
    except ScenarioError as exc:
        if coverage is not None:
            coverage.measure([])  # stops coverage.py
        print(f"openprogram-sim: {exc}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - start
    behaviours = coverage.measure(results) if coverage is not None else None
    if args.json:
        summary = {s: sum(1 for r in results if r.status == s) for s in _STATUSES}
        payload = {"summary": {**summary, "total": len(results), "duration_s": elapsed},
                   "scenarios": [r.to_json() for r in results]}  # fmt: skip
        if coverage is not None:
            payload.update(coverage.json(behaviours))
        # what the model and the tools said reaches a CI log: scrubbed as a cassette is
        from openprogram_sim.cassettes import Scrubber, known_secrets

        payload = Scrubber(known_secrets()).value(json.loads(json.dumps(payload, default=str)))
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_text(results, elapsed, sys.stdout)
    floor = 0
    if coverage is not None:
        floor = coverage.finish(behaviours, results, text=not args.json, out=sys.stdout)
    if not _write_traces(results, trace_out):
        return 2
    if args.report:
        tools = coverage.tools if coverage is not None and coverage.code is not None else None
        _write_report(results, args.report, elapsed, tool_code=tools)
    if not results:
        print("openprogram-sim: no scenario files found", file=sys.stderr)
        return 2
    return _exit_code(results, floor)


def _trace_out(folder: str | None, otel: bool) -> TraceOut | None:
    """Where ``--trace-out`` writes, checked before any run: ``--otel`` needs it and the
    OpenTelemetry SDK (the ``otel`` extra)."""
    if folder is None:
        if otel:
            raise ValueError("--otel writes spans beside the traces: give --trace-out DIR too")
        return None
    if otel:
        require_sdk("--otel")
    return TraceOut(Path(folder), otel=otel)


def _write_traces(results: list[ScenarioResult], out: TraceOut | None) -> bool:
    """Each run's trace (and spans) into ``out`` (if given); False, said on stderr, when a
    file cannot be written."""
    if out is None:
        return True
    base = Path.cwd().resolve()
    count = 0
    for result in results:
        if result.verdict is None:  # did not load, or interrupted: no run to write
            continue
        path = _relative(result.path, base)
        try:
            count += len(out.write_outcome(result.verdict.outcome, path=path))
        except OSError as exc:
            print(
                f"openprogram-sim: --trace-out {out.folder}: cannot write: {exc}", file=sys.stderr
            )
            return False
    print(f"openprogram-sim: {count} trace file(s) written to {out.folder}", file=sys.stderr)
    return True


def _exit_code(results: list[ScenarioResult], floor: int) -> int:
    """130 after a Ctrl-C (as a shell reports it: 128 + SIGINT); 2 when a file does not
    load; 1 when a scenario failed or its run crashed (as pytest counts a test's error), or
    a coverage floor is not met; else 0."""
    if results[-1].interrupted:
        return 130
    if any(r.load_error is not None for r in results):
        return 2
    return 0 if all(r.status == "passed" for r in results) and not floor else 1


def _provider(model: str | None, base_url: str | None) -> Callable[[], Any] | None:
    """A fresh real adapter per run (``--model``), or None for the scripted model."""
    if model is None:
        if base_url is not None:
            raise ValueError("--base-url needs --model PROVIDER:MODEL (the adapter to point at it)")
        return None
    from openprogram.providers import get_provider

    options = {} if base_url is None else {"base_url": base_url}
    get_provider(model, **options)  # a bad name or missing credentials fail before any run
    return lambda: get_provider(model, **options)


def _write_report(
    results: list[ScenarioResult], target: str, elapsed: float, tool_code: Any = None
) -> None:
    from openprogram_sim.report import invalid_record, scenario_record, write_report

    base = Path.cwd().resolve()
    records = []
    for result in results:
        path = _relative(result.path, base)
        if result.load_error is not None:
            records.append(invalid_record(result.load_error, id=path, path=path))
        elif result.verdict is not None:
            records.append(scenario_record(result.verdict, id=path, path=path))
    written = write_report(
        target, records, source="openprogram-sim run", wall_time=elapsed, tool_code=tool_code
    )
    print(f"openprogram-sim: report written to {written}", file=sys.stderr)


def add_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="run scenario files and check their expectations")
    run.add_argument("paths", nargs="*", help="files or folders (default: scenarios/)")
    run.add_argument("--json", action="store_true", help="print machine-readable results")
    run.add_argument("-k", "--keyword", help="only scenarios whose title or path contains this")
    run.add_argument(
        "-m",
        "--tag",
        dest="tags",
        action="append",
        default=[],
        metavar="TAG",
        help="only scenarios tagged TAG (repeat for any of several; 'not TAG' drops them)",
    )
    run.add_argument("--report", metavar="PATH", help="also write a self-contained HTML report")
    run.add_argument(
        "--trace-out",
        metavar="DIR",
        help="write each run's trace to DIR as JSON (one file a scenario; openprogram-sim "
        "check reads it)",
    )
    run.add_argument(
        "--otel",
        action="store_true",
        help="with --trace-out: also write each run as OpenTelemetry GenAI spans (OTLP JSON; "
        "needs the otel extra)",
    )
    add_pythonpath(run, "tools")
    run.add_argument(
        "--model",
        metavar="PROVIDER:MODEL",
        help="run exec through this real adapter (e.g. anthropic:claude-sonnet-4-5) instead "
        "of the scripted model",
    )
    run.add_argument(
        "--base-url",
        metavar="URL",
        help="the adapter's base URL (e.g. an `openprogram-sim serve` of the same scenario)",
    )
    run.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also name the files under PATHS left alone because they are not scenarios "
        "(cassettes)",
    )
    add_coverage_arguments(run)
    run.set_defaults(func=command)
