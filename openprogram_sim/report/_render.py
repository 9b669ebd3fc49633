"""Rendering records into one self-contained HTML file, and writing it atomically.

The page is server-rendered down to one lean row per test (verdict, title, path, tags and,
for a failure, its diff), failures first, so it reads and parses without JavaScript.
Everything else (the properties, the result, each run's trace and timeline tree, built in
Python by :func:`~openprogram_sim.report.build_timeline`) is one JSON blob in a
``<script type="application/json">`` element, which the inline script parses and draws
only when a row is first opened, so a suite of thousands opens fast.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from openprogram_sim.cassettes._atomic import atomic_write
from openprogram_sim.report._coverage import behaviour_view, tool_view, wire_view

__all__ = ["PackedJSON", "embed_json", "pack_runs", "render_report", "write_report"]

STATUSES = ("passed", "failed", "error", "skipped")
_ROW_ORDER = {status: rank for rank, status in enumerate(("failed", "error", "skipped", "passed"))}
"""Rows by verdict: what needs a look first (a status not listed goes last)."""
_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def embed_json(value: Any) -> Markup:
    """JSON that is safe inside a ``<script>`` element: ``<``, ``>`` and ``&`` are escaped
    as JSON unicode escapes, so ``</script>`` or ``<!--`` in the data cannot end it."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    for raw, escaped in _ESCAPES.items():
        text = text.replace(raw, escaped)
    return Markup(text)


class PackedJSON:
    """A record's value kept as the JSON text the page embeds (:func:`embed_json`), not as
    Python objects: a few times smaller, for reports built from many records kept at once
    (``openprogram-sim run --report``). ``len()`` is the value's own length (the page asks
    a record how many runs it has)."""

    __slots__ = ("length", "text")

    def __init__(self, value: Any) -> None:
        self.text = str(embed_json(value))
        self.length = len(value)

    def __len__(self) -> int:
        return self.length

    @property
    def value(self) -> Any:
        """The value back, as plain JSON values."""
        return json.loads(self.text)


def pack_runs(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its ``runs`` (each run's trace and timeline, most of its size) packed
    as :class:`PackedJSON`; :func:`render_report` embeds it as it is."""
    runs = record.get("runs")
    if isinstance(runs, list):
        record["runs"] = PackedJSON(runs)
    return record


def _details_json(rows: list[Mapping[str, Any]]) -> Markup:
    """The page's data blob: per row what :data:`_DETAIL_KEYS` names, packed values
    embedded as they are."""
    parts = []
    for r in rows:
        fields = []
        for key in _DETAIL_KEYS:
            value = r.get(key)
            text = value.text if isinstance(value, PackedJSON) else embed_json(value)
            fields.append(f'"{key}":{text}')
        parts.append("{" + ",".join(fields) + "}")
    return Markup("[" + ",".join(parts) + "]")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(__package__, "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["json"] = embed_json
    env.filters["seconds"] = _seconds
    return env


_DETAIL_KEYS = ("id", "kind", "description", "props", "result", "error", "runs", "session")
"""What the page's script needs to draw a row's body when it is opened (one JSON blob for
the whole page: one element to parse, not one per row)."""


def _stats(record: Mapping[str, Any]) -> str:
    props = record.get("props") or {}
    parts = []
    for key, noun in (("rounds", "round"), ("model_calls", "model call")):
        if key in props:
            n = props[key]
            parts.append(f"{n} {noun}{'' if n == 1 else 's'}")
    for t in record.get("trajectory") or ():
        if "score" in t:
            parts.append(f"trajectory {t['score']:.2f}")
    rules = record.get("properties") or ()
    if rules:
        held = sum(1 for p in rules if p.get("held"))
        parts.append(f"properties {held}/{len(rules)} held")
    parts.append(_seconds(float(record.get("duration") or 0)))
    return " · ".join(parts)


def _seconds(value: float) -> str:
    if value < 1:
        return f"{value * 1000:.1f} ms"
    if value < 120:
        return f"{value:.2f} s"
    return f"{int(value // 60)} min {value % 60:.0f} s"


def _summary(records: list[Mapping[str, Any]], wall_time: float | None) -> dict[str, Any]:
    counts = Counter(r["status"] for r in records)
    tags = Counter(t for r in records for t in r.get("tags", ()))
    return {
        "total": len(records),
        "counts": {s: counts.get(s, 0) for s in STATUSES},
        "duration": sum(float(r.get("duration") or 0) for r in records),
        "wall_time": wall_time,
        "tags": sorted(tags.items()),
        "slowest": sorted(enumerate(records), key=lambda p: -float(p[1].get("duration") or 0))[:5],
    }


def _row_key(record: Mapping[str, Any]) -> tuple[int, str]:
    return _ROW_ORDER.get(record["status"], len(_ROW_ORDER)), record["id"]


def render_report(
    records: Iterable[Mapping[str, Any]],
    *,
    title: str = "openprogram report",
    source: str = "",
    wall_time: float | None = None,
    tool_code: list[dict[str, Any]] | None = None,
    notes: Iterable[str] = (),
) -> str:
    """The HTML page for ``records``: failed, then error, skipped and passed rows, each
    group sorted by id; with the behaviour coverage of the scenario rows, the client
    behaviours of the served sessions' rows (kind ``session``), ``tool_code``
    (:func:`openprogram_sim.coverage.tool_code`) when the user's code was measured, and
    ``notes`` (lines shown under the summary)."""
    rows = sorted(records, key=_row_key)
    template = _environment().get_template("report.html.j2")
    return template.render(
        coverage=behaviour_view(rows),
        wire=wire_view(rows),
        notes=list(notes),
        tools=tool_view(tool_code, rows),
        stats=_stats,
        details=_details_json(rows),
        title=title,
        source=source,
        generated=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        summary=_summary(rows, wall_time),
        records=rows,
        statuses=STATUSES,
        css=Markup(_asset("report.css")),
        js=Markup(_asset("report.js")),
    )


def write_report(
    path: str | os.PathLike[str],
    records: Iterable[Mapping[str, Any]],
    **options: Any,
) -> Path:
    """Render and write the report: to a temporary file beside ``path``, then
    ``os.replace`` it into place, so a reader never sees a half-written page (a killed
    write's temporary file is swept by the next one: see
    :func:`~openprogram_sim.cassettes._atomic.atomic_write`)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = render_report(records, **options)
    atomic_write(target, text, mode=0o644)
    return target
