"""The ``--coverage*`` options of ``openprogram-sim run``: what they add to a run.

``openprogram_sim.cli.run`` calls :func:`add_arguments` on its parser and, per command,
:meth:`RunCoverage.from_args` (None when no option asks for coverage), then
:meth:`~RunCoverage.before_each` per scenario and :meth:`~RunCoverage.finish` with the
results; everything else lives here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from openprogram_sim.coverage._catalogue import UnknownBehaviourError, parse_ids

__all__ = ["RunCoverage", "add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "behaviour coverage", "which behaviours of the loop the scenarios exercise and assert"
    )
    group.add_argument(
        "--coverage",
        action="store_true",
        help="print the behaviour table (with --json: a 'behaviours' key)",
    )
    group.add_argument(
        "--suggest",
        action="store_true",
        help="with --coverage: print a starter scenario for each behaviour nothing exercises",
    )
    group.add_argument(
        "--coverage-fail-under",
        type=float,
        metavar="N",
        help="fail (exit 1) when fewer than N per cent of the behaviours are exercised",
    )
    group.add_argument(
        "--coverage-require",
        action="append",
        default=[],
        metavar="ID,...",
        help="fail (exit 1) when one of these behaviours is not exercised (repeatable)",
    )
    group.add_argument(
        "--coverage-source",
        action="append",
        default=[],
        metavar="PKG",
        help="measure your tool code with coverage.py, one context per scenario (repeatable)",
    )
    group.add_argument(
        "--coverage-data",
        default=".coverage",
        metavar="PATH",
        help="the coverage.py data file --coverage-source writes (default: .coverage)",
    )


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError, RuntimeError):
        return str(path)


class RunCoverage:
    """One ``run`` command's coverage: the options, the code measurement, the verdict."""

    def __init__(self, args: argparse.Namespace, required: list[str]) -> None:
        self.show = bool(args.coverage)
        self.suggest = bool(args.suggest)
        self.fail_under: float | None = args.coverage_fail_under
        self.required = required
        self.data_file = str(args.coverage_data)
        self.code: Any = None
        if args.coverage_source:
            from openprogram_sim.coverage._code import CodeCoverage, CoverageNotInstalledError

            sources = [s.strip() for v in args.coverage_source for s in v.split(",") if s.strip()]
            try:
                self.code = CodeCoverage(sources, self.data_file)
            except CoverageNotInstalledError as exc:
                raise ValueError(f"--coverage-source: {exc}") from None
        self.tools: list[dict[str, Any]] = []

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunCoverage | None:
        """None when no ``--coverage*`` option was given; raises ``ValueError`` (an unknown
        behaviour id, ``--suggest`` alone, ``--coverage-source`` without coverage.py) with
        the message to print."""
        wanted = (
            args.coverage,
            args.coverage_fail_under is not None,
            args.coverage_require,
            args.coverage_source,
        )
        if not any(wanted):
            if args.suggest:
                raise ValueError("--suggest goes with --coverage (it fills the table's gaps)")
            return None
        try:
            required = parse_ids(args.coverage_require)
        except UnknownBehaviourError as exc:
            raise ValueError(f"--coverage-require: {exc}") from None
        if args.coverage_fail_under is not None and not 0 <= args.coverage_fail_under <= 100:
            raise ValueError(
                f"--coverage-fail-under takes a per cent from 0 to 100, got "
                f"{args.coverage_fail_under:g}"
            )
        return cls(args, required)

    # ------------------------------------------------------------------ during the run

    def start(self) -> None:
        """Start coverage.py (``ValueError`` with the message when it cannot)."""
        from openprogram_sim.coverage._code import CoverageInUseError

        if self.code is not None:
            try:
                self.code.start()
            except CoverageInUseError as exc:
                raise ValueError(f"--coverage-source: {exc}") from None

    def before_each(self, path: Path) -> None:
        """Attribute the tool code that runs next to the scenario at ``path``."""
        if self.code is not None:
            self.code.switch(_relative(path))

    # ------------------------------------------------------------------ after it

    def measure(self, results: Sequence[Any]) -> Any:
        """Stop measuring, and classify every scenario that ran."""
        from openprogram_sim.coverage._summary import BehaviourCoverage, behaviours_of

        coverage = BehaviourCoverage()
        for result in results:
            if result.verdict is not None:
                coverage.add(_relative(result.path), behaviours_of(result.verdict.outcome))
        if self.code is not None:
            self.code.stop()
            self.tools = self._tool_code(results)
        return coverage

    def _tool_code(self, results: Sequence[Any]) -> list[dict[str, Any]]:
        from openprogram_sim.coverage._code import tool_code, tool_locations

        scenarios = [r.verdict.outcome.scenario for r in results if r.verdict is not None]
        return tool_code(self.data_file, tool_locations(scenarios))

    def json(self, coverage: Any) -> dict[str, Any]:
        """What ``--json`` adds: ``behaviours`` (and ``tools`` with ``--coverage-source``)."""
        data: dict[str, Any] = coverage.to_json()
        if self.code is not None:
            data["tools"] = [{k: v for k, v in t.items() if k != "source"} for t in self.tools]
            data["coverage_data"] = self.data_file
        return data

    def finish(self, coverage: Any, results: Sequence[Any], *, text: bool, out: TextIO) -> int:
        """Print the table (and starters) when asked, and check the floor: 1 when it does
        not hold (the reasons on stderr), else 0."""
        if text and self.show:
            print(f"\n{coverage.table()}", file=out)
        if text and self.code is not None:
            from openprogram_sim.coverage._code import code_table

            print(f"\n{code_table(self.tools, self.data_file)}", file=out)
        if self.suggest:
            self._print_starters(coverage, results, out if text else sys.stderr)
        problems = coverage.failures(fail_under=self.fail_under, require=self.required)
        for problem in problems:
            print(f"openprogram-sim: {problem}", file=sys.stderr)
        return 1 if problems else 0

    def _print_starters(self, coverage: Any, results: Sequence[Any], out: TextIO) -> None:
        from openprogram_sim.coverage._suggest import suggest

        scenarios = [r.verdict.outcome.scenario for r in results if r.verdict is not None]
        starters = suggest(coverage.missing, scenarios)
        if not starters:
            print("\nevery behaviour of the catalogue is exercised: nothing to suggest", file=out)
        else:
            print(
                "\n# each starter's $schema line expects the JSON Schema at "
                "schema/scenario.schema.json beside scenarios/ (write it with "
                "`openprogram-sim schema > schema/scenario.schema.json`)",
                file=out,
            )
        for id, text in starters:
            print(f"\n# ---- starter for {id} (save it as e.g. scenarios/{id}.yaml) ----", file=out)
            out.write(text)
