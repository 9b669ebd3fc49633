"""The report's behaviour coverage: the catalogue's table with links to the scenarios that
exercise each behaviour, the behaviours-by-scenarios matrix the page draws on demand, and
the user's tool code (``--coverage-source``) line by line.

Built from the records alone (each scenario record carries its ``behaviours``), so a
report merged from pytest-xdist workers shows the same coverage as a single process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["LINKS_SHOWN", "behaviour_view", "tool_view", "wire_view"]

LINKS_SHOWN = 6
"""Scenario links shown per behaviour in the table (the matrix has every one)."""


def _short(record: Mapping[str, Any]) -> str:
    """A scenario's path as a link shows it: without ``scenarios/`` and the suffix."""
    path = str(record.get("path") or record["id"])
    path = path.removeprefix("scenarios/")
    for suffix in (".yaml", ".yml"):
        path = path.removesuffix(suffix)
    return path


def behaviour_view(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The table and the matrix for the report's rows (in page order: a scenario's row is
    ``t{index}``); None when no row carries behaviours."""
    from openprogram_sim.coverage import CATALOGUE, EXPECTATION_KEYS, BehaviourCoverage

    scenarios = [
        (i, r) for i, r in enumerate(rows) if r.get("kind") == "scenario" and r.get("behaviours")
    ]
    if not scenarios:
        return None
    coverage = BehaviourCoverage.from_records(r for _, r in scenarios)
    index = {b.id: k for k, b in enumerate(CATALOGUE)}
    table = []
    for b in CATALOGUE:
        asserted = set()
        links = []
        for i, r in scenarios:
            found = r["behaviours"]
            if b.id not in found.get("exercised", ()):
                continue
            sure = b.id in found.get("asserted", ())
            if sure:
                asserted.add(i)
            links.append(
                {"row": i, "label": _short(r), "title": r.get("title") or r["id"], "asserted": sure}
            )
        links.sort(key=lambda link: not link["asserted"])  # asserting scenarios first
        table.append(
            {
                "id": b.id,
                "group": b.group,
                "title": b.title,
                "quote": f'{b.source}: "{b.quote}"',
                "asserted_by": b.asserted,
                "status": coverage.status(b.id),
                "exercised": len(links),
                "asserted": len(asserted),
                "links": links[:LINKS_SHOWN],
                "more": max(0, len(links) - LINKS_SHOWN),
            }
        )
    matrix = {
        "behaviours": [b.id for b in CATALOGUE],
        "rows": [
            [
                i,
                _short(r),
                r.get("title") or r["id"],
                [index[b] for b in r["behaviours"].get("exercised", ()) if b in index],
                [index[b] for b in r["behaviours"].get("asserted", ()) if b in index],
            ]
            for i, r in scenarios
        ],
    }
    return {
        "total": len(CATALOGUE),
        "exercised": sum(1 for b in CATALOGUE if coverage.exercised.get(b.id)),
        "asserted": sum(1 for b in CATALOGUE if coverage.asserted.get(b.id)),
        "percent": coverage.percent,
        "scenarios": len(scenarios),
        "table": table,
        "matrix": matrix,
        "expectations": _expectations(coverage.expectations, EXPECTATION_KEYS),
    }


def wire_view(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The client behaviours the report's session rows showed (:data:`~openprogram_sim.
    coverage.WIRE_CATALOGUE`), each with links to the sessions that showed it; None when no
    row is a served session."""
    from openprogram_sim.coverage import WIRE_CATALOGUE, WireCoverage

    sessions = [
        (i, r) for i, r in enumerate(rows) if r.get("kind") == "session" and "wire_behaviours" in r
    ]
    if not sessions:
        return None
    coverage = WireCoverage()
    for _, r in sessions:
        coverage.add(str(r["id"]), r["wire_behaviours"])
    table = []
    for b in WIRE_CATALOGUE:
        links = [
            {"row": i, "label": str(r["id"]), "title": r.get("title") or r["id"]}
            for i, r in sessions
            if b.id in r["wire_behaviours"]
        ]
        table.append(
            {
                "id": b.id,
                "group": b.group,
                "title": b.title,
                "seen_when": b.seen,
                "status": "seen" if links else "missing",
                "sessions": len(links),
                "links": links[:LINKS_SHOWN],
                "more": max(0, len(links) - LINKS_SHOWN),
            }
        )
    return {
        "total": len(WIRE_CATALOGUE),
        "seen": len(WIRE_CATALOGUE) - len(coverage.missing),
        "percent": coverage.percent,
        "sessions": len(sessions),
        "missing": coverage.missing,
        "table": table,
    }


def _expectations(found: Mapping[str, Sequence[str]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """Per kind (``trajectory``, ``property``) its modes or rules, each with the scenarios
    that assert with it."""
    out: list[dict[str, Any]] = []
    for kind, title in (("trajectory", "trajectory modes"), ("property", "property rules")):
        items = [
            {"key": k, "name": k.partition(".")[2], "scenarios": sorted(found.get(k, ()))}
            for k in keys
            if k.startswith(kind + ".")
        ]
        out.append({"kind": kind, "title": title, "entries": items})
    return out


def tool_view(
    tools: Sequence[Mapping[str, Any]] | None, rows: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]] | None:
    """The tool code section: each tool as ``tool_code`` gives it, each line's scenarios as
    ``(row index, label, path)`` links (a context that is no row stays text)."""
    if tools is None:
        return None
    by_path: dict[str, int] = {}
    for i, r in enumerate(rows):
        for key in ("path", "id"):
            if r.get(key):
                by_path.setdefault(str(r[key]), i)
    out = []
    for tool in tools:
        lines = [
            {**line, "links": [(by_path.get(s), _short({"id": s}), s) for s in line["scenarios"]]}
            for line in tool.get("source", ())
        ]
        out.append({**tool, "source": lines})
    return out
