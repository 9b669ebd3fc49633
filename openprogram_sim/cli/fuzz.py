"""``openprogram-sim fuzz``: a campaign of generated scenarios, the invariants checked on
each run, and a shrunk regression file on a violation. Hypothesis loads only here.

With ``--registry REF`` or ``--tools REF,REF`` the scenarios call *your* tools (imported as
``openprogram-sim run`` imports them: the current directory, ``[tool.openprogram]
pythonpath``, ``--pythonpath``) with arguments valid and invalid for their schemas, each run
in a sandbox process under ``--timeout`` seconds, and the tool contract is checked too."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

from openprogram_sim.cli._arguments import add_pythonpath

if TYPE_CHECKING:
    from openprogram_sim.fuzz import CampaignResult, FuzzStats, ToolTarget, UserProperties
    from openprogram_sim.fuzz.tools import SearchOptions, UserOptions

__all__ = ["add_parser", "command", "fuzz_command"]


def _progress_printer(total: int, err: TextIO) -> Any:
    tty = err.isatty()
    state = {"next": 0.0}

    def show(stats: FuzzStats, elapsed: float) -> None:
        rate = stats.runs / elapsed if elapsed else 0.0
        line = f"fuzz: {stats.runs}/{total} runs, {elapsed:.1f}s, {rate:.0f} runs/s"
        if tty:
            err.write(f"\r{line}   ")
        elif elapsed >= state["next"] or stats.runs >= total:
            state["next"] = elapsed + 10.0  # a line every 10 s in logs
            err.write(line + "\n")
        err.flush()

    return show


def fuzz_command(
    examples: int,
    seed: int,
    workers: int,
    regressions: str | None,
    *,
    replay_every: int = 4,
    target: ToolTarget | None = None,
    timeout: float = 2.0,
    options: UserOptions | None = None,
    search: SearchOptions | None = None,
    properties: UserProperties | None = None,
    out: TextIO,
    err: TextIO,
) -> int:
    """``openprogram-sim fuzz``: run a campaign (over ``target``'s tools when given), print
    progress (stderr), a summary of what was generated and the verdict; 0 when nothing broke,
    1 otherwise."""
    from openprogram_sim.fuzz import run_campaign, run_tool_campaign

    progress = _progress_printer(examples, err)
    if target is None:
        print(f"fuzz: {examples} generated scenarios, seed {seed}, {workers} worker(s)",
              file=out, flush=True)  # fmt: skip
        result = run_campaign(examples, seed, workers, regressions=regressions,
                              replay_every=replay_every, progress=progress,
                              properties=properties)  # fmt: skip
    else:
        names = ", ".join(target.names)
        how = _search_label(search)
        print(
            f"fuzz: {examples} generated scenarios over {target.label} ({names}), seed {seed}, "
            f"{workers} worker(s), {timeout:g} s per run{how}",
            file=out,
            flush=True,
        )
        for _, why in target.skipped:  # a tool whose schema cannot be drawn from
            print(f"  {why}", file=out)
        result = run_tool_campaign(target, examples, seed, workers, regressions=regressions,
                                   timeout=timeout, progress=progress, options=options,
                                   search=search, properties=properties)  # fmt: skip
    if err.isatty():
        err.write("\n")
    return _verdict(result, seed, target, out)


def _search_label(search: SearchOptions | None) -> str:
    if search is None:
        return ""
    parts = [f"backend {search.backend}"] if search.backend != "hypothesis" else []
    parts += ["coverage-guided"] if search.coverage_guided else []
    parts += [f"database {search.database}"] if search.database else []
    return "".join(f", {p}" for p in parts)


def _valid_calls(stats: FuzzStats, target: ToolTarget) -> list[str]:
    """How many valid calls each tool got (its arguments passed validation), and which none."""
    got = ", ".join(f"{name} {stats.valid[name]}" for name in target.names if stats.valid[name])
    none = [name for name in target.names if not stats.valid[name]]
    lines = [f"valid calls     {got or 'none'}"]
    if none:
        lines.append(f"  no valid call {', '.join(none)}")
    return lines


def _verdict(result: CampaignResult, seed: int, target: ToolTarget | None, out: TextIO) -> int:
    lines = result.stats.summary()
    if target is not None:
        lines[4:4] = _valid_calls(result.stats, target)
    for line in lines:
        print(f"  {line}", file=out)
    print(
        f"  wall time       {result.elapsed:.1f}s, {result.runs_per_second:.0f} runs/s",
        file=out,
    )
    failure = result.failure
    what = "invariant violated" if target is None else "invariant or tool contract broken"
    if failure is None:
        print(f"no {what} in {result.stats.runs} runs (seed {seed})", file=out)
        return 0
    heading = "INVARIANT VIOLATED" if failure.breach is None else "TOOL CONTRACT BROKEN"
    if failure.broke_properties:
        heading = "PROPERTY BROKEN"
    print(f"\n{heading} (chunk {failure.chunk}, seed {seed}), shrunk case:", file=out)
    for violation in failure.violations:
        print(f"  - {violation}", file=out)
    if failure.path is not None:
        print(f"regression scenario written: {failure.path} (reproduces it)", file=out)
        extra = "".join(f" --pythonpath {p}" for p in target.pythonpath) if target else ""
        fixed = "a correct loop" if target is None else "a tool that keeps the contract"
        if failure.broke_properties:
            fixed = "passes once the runs keep your properties"
        else:
            fixed += " passes it"
        print(
            f"  replay: openprogram-sim run {failure.path}{extra}  (fails now; {fixed})",
            file=out,
        )
    elif failure.unexpressed is not None:
        what = "violation" if failure.breach is None else "breach"
        print(
            f"no regression scenario written: the {what} could not be expressed as a "
            f"scenario file that fails ({failure.unexpressed})",
            file=out,
        )
    return 1


def _target(args: argparse.Namespace) -> ToolTarget | None:
    """The tools ``--registry``/``--tools`` name (None: the built-in generated tools)."""
    tools = [r.strip() for r in (args.tools or "").split(",") if r.strip()]
    if not args.registry and not tools:
        return None
    from openprogram_sim.fuzz import ToolTarget

    return ToolTarget.load(registry=args.registry, tools=tools, pythonpath=args.pythonpath)


def command(args: argparse.Namespace) -> int:
    try:
        import hypothesis  # noqa: F401  (Hypothesis comes with the fuzz and test extras)
    except ImportError as exc:
        print(
            f"openprogram-sim fuzz needs Hypothesis ({exc}); install it: "
            "pip install 'openprogram-sim[fuzz]'",
            file=sys.stderr,
        )
        return 2
    if (
        args.examples < 0
        or (args.workers is not None and args.workers < 1)
        or args.replay_every < 0
        or not args.timeout > 0
    ):
        print(
            "openprogram-sim fuzz: --examples >= 0, --workers >= 1, --replay-every >= 0, "
            "--timeout > 0",
            file=sys.stderr,
        )
        return 2
    from openprogram_sim.cli.check import CheckFileError
    from openprogram_sim.fuzz import TargetError
    from openprogram_sim.fuzz.tools import SearchError
    from openprogram_sim.scenario._python import PythonRefError

    try:
        properties = _properties(args.properties)
        target = _target(args)
        options, search = _tool_options(args, target)
    except (PythonRefError, TargetError, SearchError, ValueError, CheckFileError) as exc:
        print(f"openprogram-sim fuzz: {exc}", file=sys.stderr)
        return 2
    regressions = None if args.no_write else args.regressions
    return fuzz_command(
        args.examples,
        args.seed,
        _workers(args.workers, target),
        regressions,
        replay_every=args.replay_every,
        target=target,
        timeout=args.timeout,
        options=options,
        search=search,
        properties=properties,
        out=sys.stdout,
        err=sys.stderr,
    )


def _properties(path: str | None) -> UserProperties | None:
    """``--properties FILE`` read and checked (``CheckFileError`` names the file and line)."""
    if path is None:
        return None
    from openprogram_sim.cli.check import read_expectations
    from openprogram_sim.fuzz import UserProperties

    found = read_expectations(path)
    return UserProperties.of(found.rules, where=found.lines, trajectory=found.trajectory,
                             trajectory_where=found.trajectory_where)  # fmt: skip


def _workers(given: int | None, target: ToolTarget | None) -> int:
    """``--workers``, or its default: one for the loop campaign (one process runs it at full
    speed), two (at most the cores) for a campaign over your tools, whose workers each wait
    on their sandbox half the time."""
    if given is not None:
        return given
    if target is None:
        return 1
    from openprogram_sim.fuzz.tools import DEFAULT_WORKERS

    return max(1, min(DEFAULT_WORKERS, os.cpu_count() or 1))


_TOOL_ONLY = ("backend", "coverage_guided", "database", "setup", "teardown",
              "unknown_tool_rate", "invalid_args_rate")  # fmt: skip


def _tool_options(
    args: argparse.Namespace, target: ToolTarget | None
) -> tuple[UserOptions | None, SearchOptions | None]:
    """The generation and search options of a campaign over your tools (checked: a
    ``SearchError`` or ``ValueError`` says what is wrong)."""
    defaults = {"backend": "hypothesis", "coverage_guided": False}
    if target is None:
        given = [n for n in _TOOL_ONLY if getattr(args, n) not in (None, [], defaults.get(n))]
        if given:
            flags = ", ".join("--" + n.replace("_", "-") for n in given)
            raise ValueError(f"{flags} apply to a campaign over your tools (--registry/--tools)")
        return None, None
    from openprogram_sim.fuzz.tools import SearchOptions, UserOptions

    rates = {n: getattr(args, n) for n in ("unknown_tool_rate", "invalid_args_rate")}
    options = UserOptions(**{k: v for k, v in rates.items() if v is not None})
    search = SearchOptions(
        backend=args.backend,
        coverage_guided=args.coverage_guided,
        database=args.database,
        setup=tuple(_refs(args.setup)),
        teardown=tuple(_refs(args.teardown)),
    )
    return options, search.checked()


def _refs(values: list[str]) -> list[str]:
    return [r.strip() for value in values for r in value.split(",") if r.strip()]


def add_parser(sub: Any) -> None:
    fuzz = sub.add_parser("fuzz", help="generate scenarios and check the loop's invariants")
    fuzz.add_argument("--examples", type=int, default=1000, help="scenarios to run (1000)")
    fuzz.add_argument("--seed", type=int, default=0, help="campaign seed (0)")
    fuzz.add_argument(
        "-j",
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="processes to spread over (1; with --registry/--tools: 2, at most the cores)",
    )
    fuzz.add_argument(
        "--replay-every",
        type=int,
        default=4,
        metavar="N",
        help="run every N-th scenario twice and compare traces (4; 0: never)",
    )
    fuzz.add_argument(
        "--regressions",
        default="scenarios/regressions",
        metavar="DIR",
        help="where a shrunk failing case is written (scenarios/regressions)",
    )
    fuzz.add_argument("--no-write", action="store_true", help="do not write a regression file")
    fuzz.add_argument(
        "--properties",
        metavar="FILE",
        help="YAML: your own rules (properties:, as expect.properties) and optionally a "
        "trajectory:, checked on every run as invariants",
    )
    yours = fuzz.add_argument_group(
        "your own tools", "call your tools with arguments valid and invalid for their schemas"
    )
    yours.add_argument("--registry", metavar="REF", help="your ToolRegistry: pkg.module:registry")
    yours.add_argument(
        "--tools",
        metavar="REF[,REF...]",
        help="your tools (pkg.module:tool) or modules of tools (pkg.module), comma-separated",
    )
    add_pythonpath(yours, "tools")
    yours.add_argument(
        "--timeout",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="real time a run may take; a tool that hangs breaks the contract (2)",
    )
    yours.add_argument(
        "--unknown-tool-rate",
        type=float,
        metavar="SHARE",
        help="share of calls to tools that do not exist, 0 to 1 (0.05)",
    )
    yours.add_argument(
        "--invalid-args-rate",
        type=float,
        metavar="SHARE",
        help="share of calls with arguments invalid for the schema, 0 to 1 (0.1)",
    )
    yours.add_argument(
        "--setup",
        action="append",
        default=[],
        metavar="REF",
        help="your callable run before each generated run, pkg.module:fn (repeatable): "
        "resets what your tools keep, as one process serves many runs",
    )
    yours.add_argument(
        "--teardown",
        action="append",
        default=[],
        metavar="REF",
        help="your callable run after each generated run (repeatable)",
    )
    deeper = fuzz.add_argument_group(
        "deeper search and shared campaigns", "see docs/fuzzing.md for when to use which"
    )
    deeper.add_argument(
        "--backend",
        choices=["hypothesis", "crosshair"],
        default="hypothesis",
        help="how choices are made: Hypothesis's random generation (hypothesis), or "
        "CrossHair's solver (crosshair; pip install 'openprogram-sim[crosshair]')",
    )
    deeper.add_argument(
        "--coverage-guided",
        action="store_true",
        help="steer generation toward runs that execute more lines of your tools' code",
    )
    deeper.add_argument(
        "--database",
        metavar="DIR|redis://HOST:PORT/DB",
        help="Hypothesis example database shared by campaigns over the same tools: saved "
        "failures replay first (redis: pip install 'openprogram-sim[redis]')",
    )
    fuzz.set_defaults(func=command)
