"""Arguments that several subcommands take, declared once so that their spelling and help
read the same in every ``--help``."""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["add_pythonpath"]

_PYTHONPATH_HELP = {
    "tools": "a folder your tools are imported from (repeatable; also [tool.openprogram] "
    "pythonpath in pyproject.toml)",
    "scenario": "a folder the scenario's own Python is imported from (repeatable)",
}


def add_pythonpath(parser: Any, imports: Literal["tools", "scenario"]) -> None:
    """``--pythonpath DIR`` (repeatable, into ``args.pythonpath``): where the user's own code
    is imported from; ``imports`` says whose code the help names."""
    parser.add_argument(
        "--pythonpath",
        action="append",
        default=[],
        metavar="DIR",
        help=_PYTHONPATH_HELP[imports],
    )
