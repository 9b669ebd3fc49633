"""The plugin's traces out: ``--openprogram-trace-out DIR`` writes each scenario item's
trace to DIR (and with ``--openprogram-otel`` its OpenTelemetry GenAI spans), as
``openprogram-sim run --trace-out`` does. Only pytest and the standard library are imported
at start-up; the writer loads when the option is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from openprogram_sim.play import RunOutcome

__all__ = ["TRACE_OUT", "TraceOutOption", "configure", "write_trace"]


@dataclass(frozen=True, slots=True)
class TraceOutOption:
    """The folder traces go to (resolved where pytest started) and whether spans go too."""

    folder: Path
    otel: bool


TRACE_OUT = pytest.StashKey[TraceOutOption]()


def configure(config: pytest.Config) -> None:
    """Read the options into the config's stash; a mistake is a usage error at start-up
    (``--openprogram-otel`` alone, or without the OpenTelemetry SDK installed)."""
    folder = config.getoption("openprogram_trace_out", None)
    otel = bool(config.getoption("openprogram_otel", False))
    if folder is None:
        if otel:
            raise pytest.UsageError(
                "--openprogram-otel writes spans beside the traces: give "
                "--openprogram-trace-out DIR too"
            )
        return
    if otel:
        from openprogram_sim.report._otel_export import OtelMissingError, require_sdk

        try:
            require_sdk("--openprogram-otel")
        except OtelMissingError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[TRACE_OUT] = TraceOutOption(config.invocation_params.dir / folder, otel)


def write_trace(config: pytest.Config, path: str, outcome: RunOutcome) -> None:
    """Write one scenario run's trace (``path``: its file as shown) when the option is set;
    a folder that cannot be written fails the item, saying so."""
    option = config.stash.get(TRACE_OUT, None)
    if option is None:
        return
    from openprogram_sim.report._trace_out import TraceOut

    try:
        TraceOut(option.folder, otel=option.otel).write_outcome(outcome, path=path)
    except OSError as exc:
        pytest.fail(f"--openprogram-trace-out {option.folder}: cannot write: {exc}", pytrace=False)
