"""``openprogram-sim schema``: the JSON Schema of scenario files, for editors."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "command", "schema_text"]


def schema_text() -> str:
    """The JSON Schema of scenario files as this command prints it (and ``init`` writes it,
    and ``schema/scenario.schema.json`` holds it)."""
    from openprogram_sim.scenario import json_schema

    return json.dumps(json_schema(), indent=2) + "\n"


def command(args: argparse.Namespace) -> int:
    text = schema_text()
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def add_parser(sub: Any) -> None:
    schema = sub.add_parser("schema", help="print the JSON Schema of scenario files")
    schema.add_argument("-o", "--output", help="write to this file instead of stdout")
    schema.set_defaults(func=command)
