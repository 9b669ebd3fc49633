"""``openprogram-sim fuzz``: a campaign of generated scenarios, the invariants checked on
each run, and a shrunk regression file on a violation. Hypothesis loads only here.

With ``--registry REF`` or ``--tools REF,REF`` the scenarios call *your* tools (imported as
``openprogram-sim run`` imports them: the current directory, ``[tool.openprogram]
pythonpath``, ``--pythonpath``) with arguments valid and invalid for their schemas, each run
in a sandbox process under ``--timeout`` seconds, and the tool contract is checked too.

With ``--agent CMD`` or ``--agent module:function`` any agent is fuzzed over the wire: one
session per example with a drawn script, the client checks and ``--properties`` on each,
the first failure shrunk to a file ``openprogram-sim serve`` replays (see
:mod:`openprogram_sim.fuzz.agent`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

from openprogram_sim.cli._arguments import add_pythonpath
from openprogram_sim.cli.serve import CLIENT_CHECKS

if TYPE_CHECKING:
    from openprogram_sim.fuzz import CampaignResult, FuzzStats, ToolTarget, UserProperties
    from openprogram_sim.fuzz.agent import AgentCampaignResult, AgentTarget, Discovery
    from openprogram_sim.fuzz.tools import SearchOptions, UserOptions

__all__ = ["add_parser", "agent_command", "command", "fuzz_command"]

EXAMPLES = 1000
AGENT_EXAMPLES = 100
"""``--examples``'s default: generated runs, sessions of an agent."""
TOOL_TIMEOUT = 2.0
AGENT_TIMEOUT = 30.0
"""``--timeout``'s default: a run over your tools, one run of an agent."""
REGRESSIONS = "scenarios/regressions"


