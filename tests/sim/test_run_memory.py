"""``run`` keeps a compact summary of each scenario run, not its verdict: nothing it keeps
reaches the ``Scenario``, its line map, the outcome or the trace, unless asked."""

from __future__ import annotations

import gc
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from openprogram_sim.cli import main, run_paths
from openprogram_sim.cli.run import RunSummary
from openprogram_sim.play import RunOutcome, Verdict
from openprogram_sim.scenario import Scenario

ROOT = Path(__file__).resolve().parents[2]
BASICS = ROOT / "scenarios" / "basics"


def _reachable(roots: list[Any]) -> list[Any]:
    seen: set[int] = set()
    stack, out = list(roots), []
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        out.append(obj)
        stack.extend(gc.get_referents(obj))
    return out


def test_the_kept_results_hold_no_scenario_outcome_or_verdict() -> None:
    results = run_paths([BASICS])
    assert results and all(r.summary is not None and r.verdict is None for r in results)
    held = _reachable(list(results))
    heavy = [o for o in held if isinstance(o, Scenario | RunOutcome | Verdict)]
    assert heavy == []
    first = results[0].summary
    assert isinstance(first, RunSummary) and first.title and first.rounds >= 1
    assert results[0].json_data is None and results[0].record is None
    with pytest.raises(ValueError, match=r"its --json object was not kept"):
        results[0].to_json()


def test_keep_asks_for_the_json_and_the_record_and_keep_verdicts_for_the_verdict() -> None:
    results = run_paths([BASICS / "text_finish.yaml"], keep=("json", "report"))
    (result,) = results
    assert result.to_json()["trace"][0]["type"] == "agent_start"
    assert result.record is not None and result.record["kind"] == "scenario"
    assert [o for o in _reachable([result]) if isinstance(o, Scenario)] == []
    (kept,) = run_paths([BASICS / "text_finish.yaml"], keep_verdicts=True)
    assert kept.verdict is not None and kept.status == "passed"
    with pytest.raises(ValueError, match=r"run_paths\(keep=\): unknown \['trace'\]"):
        run_paths([BASICS], keep=("trace",))


def test_json_report_and_trace_out_are_whole_from_the_compact_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    library = tmp_path / "lib"
    shutil.copytree(BASICS, library)
    monkeypatch.chdir(tmp_path)
    code = main(["run", "lib", "--json", "--report", "out/report.html", "--trace-out", "traces"])
    out = capsys.readouterr()
    assert code == 0
    payload = json.loads(out.out)
    files = sorted(library.glob("*.yaml"))
    assert payload["summary"]["total"] == len(files) == payload["summary"]["passed"]
    assert [s["path"] for s in payload["scenarios"]] == [f"lib/{f.name}" for f in files]
    assert all(s["trace"] and s["title"] for s in payload["scenarios"])
    assert f"{len(files)} trace file(s) written to traces" in out.err
    assert len(list((tmp_path / "traces").rglob("*.json"))) == len(files)
    page = (tmp_path / "out" / "report.html").read_text()
    assert all(s["title"] in page for s in payload["scenarios"])


def test_a_packed_record_renders_the_same_page_data() -> None:
    import re

    from openprogram_sim.report import PackedJSON, pack_runs, render_report

    (result,) = run_paths([BASICS / "text_finish.yaml"], keep=("report",))
    record = result.record
    assert record is not None and isinstance(record["runs"], PackedJSON)
    unpacked = {**record, "runs": record["runs"].value}
    assert len(record["runs"]) == len(unpacked["runs"]) == 1

    def data(page: str) -> Any:
        found = re.search(r'<script type="application/json" id="op-data">(.*?)</script>', page)
        assert found is not None
        return json.loads(found.group(1))

    packed_page = data(render_report([record]))
    assert packed_page == data(render_report([unpacked]))
    assert packed_page[0]["runs"][0]["trace"][0]["type"] == "agent_start"
    assert pack_runs(dict(unpacked))["runs"].text == record["runs"].text
