"""The ``openprogram-sim`` parser and entry point; each subcommand lives in its own module."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from openprogram_sim.cli import check, distill, eval, fuzz, init, record, run, schema, serve

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="openprogram-sim",
        description="Run and inspect openprogram scenario files on the built-in simulator.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (run, schema, init, fuzz, serve, record, distill, check, eval):
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokenPipeError:
        # the reader went away (`... | head`): not an error of ours; silence the flush at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code
