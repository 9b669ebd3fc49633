"""``openprogram-sim distill CASSETTE``: print the scenario a cassette stands for, on the
scripted model (the recorded replies as turns, the tool results as returned; with
``--scenario``, the user's real tools stubbed with them unless ``--real-tools``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from openprogram.errors import OpenProgramError
from openprogram_sim.errors import CassetteError, ScenarioError

__all__ = ["add_parser", "command"]


def command(args: argparse.Namespace) -> int:
    from openprogram_sim.cassettes import distill_yaml
    from openprogram_sim.cassettes._persist import atomic_write

    if not Path(args.cassette).is_file():
        print(f"openprogram-sim: no cassette file {args.cassette}", file=sys.stderr)
        return 2
    try:
        text = distill_yaml(args.cassette, scenario=args.scenario, real_tools=args.real_tools)
    except (CassetteError, ScenarioError, OpenProgramError) as exc:
        print(f"openprogram-sim: {exc}", file=sys.stderr)
        return 2
    if args.output:
        atomic_write(Path(args.output), text)
        print(f"openprogram-sim: scenario written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def add_parser(sub: Any) -> None:
    distill = sub.add_parser(
        "distill",
        help="print the scenario a cassette stands for, on the scripted model",
        description="Turn CASSETTE into a scenario file: the recorded replies as scripted "
        "turns (read by the adapter's own parser), the tool results as the tools returned "
        "them, the exec arguments of the first request. With --scenario (the file it was "
        "recorded from), that file's exec, tools, steering and expect: are kept, and your "
        "real tools (python: entries, the tools of registry:) get returns: with what they "
        "returned in the session, so the file runs offline as the session went "
        "(@agentic_functions stay real: their nested turns are in the cassette).",
    )
    distill.add_argument("cassette", help="the cassette file")
    distill.add_argument(
        "--scenario", metavar="SCENARIO", help="the scenario the cassette was recorded from"
    )
    distill.add_argument(
        "--real-tools",
        action="store_true",
        help="with --scenario: leave your real tools running instead of stubbing them with "
        "what they returned (the file then tests your current code against the recorded "
        "model turns)",
    )
    distill.add_argument("-o", "--output", metavar="FILE", help="write it here (atomically)")
    distill.set_defaults(func=command)
