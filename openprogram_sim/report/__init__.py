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

The sessions of ``openprogram-sim serve`` are records too (kind ``session``:
:func:`session_record`, :func:`served_records`), with a timeline built from each session's
trace; :func:`session_html` and :func:`session_junit` are the writers
:meth:`WireServer.check(write=) <openprogram_sim.wire.WireServer.check>` takes (``serve
--report`` and ``--junitxml``), and :func:`session_details` what a server keeps of each
session's trace for them (the trajectory's score, each property's verdict)::

    from openprogram_sim.play import serve_scenario
    from openprogram_sim.report import session_details, session_html

    with serve_scenario(path, details=session_details(path)) as server:
        ...  # clients, each under its own /s/NAME/
        server.check(write=session_html("report.html", scenario=path))
"""

from openprogram_sim.report._expectations import (
    expectation_checks,
    junit_properties,
    trace_checks,
)
from openprogram_sim.report._junit import served_junit, session_junit, write_session_junit
from openprogram_sim.report._records import (
    format_verdict,
    invalid_record,
    outcome_runs,
    python_record,
    run_entry,
    scenario_props,
    scenario_record,
    trace_properties,
)
from openprogram_sim.report._render import (
    PackedJSON,
    embed_json,
    pack_runs,
    render_report,
    write_report,
)
from openprogram_sim.report._sessions import (
    served_records,
    session_details,
    session_html,
    session_record,
    write_session_report,
)
from openprogram_sim.report._timeline import build_timeline

__all__ = [
    "PackedJSON",
    "build_timeline",
    "embed_json",
    "expectation_checks",
    "format_verdict",
    "invalid_record",
    "junit_properties",
    "pack_runs",
    "python_record",
    "render_report",
    "outcome_runs",
    "run_entry",
    "scenario_props",
    "scenario_record",
    "served_junit",
    "served_records",
    "session_details",
    "session_html",
    "session_junit",
    "session_record",
    "trace_checks",
    "trace_properties",
    "write_report",
    "write_session_junit",
    "write_session_report",
]

PackedJSON.__module__ = __name__
