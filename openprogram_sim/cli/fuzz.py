"""``openprogram-sim fuzz``: a campaign of generated scenarios, the invariants checked on
each run, and a shrunk regression file on a violation. Hypothesis loads only here."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from openprogram_sim.fuzz import FuzzStats

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
    out: TextIO,
    err: TextIO,
) -> int:
    """``openprogram-sim fuzz``: run a campaign, print progress (stderr), a summary of what
    was generated and the verdict; 0 when no invariant was violated, 1 otherwise."""
    print(
        f"fuzz: {examples} generated scenarios, seed {seed}, {workers} worker(s)",
        file=out,
        flush=True,
    )
    from openprogram_sim.fuzz import run_campaign

    result = run_campaign(
        examples,
        seed,
        workers,
        regressions=regressions,
        replay_every=replay_every,
        progress=_progress_printer(examples, err),
    )
    if err.isatty():
        err.write("\n")
    for line in result.stats.summary():
        print(f"  {line}", file=out)
    print(
        f"  wall time       {result.elapsed:.1f}s, {result.runs_per_second:.0f} runs/s",
        file=out,
    )
    failure = result.failure
    if failure is None:
        print(f"no invariant violated in {result.stats.runs} runs (seed {seed})", file=out)
        return 0
    print(f"\nINVARIANT VIOLATED (chunk {failure.chunk}, seed {seed}), shrunk case:", file=out)
    for violation in failure.violations:
        print(f"  - {violation}", file=out)
    if failure.path is not None:
        print(f"regression scenario written: {failure.path} (reproduces it)", file=out)
        print(
            f"  replay: openprogram-sim run {failure.path}  (fails now; a correct loop passes it)",
            file=out,
        )
    elif failure.unexpressed is not None:
        print(
            "no regression scenario written: the violation could not be expressed as a "
            f"scenario file that fails ({failure.unexpressed})",
            file=out,
        )
    return 1


def command(args: argparse.Namespace) -> int:
    try:
        import hypothesis  # noqa: F401  (Hypothesis comes with the test extra)
    except ImportError as exc:  # Hypothesis comes with the test extra
        print(
            f"openprogram-sim fuzz needs Hypothesis ({exc}); install it: "
            "pip install 'openprogram[test]'",
            file=sys.stderr,
        )
        return 2
    if args.examples < 0 or args.workers < 1 or args.replay_every < 0:
        print(
            "openprogram-sim fuzz: --examples >= 0, --workers >= 1, --replay-every >= 0",
            file=sys.stderr,
        )
        return 2
    regressions = None if args.no_write else args.regressions
    return fuzz_command(
        args.examples,
        args.seed,
        args.workers,
        regressions,
        replay_every=args.replay_every,
        out=sys.stdout,
        err=sys.stderr,
    )


def add_parser(sub: Any) -> None:
    fuzz = sub.add_parser("fuzz", help="generate scenarios and check the loop's invariants")
    fuzz.add_argument("--examples", type=int, default=1000, help="scenarios to run (1000)")
    fuzz.add_argument("--seed", type=int, default=0, help="campaign seed (0)")
    fuzz.add_argument("--workers", type=int, default=1, help="processes to spread over (1)")
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
    fuzz.set_defaults(func=command)
