"""Reading a generated report back with the standard library's HTML parser: the rows,
their verdicts, failure text and embedded timeline data, and the summary counts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any


@dataclass
class Report:
    rows: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    scripts: int = 0
    """Every <script> element (inline code and JSON data)."""
    external: list[str] = field(default_factory=list)
    """src/href attributes that would load something (must stay empty)."""


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.report = Report()
        self.row: dict[str, Any] | None = None
        self.capture: str | None = None
        self.buffer: list[str] = []
        self.count_status: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for name in ("src", "href"):
            value = a.get(name)
            if value and not value.startswith("#"):
                self.report.external.append(value)
        classes = (a.get("class") or "").split()
        if tag == "details" and "test" in classes:
            self.row = {
                "id": a["data-id"],
                "status": a["data-status"],
                "kind": a["data-kind"],
                "tags": (a.get("data-tags") or "").split(),
                "failure": "",
            }
            self.report.rows.append(self.row)
        elif tag == "script":
            self.report.scripts += 1
            if a.get("id") == "op-data":
                self._start("data")
        elif tag == "span" and self.row is not None and {"title", "path"} & set(classes):
            self._start("title" if "title" in classes else "path")
        elif tag == "pre" and "failure" in classes and self.row is not None:
            self._start("failure")
        elif tag == "span" and "count" in classes and a.get("data-count"):
            self.count_status = a["data-count"]
        elif tag == "b" and self.count_status:
            self._start("count")

    def _start(self, what: str) -> None:
        self.capture = what
        self.buffer = []

    def handle_data(self, data: str) -> None:
        if self.capture:
            self.buffer.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "details" and self.capture is None:
            self.row = None
        if self.capture is None:
            return
        text = "".join(self.buffer)
        what, self.capture = self.capture, None
        if what == "data":
            for row, detail in zip(self.report.rows, json.loads(text), strict=True):
                assert detail["id"] == row["id"], (detail["id"], row["id"])
                row.update(detail)
        elif what == "count" and self.count_status:
            self.report.counts[self.count_status] = int(text)
            self.count_status = None
        elif self.row is not None:
            self.row[what] = text


def parse_report(html: str) -> Report:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    return parser.report
