"""The report's behaviour coverage, as served (no browser: tests/coverage has that too)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

from openprogram_sim.coverage import CATALOGUE
from openprogram_sim.play import check_outcome, run_scenario
from openprogram_sim.report import invalid_record, render_report, scenario_record
from openprogram_sim.scenario import discover, load_scenario

ROOT = Path(__file__).resolve().parents[2]


def _records(*folders: str) -> list[dict]:
    out = []
    for path in discover([ROOT / f for f in folders]):
        rel = path.relative_to(ROOT).as_posix()
        out.append(
            scenario_record(check_outcome(run_scenario(load_scenario(path))), id=rel, path=rel)
        )
    return out


class _Rows(HTMLParser):
    """Row ids (t0, t1, ...) to test ids, and the behaviour table's rows and links."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, str] = {}
        self.behaviours: dict[str, dict] = {}
        self._current: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "details" and "test" in (a.get("class") or "").split():
            self.rows[a["id"]] = a["data-id"]
        if tag == "tr" and a.get("data-behaviour"):
            self._current = a["data-behaviour"]
            self.behaviours[self._current] = {"status": a["class"], "links": []}
        if tag == "a" and self._current and a.get("data-goto"):
            self.behaviours[self._current]["links"].append((a["data-goto"], a["class"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._current = None


def test_records_carry_their_behaviours() -> None:
    (record,) = _records("scenarios/tool_choice/forced_function.yaml")
    assert "tool_choice_forced" in record["behaviours"]["asserted"]
    assert set(record["behaviours"]["asserted"]) <= set(record["behaviours"]["exercised"])
    json.dumps(record)  # it travels to the xdist controller as JSON


def test_the_table_links_each_behaviour_to_the_rows_that_exercise_it() -> None:
    records = _records("scenarios/basics", "scenarios/steering")
    page = render_report(records)
    parsed = _Rows()
    parsed.feed(page)
    assert list(parsed.behaviours) == [b.id for b in CATALOGUE]
    by_id = {r["id"]: r for r in records}
    for id, row in parsed.behaviours.items():
        for goto, kind in row["links"]:
            behaviours = by_id[parsed.rows[goto]]["behaviours"]
            assert id in behaviours["exercised"]
            assert (kind == "asserts") == (id in behaviours["asserted"])
    assert parsed.behaviours["steering_skip"]["status"] == "asserted"
    assert parsed.behaviours["hard_cap_50"]["status"] == "missing"
    assert parsed.behaviours["hard_cap_50"]["links"] == []
    summary = re.search(r'<details id="coverage".*?<summary>(.*?)</summary>', page, re.S)
    assert summary and "not exercised: " in summary.group(1) and "hard_cap_50" in summary.group(1)


def test_the_matrix_blob_names_rows_by_their_page_position() -> None:
    records = _records("scenarios/basics")
    records.append(invalid_record(_load_error(), id="bad.yaml", path="bad.yaml"))
    page = render_report(records)
    blob = re.search(r'<script type="application/json" id="op-matrix">(.*?)</script>', page, re.S)
    assert blob
    matrix = json.loads(blob.group(1))
    parsed = _Rows()
    parsed.feed(page)
    assert matrix["behaviours"] == [b.id for b in CATALOGUE]
    assert len(matrix["rows"]) == 4  # the invalid file has no behaviours
    for index, label, title, exercised, asserted in matrix["rows"]:
        record = next(r for r in records if r["id"] == parsed.rows[f"t{index}"])
        assert (label, title) == (
            record["path"][len("scenarios/") : -len(".yaml")],
            record["title"],
        )
        assert [CATALOGUE[k].id for k in exercised] == record["behaviours"]["exercised"]
        assert set(asserted) <= set(exercised)


def test_no_scenario_rows_no_coverage_section() -> None:
    page = render_report([invalid_record(_load_error(), id="bad.yaml", path="bad.yaml")])
    assert 'id="coverage"' not in page and 'id="tool-code"' not in page


def test_tool_code_lines_link_to_the_scenarios_that_ran_them() -> None:
    records = _records("scenarios/basics/one_pick.yaml")
    tool = {
        "name": "search", "ref": "pkg.tools:search", "file": "pkg/tools.py",
        "qualname": "search", "start": 3,
        "lines": {"covered": 1, "total": 2, "percent": 50.0},
        "branches": {"covered": 0, "total": 0, "percent": 100.0},
        "scenarios": ["scenarios/basics/one_pick.yaml"],
        "source": [
            {"n": 3, "text": "def search(q):", "status": "", "scenarios": []},
            {"n": 4, "text": "    return q", "status": "run",
             "scenarios": ["scenarios/basics/one_pick.yaml", "tests/test_x.py::test_y"]},
            {"n": 5, "text": "    raise X", "status": "missed", "scenarios": []},
        ],
    }  # fmt: skip
    page = render_report(records, tool_code=[tool])
    section = page[page.index('<details id="tool-code"') :]
    assert "lines <b>1/2</b> (50%)" in section
    assert '<tr class="run"><td class="ln">4</td>' in section
    link = '<a href="#t0" data-goto="t0" title="scenarios/basics/one_pick.yaml">basics/one_pick</a>'
    assert link in section
    no_row = '<span title="tests/test_x.py::test_y">tests/test_x.py::test_y</span>'
    assert no_row in section  # a context that is no row stays text
    assert '<tr class="missed"><td class="ln">5</td>' in section


def _load_error():  # type: ignore[no-untyped-def]
    from openprogram_sim.errors import ScenarioError, ScenarioIssue

    return ScenarioError([ScenarioIssue("bad.yaml", 1, "exec", "missing")])
