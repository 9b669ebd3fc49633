"""``openprogram-sim run``: load scenario files, run them, check them, print the verdicts."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Collection, Sequence
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
from openprogram_sim.trace import Failure

__all__ = ["RunSummary", "ScenarioResult", "add_parser", "command", "run_paths"]

PROGRESS_THRESHOLD = 20

_STATUSES = ("passed", "failed", "error", "interrupted")


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What ``run`` keeps of one scenario run once it is checked: the title, tags, rounds,
    time and failures its text output prints (not the :class:`~openprogram_sim.scenario.Scenario`,
    its YAML line map, the trace or the outcome, so a run over many files stays small)."""

    title: str
    tags: tuple[str, ...]
    rounds: int
    model_calls: int
    duration: float
    """Seconds the run took."""
    status: str
    """``passed``, ``failed`` or ``error`` (the run crashed or a ``setup:``/``teardown:``
    failed)."""
    crash: str | None
    """What to tell the user when the run crashed (:attr:`RunOutcome.crash`)."""
    failures: tuple[Failure, ...]

    @classmethod
    def of(cls, verdict: Verdict) -> RunSummary:
        outcome = verdict.outcome
        if verdict.passed:
            status = "passed"
        else:
            status = "error" if outcome.crashed or outcome.hook_failures else "failed"
        return cls(
            title=outcome.scenario.scenario, tags=tuple(outcome.scenario.tags),
            rounds=outcome.rounds, model_calls=outcome.model_calls, duration=outcome.duration,
            status=status, crash=outcome.crash, failures=tuple(verdict.failures),
        )  # fmt: skip


@dataclass(slots=True)
class ScenarioResult:
    """One file's result: a run's summary, the load error that prevented a run, or the
    Ctrl-C that stopped it (``interrupted``: the run, and the files after it, never
    finished).

    :func:`run_paths` keeps a :class:`RunSummary` of each run, not its verdict (``verdict``
    is None unless ``keep_verdicts=True``), and only what the outputs asked for: the
    ``--json`` object (``keep=("json",)``) and the ``--report`` record (``"report"``)."""

    path: Path
    verdict: Verdict | None = None
    load_error: ScenarioError | None = None
    interrupted: bool = False
    summary: RunSummary | None = None
    json_data: dict[str, Any] | None = None
    """The run's ``--json`` object, made when it was checked (``keep=("json",)``)."""
    record: dict[str, Any] | None = None
    """The run's report record (:func:`~openprogram_sim.report.scenario_record`), made
    when it was checked (``keep=("report",)``)."""

    def __post_init__(self) -> None:
        if self.summary is None and self.verdict is not None:
            self.summary = RunSummary.of(self.verdict)

    @property
    def ran(self) -> bool:
        """Whether the file loaded and its run finished (a summary is kept)."""
        return self.summary is not None

    @property
    def status(self) -> str:
        """``passed``, ``failed``, ``error`` (the file does not load, its run crashed: see
        :attr:`RunOutcome.crashed`, or its ``setup:``/``teardown:`` failed, as pytest counts
        a fixture's failure) or ``interrupted``."""
        if self.load_error is not None:
            return "error"
        if self.interrupted:
            return "interrupted"
        assert self.summary is not None
        return self.summary.status

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": str(self.path), "status": self.status}
        if self.load_error is not None:
            data["errors"] = [str(i) for i in self.load_error.issues]
            return data
        if self.summary is None:  # interrupted
            return data
        if self.json_data is not None:
            return {**data, **self.json_data}
        if self.verdict is None:
            raise ValueError(
                f"{self.path}: its --json object was not kept (run_paths(keep=('json',)))"
            )
        return {**data, **_json_data(self.verdict)}


