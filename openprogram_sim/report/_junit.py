"""Served sessions as a JUnit XML file (``openprogram-sim serve --junitxml PATH``): a test
case per session, for CI dashboards that read JUnit.

Each ``<testcase>`` is one session: ``name`` the session's name (``default`` for URLs
without ``/s/NAME``), ``classname`` the scenario file as pytest names a module (``scenarios.
basics.one_tool`` for ``scenarios/basics/one_tool.yaml``; the scenario's title when there
is no file), ``time`` the session's duration. A failing session has one ``<failure>``: its
first failure's title as ``message``, every failure as the text (as ``serve`` prints them).
Its ``<properties>`` are those the pytest plugin writes for a scenario (``model_calls``,
``tool_calls``, ``errors``, ``end_reason``, ``rounds``; the trajectory's score and each
property's verdict as ``openprogram.trajectory.*`` and ``openprogram.property.N.*``: see
:func:`~openprogram_sim.report.junit_properties`), and the wire's own: ``requests``,
``retries``, ``openprogram.session.state``, each client invariant as
``openprogram.client_check.NAME`` (``held``, ``broken`` or ``off``) and the client
behaviours seen as ``openprogram.wire_behaviours``. Failures that are no session's own
(requests refused for the server's caps) are one more test case, named ``(server)``.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openprogram_sim.cassettes._atomic import atomic_write
from openprogram_sim.report._expectations import junit_properties
from openprogram_sim.report._sessions import scenario_names, served_records, server_failures
from openprogram_sim.trace import render_failures

if TYPE_CHECKING:
    from openprogram_sim.scenario import Scenario
    from openprogram_sim.wire import ServeReport

__all__ = ["served_junit", "session_junit", "write_session_junit"]

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""Characters XML 1.0 cannot hold, even escaped (a parser refuses the whole file)."""


def _xml(text: str) -> str:
    """``text`` with the characters XML cannot hold written as ``\\uNNNN``."""
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_PROPS = ("model_calls", "tool_calls", "errors", "end_reason", "rounds", "requests", "retries")


def _classname(scenario: str, path: str) -> str:
    if not path:
        return scenario or "openprogram-sim serve"
    stem = Path(path)
    if stem.is_absolute():
        with contextlib.suppress(ValueError, OSError):
            stem = stem.relative_to(Path.cwd())
    for suffix in (".yaml", ".yml"):
        if stem.name.endswith(suffix):
            stem = stem.with_name(stem.name[: -len(suffix)])
    parts = [p for p in stem.as_posix().split("/") if p not in ("", ".")]
    return ".".join(parts)


def _properties(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    props = record["props"]
    out = [(k, str(props[k])) for k in _PROPS if k in props]
    out += junit_properties(
        {"trajectory": record["trajectory"], "properties": record["properties"]}
    )
    out.append(("openprogram.session.state", record["session"]["state"]))
    out += [(f"openprogram.client_check.{k}", v) for k, v in record["client_checks"].items()]
    out.append(("openprogram.wire_behaviours", " ".join(record["wire_behaviours"])))
    return out


def _case(suite: ET.Element, classname: str, name: str, time: float) -> ET.Element:
    attributes = {"classname": _xml(classname), "name": _xml(name), "time": f"{time:.3f}"}
    return ET.SubElement(suite, "testcase", attributes)


def served_junit(served: ServeReport, *, scenario: str = "", path: str = "") -> str:
    """The JUnit XML text of ``served`` (see the module)."""
    records = served_records(served, scenario=scenario, path=path)
    outside = server_failures(served)
    classname = _classname(scenario, path)
    failures = sum(1 for r in records if r["status"] != "passed") + bool(outside)
    time = sum(float(r["duration"]) for r in records)
    root = ET.Element("testsuites", {"name": "openprogram-sim serve"})
    suite = ET.SubElement(
        root,
        "testsuite",
        {
            "name": _xml(scenario or "openprogram-sim serve"),
            "errors": "0",
            "failures": str(failures),
            "skipped": "0",
            "tests": str(len(records) + bool(outside)),
            "time": f"{time:.3f}",
            "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
            "hostname": socket.gethostname(),
        },
    )
    for record in records:
        name = record["session"]["name"]
        case = _case(suite, classname, "default" if name is None else str(name), record["duration"])
        props = ET.SubElement(case, "properties")
        for key, value in _properties(record):
            ET.SubElement(props, "property", {"name": _xml(key), "value": _xml(value)})
        if record["status"] != "passed":
            text = record["failure"]
            failure = ET.SubElement(case, "failure", {"message": _xml(text.splitlines()[0][2:])})
            failure.text = _xml(text)
    if outside:
        case = _case(suite, classname, "(server)", 0.0)
        text = render_failures(outside)
        failure = ET.SubElement(case, "failure", {"message": _xml(outside[0].title)})
        failure.text = _xml(text)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def write_session_junit(
    path: str | os.PathLike[str], served: ServeReport, *, scenario: str = "",
    scenario_path: str = "",
) -> Path:  # fmt: skip
    """Write :func:`served_junit` to ``path``, atomically."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, served_junit(served, scenario=scenario, path=scenario_path), mode=0o644)
    return target


def session_junit(
    path: str | os.PathLike[str],
    *,
    scenario: Scenario | str | os.PathLike[str] | None = None,
) -> Callable[[ServeReport], Path]:
    """A writer for :meth:`WireServer.check(write=) <openprogram_sim.wire.WireServer.check>`:
    the JUnit XML file at ``path`` (``scenario``: the scenario served, loaded or its file,
    for the suite's name and the test cases' ``classname``)."""
    name, file = scenario_names(scenario)

    def write(served: ServeReport) -> Path:
        return write_session_junit(path, served, scenario=name, scenario_path=file)

    return write
