"""The pytest plugin's command-line options (group ``openprogram``), in one place.

Only pytest and the standard library are imported here: the plugin loads at every pytest
start-up.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["add_options"]


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("openprogram", "openprogram scenarios and reports")
    group.addoption(
        "--openprogram-scenarios",
        dest="openprogram_scenarios",
        nargs="*",
        metavar="PATHS",
        default=None,
        help="collect every scenario file (*.yaml, *.yml) under PATHS as a test "
        "(default: scenarios/). Put it last, or use --openprogram-scenarios=PATH.",
    )
    group.addoption(
        "--openprogram-report",
        dest="openprogram_report",
        metavar="PATH",
        default=None,
        help="write a self-contained HTML report of scenarios and traced tests to PATH",
    )
    _add_coverage_options(group)
    _add_cassette_options(group)
    _add_fuzz_options(group)


def _add_fuzz_options(group: Any) -> None:
    group.addoption(
        "--openprogram-fuzz",
        dest="openprogram_fuzz",
        type=int,
        metavar="N",
        default=None,
        help="add a fuzz campaign of N generated scenarios as test items, one per chunk "
        "(pytest-xdist spreads them; the same seed gives the same cases on any worker)",
    )
    group.addoption(
        "--openprogram-fuzz-seed",
        dest="openprogram_fuzz_seed",
        type=int,
        default=0,
        metavar="S",
        help="the campaign's seed (0)",
    )
    group.addoption(
        "--openprogram-fuzz-chunk",
        dest="openprogram_fuzz_chunk",
        type=int,
        default=250,
        metavar="K",
        help="scenarios per item (250); part of the campaign's identity, like the seed",
    )
    group.addoption(
        "--openprogram-fuzz-regressions",
        dest="openprogram_fuzz_regressions",
        default=None,
        metavar="DIR",
        help="write a shrunk failing case as a regression scenario file under DIR",
    )


def _add_coverage_options(group: Any) -> None:
    group.addoption(
        "--openprogram-coverage",
        dest="openprogram_coverage",
        action="store_true",
        default=False,
        help="print which behaviours of the loop the scenarios exercise and assert",
    )
    group.addoption(
        "--openprogram-coverage-json",
        dest="openprogram_coverage_json",
        metavar="PATH",
        default=None,
        help="write the behaviour coverage as JSON to PATH",
    )
    group.addoption(
        "--openprogram-coverage-fail-under",
        dest="openprogram_coverage_fail_under",
        type=float,
        metavar="N",
        default=None,
        help="fail the session when fewer than N per cent of the behaviours are exercised",
    )
    group.addoption(
        "--openprogram-coverage-require",
        dest="openprogram_coverage_require",
        action="append",
        metavar="ID,...",
        default=[],
        help="fail the session when one of these behaviours is not exercised (repeatable)",
    )
    group.addoption(
        "--openprogram-coverage-source",
        dest="openprogram_coverage_source",
        action="append",
        metavar="PKG",
        default=[],
        help="measure your tool code with coverage.py, one context per scenario (repeatable)",
    )
    group.addoption(
        "--openprogram-coverage-data",
        dest="openprogram_coverage_data",
        metavar="PATH",
        default=".coverage",
        help="the coverage.py data file --openprogram-coverage-source writes",
    )


def _add_cassette_options(group: Any) -> None:
    group.addoption(
        "--openprogram-record-mode",
        dest="openprogram_record_mode",
        choices=("none", "once", "new_episodes", "all"),
        default="none",
        help="how the openprogram_cassette fixture treats its cassette: none (default) "
        "replays only; once records a missing cassette; new_episodes records what the "
        "cassette cannot answer; all records everything again. Always none when CI is set.",
    )
