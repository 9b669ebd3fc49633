"""The pytest plugin's command-line options (group ``openprogram``), in one place.

Only pytest and the standard library are imported here: the plugin loads at every pytest
start-up.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["add_options"]

# One row an option, in --help order; each option's dest is its name in snake case
# (``--openprogram-fuzz-seed`` -> ``openprogram_fuzz_seed``), which the plugin reads.
_OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "--openprogram-scenarios",
        dict(
            nargs="*",
            metavar="PATHS",
            default=None,
            help="collect every scenario file (*.yaml, *.yml) under PATHS as a test "
            "(default: scenarios/). Put it last, or use --openprogram-scenarios=PATH.",
        ),
    ),
    (
        "--openprogram-report",
        dict(
            metavar="PATH",
            default=None,
            help="write a self-contained HTML report of scenarios and traced tests to PATH",
        ),
    ),
    # traces out
    (
        "--openprogram-trace-out",
        dict(
            metavar="DIR",
            default=None,
            help="write each scenario run's trace to DIR as JSON, one file a scenario "
            "(openprogram-sim check reads it)",
        ),
    ),
    (
        "--openprogram-otel",
        dict(
            action="store_true",
            default=False,
            help="with --openprogram-trace-out: also write each run as OpenTelemetry GenAI "
            "spans (OTLP JSON; needs the otel extra)",
        ),
    ),
    # coverage
    (
        "--openprogram-coverage",
        dict(
            action="store_true",
            default=False,
            help="print which behaviours of the loop the scenarios exercise and assert",
        ),
    ),
    (
        "--openprogram-coverage-json",
        dict(metavar="PATH", default=None, help="write the behaviour coverage as JSON to PATH"),
    ),
    (
        "--openprogram-coverage-fail-under",
        dict(
            type=float,
            metavar="N",
            default=None,
            help="fail the session when fewer than N per cent of the behaviours are exercised",
        ),
    ),
    (
        "--openprogram-coverage-require",
        dict(
            action="append",
            metavar="ID,...",
            default=[],
            help="fail the session when one of these behaviours is not exercised (repeatable)",
        ),
    ),
    (
        "--openprogram-coverage-source",
        dict(
            action="append",
            metavar="PKG",
            default=[],
            help="measure your tool code with coverage.py, one context per scenario (repeatable)",
        ),
    ),
    (
        "--openprogram-coverage-data",
        dict(
            metavar="PATH",
            default=".coverage",
            help="the coverage.py data file --openprogram-coverage-source writes",
        ),
    ),
    # cassettes
    (
        "--openprogram-record-mode",
        dict(
            choices=("none", "once", "new_episodes", "all"),
            default="none",
            help="how the openprogram_cassette fixture treats its cassette: none (default) "
            "replays only; once records a missing cassette; new_episodes records what the "
            "cassette cannot answer; all records everything again. Always none when CI is "
            "set.",
        ),
    ),
    # evals against a real model
    (
        "--openprogram-eval",
        dict(
            metavar="PROVIDER:MODEL",
            default=None,
            help="run the scenario items as evals against a real model (e.g. "
            "openai:gpt-4o-mini; the key from the usual environment variable): each item "
            "samples its scenario up to --openprogram-samples times and passes on the "
            "verdict of the sequential test (as openprogram-sim eval does)",
        ),
    ),
    (
        "--openprogram-samples",
        dict(type=int, metavar="N", default=None, help="the most samples per scenario (10)"),
    ),
    (
        "--openprogram-threshold",
        dict(
            type=float,
            metavar="P",
            default=None,
            help="the pass rate a scenario must clear (default: every sample must pass)",
        ),
    ),
    (
        "--openprogram-confidence",
        dict(
            type=float,
            metavar="C",
            default=None,
            help="the confidence of the intervals and the verdict (0.95)",
        ),
    ),
    (
        "--openprogram-base-url",
        dict(
            metavar="URL",
            default=None,
            help="the adapter's base URL; {sample} in it is replaced by a name per sample "
            "(a wire server's session: http://127.0.0.1:PORT/s/{sample}/v1)",
        ),
    ),
    (
        "--openprogram-no-early-stop",
        dict(
            action="store_true",
            default=False,
            help="take every sample and decide once at the end",
        ),
    ),
    (
        "--openprogram-eval-out",
        dict(
            metavar="DIR",
            default=None,
            help="where each sample's cassette and the regressions are written (reports/eval)",
        ),
    ),
    (
        "--openprogram-eval-timeout",
        dict(
            type=float,
            metavar="SECONDS",
            default=None,
            help="real time each sample's run may take (120)",
        ),
    ),
    (
        "--openprogram-concurrency",
        dict(
            type=int,
            metavar="K",
            default=None,
            help="samples of a scenario run at once (1); the verdict is read from the "
            "samples in the order they started",
        ),
    ),
    (
        "--openprogram-max-retries",
        dict(
            type=int,
            metavar="N",
            default=None,
            help="retries of a model call refused with HTTP 429 or 5xx (4), retry-after honoured",
        ),
    ),
    (
        "--openprogram-budget",
        dict(
            type=float,
            metavar="USD",
            default=None,
            help="dollars each scenario's eval may spend (no sample is started whose "
            "estimated cost would pass it)",
        ),
    ),
    (
        "--openprogram-pricing",
        dict(
            action="append",
            metavar="FILE",
            default=[],
            help="a TOML price table over the bundled one (repeatable, later wins)",
        ),
    ),
    # fuzz
    (
        "--openprogram-fuzz",
        dict(
            type=int,
            metavar="N",
            default=None,
            help="add a fuzz campaign of N generated scenarios as test items, one per chunk "
            "(pytest-xdist spreads them; the same seed gives the same cases on any worker)",
        ),
    ),
    (
        "--openprogram-fuzz-seed",
        dict(type=int, default=0, metavar="S", help="the campaign's seed (0)"),
    ),
    (
        "--openprogram-fuzz-chunk",
        dict(
            type=int,
            default=250,
            metavar="K",
            help="scenarios per item (250); part of the campaign's identity, like the seed",
        ),
    ),
    (
        "--openprogram-fuzz-regressions",
        dict(
            default=None,
            metavar="DIR",
            help="write a shrunk failing case as a regression scenario file under DIR",
        ),
    ),
)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("openprogram", "openprogram scenarios and reports")
    for name, settings in _OPTIONS:
        group.addoption(name, dest=name.lstrip("-").replace("-", "_"), **settings)