def _progress_printer(total: int, err: TextIO, unit: str = "runs") -> Any:
    tty = err.isatty()
    state = {"next": 0.0}

    def show(stats: FuzzStats, elapsed: float) -> None:
        rate = stats.runs / elapsed if elapsed else 0.0
        shown = f"{rate:.0f}" if rate >= 10 or unit == "runs" else f"{rate:.1f}"
        line = f"fuzz: {stats.runs}/{total} {unit}, {elapsed:.1f}s, {shown} {unit}/s"
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
    if args.agent is not None:
        args.examples = AGENT_EXAMPLES if args.examples is None else args.examples
        return agent_command(args, out=sys.stdout, err=sys.stderr)
    args.examples = EXAMPLES if args.examples is None else args.examples
    if (
        args.examples < 0
        or (args.workers is not None and args.workers < 1)
        or args.replay_every < 0
        or (args.timeout is not None and not args.timeout > 0)
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
        _agent_only(args)
    except (PythonRefError, TargetError, SearchError, ValueError, CheckFileError) as exc:
        print(f"openprogram-sim fuzz: {exc}", file=sys.stderr)
        return 2
    regressions = None if args.no_write else (args.regressions or REGRESSIONS)
    return fuzz_command(
        args.examples,
        args.seed,
        _workers(args.workers, target),
        regressions,
        replay_every=args.replay_every,
        target=target,
        timeout=TOOL_TIMEOUT if args.timeout is None else args.timeout,
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
    fuzz.add_argument(
        "--examples",
        type=int,
        default=None,
        help="scenarios to run (1000; with --agent: sessions, 100)",
    )
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
        default=None,
        metavar="DIR",
        help="where a shrunk failing case is written (scenarios/regressions; with --agent: "
        "agent-regressions)",
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
        default=None,
        metavar="SECONDS",
        help="real time a run may take; a tool that hangs breaks the contract (2); with "
        "--agent: one run of the agent, past it a finding (30)",
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
    _add_agent_arguments(fuzz)
    fuzz.set_defaults(func=command)


# --------------------------------------------------------------------------- --agent

_AGENT_ONLY = ("faults", "no_check", "max_retries", "shrink_time")
_NOT_WITH_AGENT = ("registry", "tools", "workers", *_TOOL_ONLY)


def _agent_only(args: argparse.Namespace) -> None:
    given = [n for n in _AGENT_ONLY if getattr(args, n) not in (None, [])]
    if given:
        flags = ", ".join("--" + n.replace("_", "-") for n in given)
        raise ValueError(f"{flags} apply to fuzzing an agent (--agent CMD|module:function)")


def _agent_refusals(args: argparse.Namespace) -> str | None:
    """What ``--agent`` cannot be combined with, or a bad number (None: all is well)."""
    defaults = {"backend": "hypothesis", "coverage_guided": False}
    given = [n for n in _NOT_WITH_AGENT if getattr(args, n) not in (None, [], defaults.get(n))]
    if given:
        flags = ", ".join("--" + n.replace("_", "-") for n in given)
        return f"{flags} do not apply with --agent (an agent is fuzzed one session at a time)"
    if args.examples < 0 or (args.timeout is not None and not args.timeout > 0):
        return "--examples >= 0 and --timeout > 0"
    if args.shrink_time is not None and args.shrink_time < 0:
        return "--shrink-time >= 0"
    return None


def _faults(text: str | None) -> tuple[str, ...]:
    from openprogram_sim.fuzz.agent import FAULT_KINDS

    if text is None:
        return FAULT_KINDS
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if names in ((), ("none",)):
        return ()
    unknown = [n for n in names if n not in FAULT_KINDS]
    if unknown:
        raise ValueError(
            f"--faults {text}: unknown fault {', '.join(unknown)}; use some of "
            f"{', '.join(FAULT_KINDS)} (comma-separated) or none"
        )
    return names


def agent_command(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """``openprogram-sim fuzz --agent CMD|module:function``: discover the agent's tools, run
    the campaign, print progress (``err``), the summary and the verdict (``out``); 0 when no
    session failed, 1 on a failure, 2 when the agent cannot be fuzzed as given."""
    from openprogram_sim.cli.check import CheckFileError
    from openprogram_sim.fuzz.agent import DEFAULT_REGRESSIONS, AgentError, AgentTarget
    from openprogram_sim.wire import ClientChecks

    problem = _agent_refusals(args)
    if problem is not None:
        print(f"openprogram-sim fuzz: {problem}", file=err)
        return 2
    try:
        properties = _properties(args.properties)
        faults = _faults(args.faults)
        checks = ClientChecks(off=frozenset(args.no_check), max_retries=args.max_retries)
        target = AgentTarget.load(args.agent, pythonpath=args.pythonpath)
    except (AgentError, ValueError, CheckFileError) as exc:
        print(f"openprogram-sim fuzz: {exc}", file=err)
        return 2
    timeout = AGENT_TIMEOUT if args.timeout is None else args.timeout
    regressions = None if args.no_write else (args.regressions or DEFAULT_REGRESSIONS)
    print(
        f"fuzz: {args.examples} sessions of {target.label}, seed {args.seed}, "
        f"{timeout:g} s per run of the agent",
        file=out,
        flush=True,
    )
    try:
        result = _run_agent(args, target, timeout, regressions, properties, faults, checks,
                            out=out, err=err)  # fmt: skip
    except AgentError as exc:
        if err.isatty():
            err.write("\n")
        print(f"openprogram-sim fuzz: {exc}", file=err)
        return 2
    except KeyboardInterrupt:  # the agent's process was ended with the campaign
        print("\nopenprogram-sim fuzz: interrupted, no verdict", file=err)
        return 130
    if err.isatty():
        err.write("\n")
    return _agent_verdict(result, target, out)


def _run_agent(
    args: argparse.Namespace, target: AgentTarget, timeout: float, regressions: str | None,
    properties: UserProperties | None, faults: tuple[str, ...], checks: Any, *,
    out: TextIO, err: TextIO,
) -> AgentCampaignResult:  # fmt: skip
    from openprogram_sim.fuzz.agent import run_agent_campaign

    def discovered(found: Discovery) -> None:
        how = "streaming" if found.stream else "not streaming"
        names = ", ".join(t.name for t in found.tools) or "none (scripts draw texts and faults)"
        print(f"  the agent speaks {found.api} ({how}); its tools: {names}", file=out, flush=True)

    shrink = 120.0 if args.shrink_time is None else args.shrink_time
    return run_agent_campaign(
        target, args.examples, args.seed, regressions=regressions, timeout=timeout,
        properties=properties, faults=faults, client_checks=checks, shrink_time=shrink,
        progress=_progress_printer(args.examples, err, "sessions"), on_discovery=discovered,
    )  # fmt: skip


def _agent_heading(result: AgentCampaignResult) -> str:
    failure = result.failure
    assert failure is not None
    if failure.run.outcome == "timeout":
        return "AGENT TIMED OUT"
    if failure.run.outcome == "failed":
        return "AGENT FAILED"
    if any(v.startswith("client check") for v in failure.violations):
        return "CLIENT CHECK BROKEN"
    if failure.broke_properties:
        return "PROPERTY BROKEN"
    return "SESSION FAILED"


def _agent_verdict(result: AgentCampaignResult, target: AgentTarget, out: TextIO) -> int:
    for line in result.stats.summary():
        print(f"  {line}", file=out)
    print(
        f"  wall time       {result.elapsed:.1f}s, {result.runs_per_second:.1f} sessions/s",
        file=out,
    )
    failure = result.failure
    if failure is None:
        print(f"no failure in {result.stats.runs} sessions (seed {result.seed})", file=out)
        return 0
    print(f"\n{_agent_heading(result)} (seed {result.seed}), shrunk case:", file=out)
    for violation in failure.violations:
        print(f"  - {violation}", file=out)
    if failure.run.detail and failure.run.outcome != "ok":
        print("  the agent's last words:", file=out)
        for line in failure.run.detail.splitlines()[-6:]:
            print(f"    {line}", file=out)
    print("  script served:", file=out)
    for i, turn in enumerate(failure.turns, start=1):
        print(f"    {i}. {json.dumps(turn, ensure_ascii=False)}", file=out)
    if failure.path is not None:
        print(f"regression scenario written: {failure.path} (served again to the agent, it "
              "fails)", file=out)  # fmt: skip
        print(
            f"  replay: openprogram-sim serve {failure.path} --port 8124, then run the agent "
            "on http://127.0.0.1:8124/s/replay (the file's header gives the lines; fails "
            "now, passes once fixed)",
            file=out,
        )
    elif failure.unexpressed is not None:
        print(f"no regression scenario written: {failure.unexpressed}", file=out)
    return 1


def _add_agent_arguments(fuzz: Any) -> None:
    agent = fuzz.add_argument_group(
        "any agent",
        "fuzz an agent over the wire: a session per example, its script drawn from the tools "
        "the agent declares (docs/fuzzing.md, Fuzzing any agent)",
    )
    agent.add_argument(
        "--agent",
        metavar="CMD|module:function",
        help="the agent: a command run per session with the session's base URLs and a "
        "placeholder key in OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL, "
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME and the key variables; or a Python function "
        "fn(endpoints), called in process (much faster)",
    )
    agent.add_argument(
        "--faults",
        metavar="LIST",
        help="faults the scripts serve, comma-separated: rate_limit (429 with retry-after), "
        "stream_error, cut; or none (default: all three)",
    )
    agent.add_argument(
        "--no-check",
        action="append",
        default=[],
        choices=CLIENT_CHECKS,
        metavar="NAME",
        help="do not check this client invariant on the sessions (repeatable): "
        + ", ".join(CLIENT_CHECKS),
    )
    agent.add_argument(
        "--max-retries",
        type=int,
        default=None,
        metavar="N",
        help="retries of one request in a row the max_retries invariant allows (4)",
    )
    agent.add_argument(
        "--shrink-time",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long a failing session is shrunk at most (120)",
    )
