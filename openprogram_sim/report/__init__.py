"""The HTML report: one self-contained file with every test's verdict and timeline.

Build records with :func:`scenario_record`, :func:`invalid_record` or
:func:`python_record` (plain JSON-safe dicts), then :func:`write_report`::

    from openprogram_sim.report import scenario_record, write_report

    records = [scenario_record(verdict, id="scenarios/x.yaml", path="scenarios/x.yaml")]
    write_report("reports/report.html", records)

A scenario's record also carries its trajectory's graded score and each property's
verdict (:func:`expectation_checks`), which the plugin writes as JUnit properties
(:func:`junit_properties`) too.

Each run of a record carries its timeline, the tree of execs, rounds and items that
:func:`build_timeline` makes from its trace; the page's script only draws it.

Used by the pytest plugin (``--openprogram-report``) and by ``openprogram-sim run --report``.
"""

from openprogram_sim.report._expectations import expectation_checks, junit_properties
from openprogram_sim.report._records import (
    format_verdict,
    invalid_record,
    python_record,
    run_entry,
    scenario_props,
    scenario_record,
    trace_properties,
)
from openprogram_sim.report._render import embed_json, render_report, write_report
from openprogram_sim.report._timeline import build_timeline

__all__ = [
    "build_timeline",
    "embed_json",
    "expectation_checks",
    "format_verdict",
    "invalid_record",
    "junit_properties",
    "python_record",
    "render_report",
    "run_entry",
    "scenario_props",
    "scenario_record",
    "trace_properties",
    "write_report",
]