def _json_data(verdict: Verdict) -> dict[str, Any]:
    """A checked run's fields of its ``--json`` object (beside path and status)."""
    from openprogram_sim.report import expectation_checks  # the report's own view

    outcome = verdict.outcome
    data: dict[str, Any] = {
        "title": outcome.scenario.scenario,
        "tags": outcome.scenario.tags,
        "rounds": outcome.rounds,
        "model_calls": outcome.model_calls,
        "duration_s": round(outcome.duration, 6),
        "result": outcome.result if _jsonable(outcome.result) else repr(outcome.result),
        "error": outcome.error_text,
        "crash": outcome.crash if not verdict.passed else None,
        "failures": [
            {"title": f.title, "where": f.where, "detail": f.detail} for f in verdict.failures
        ],
        "trace": outcome.trace,
    }
    data.update(expectation_checks(verdict))  # trajectory: [...], properties: [...]
    # plain JSON now (what is printed), not the run's own objects
    return dict(json.loads(json.dumps(data, default=str)))


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
    keep: Collection[str] = (),
    keep_verdicts: bool = False,
    on_checked: Callable[[ScenarioResult, Verdict], None] | None = None,
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
    or is refused, is reported as a file that does not load.

    Each result keeps a :class:`RunSummary` of its run, and only what ``keep`` names:
    ``"json"`` its ``--json`` object, ``"report"`` its report record; ``keep_verdicts``
    keeps each whole :class:`~openprogram_sim.play.Verdict` too (its scenario, outcome and
    trace: memory grows with the files). ``on_checked(result, verdict)`` is called with
    each run once it is checked, before its verdict is let go (``--trace-out`` writes
    there)."""
    unknown = set(keep) - {"json", "report"}
    if unknown:
        raise ValueError(f"run_paths(keep=): unknown {sorted(unknown)}; known: json, report")
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
        verdict = check_outcome(outcome)
        del outcome
        result = ScenarioResult(
            file, summary=RunSummary.of(verdict), verdict=verdict if keep_verdicts else None
        )
        if "json" in keep:
            result.json_data = _json_data(verdict)
        if "report" in keep:
            from openprogram_sim.report import pack_runs, scenario_record

            shown = _relative(file, base)  # its runs kept as the page's JSON text
            result.record = pack_runs(scenario_record(verdict, id=shown, path=shown))
        if on_checked is not None:
            on_checked(result, verdict)
        del verdict  # what is kept of it is the summary (and what keep asked for)
        results.append(result)
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
    run = result.summary
    if run is None:
        reason = "KeyboardInterrupt (Ctrl-C): this run and the files after it did not finish"
        return f"INTERRUPTED {path}  ({reason})"
    mark = {"passed": "PASS ", "failed": "FAIL ", "error": "ERROR"}[result.status]
    rounds = f"{run.rounds} round{'s' if run.rounds != 1 else ''}"
    return f"{mark} {path}  {rounds:>9}  {run.duration * 1000:7.1f} ms  {run.title}"


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
        elif result.summary is not None:
            print(f"  {result.summary.title}", file=out)
            crash = result.summary.crash
            if crash is not None:
                print(f"  the run crashed: {crash}", file=out)
            for failure in result.summary.failures:
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
    traces = _TraceWriter(trace_out)
    keep = (["json"] if args.json else []) + (["report"] if args.report else [])
    try:
        results = run_paths(
            args.paths or ["scenarios"],
            keyword=args.keyword,
            tags=args.tags,
            pythonpath=args.pythonpath,
            provider=provider,
            before_each=coverage.before_each if coverage is not None else None,
            on_skip=_print_skipped if args.verbose else None,
            keep=keep,
            keep_verdicts=coverage is not None,  # RunCoverage reads each run's verdict
            on_checked=traces.write if trace_out is not None else None,
        )
    except ScenarioError as exc:
        if coverage is not None:
            coverage.measure([])  # stops coverage.py
        print(f"openprogram-sim: {exc}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - start
    behaviours = coverage.measure(results) if coverage is not None else None
    if args.json:
        _print_json(results, elapsed, coverage.json(behaviours) if coverage is not None else {})
    else:
        _print_text(results, elapsed, sys.stdout)
    floor = 0
    if coverage is not None:
        floor = coverage.finish(behaviours, results, text=not args.json, out=sys.stdout)
    if not traces.finish():
        return 2
    if args.report:
        tools = coverage.tools if coverage is not None and coverage.code is not None else None
        _write_report(results, args.report, elapsed, tool_code=tools)
    if not results:
        print("openprogram-sim: no scenario files found", file=sys.stderr)
        return 2
    return _exit_code(results, floor)


def _print_json(results: list[ScenarioResult], elapsed: float, extra: dict[str, Any]) -> None:
    """The ``--json`` payload on stdout, one scenario at a time (each scrubbed as a cassette
    is: what the model and the tools said reaches a CI log), as ``json.dump(indent=2)``
    would print the whole."""
    from openprogram_sim.cassettes import Scrubber, known_secrets

    scrub = Scrubber(known_secrets())
    summary = {s: sum(1 for r in results if r.status == s) for s in _STATUSES}
    head = {"summary": {**summary, "total": len(results), "duration_s": elapsed}}
    out = sys.stdout
    text = json.dumps(scrub.value(_plain(head)), indent=2)
    out.write(text[:-2] + ',\n  "scenarios": [')  # the object left open after "summary"
    for i, result in enumerate(results):
        item = json.dumps(scrub.value(result.to_json()), indent=2)  # plain JSON already
        out.write(("," if i else "") + "\n    " + item.replace("\n", "\n    "))
    out.write("\n  ]" if results else "]")
    for key, value in scrub.value(_plain(extra)).items():
        value_text = json.dumps(value, indent=2).replace("\n", "\n  ")
        out.write(f",\n  {json.dumps(key)}: {value_text}")
    out.write("\n}\n")


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class _TraceWriter:
    """``--trace-out``: each run's trace (and spans) written as soon as it is checked; the
    first file that cannot be written stops it, said on stderr at the end."""

    def __init__(self, out: TraceOut | None) -> None:
        self.out = out
        self.count = 0
        self.error: OSError | None = None
        self.base = Path.cwd().resolve()

    def write(self, result: ScenarioResult, verdict: Verdict) -> None:
        if self.out is None or self.error is not None:
            return
        try:
            path = _relative(result.path, self.base)
            self.count += len(self.out.write_outcome(verdict.outcome, path=path))
        except OSError as exc:
            self.error = exc

    def finish(self) -> bool:
        """Say what was written; False when a file could not be."""
        out = self.out
        if out is None:
            return True
        if self.error is not None:
            print(
                f"openprogram-sim: --trace-out {out.folder}: cannot write: {self.error}",
                file=sys.stderr,
            )
            return False
        print(
            f"openprogram-sim: {self.count} trace file(s) written to {out.folder}", file=sys.stderr
        )
        return True


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
        elif result.record is not None:
            records.append(result.record)
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
