"""The HTML report: merged under pytest-xdist, written atomically, escaped, self-contained,
fast for big suites, and the same from `openprogram-sim run --report`."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from plugin_data import TITLES, bulk_record, write_scenarios
from report_html import parse_report

from openprogram_sim import report as report_pkg
from openprogram_sim.cli import main as cli_main
from openprogram_sim.report import _render


@pytest.mark.slow
def test_xdist_workers_results_merge_into_one_report(
    scenario_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    marks = scenario_project.path / "marks"
    marks.mkdir()
    monkeypatch.setenv("OPENPROGRAM_TEST_MARKS", str(marks))
    scenario_project.makepyfile(
        test_inner_xdist_traced="""
        import os, pytest
        from openprogram import Runtime, ToolRegistry

        @pytest.mark.parametrize("n", range(6))
        def test_traced(n, openprogram_model, openprogram_trace):
            runtime = Runtime(provider=openprogram_model([f"answer {n}"]),
                              registry=ToolRegistry())
            runtime.subscribe(openprogram_trace)
            assert runtime.exec("go", tools=[]) == f"answer {n}"
            worker = os.environ.get("PYTEST_XDIST_WORKER", "none")
            open(os.path.join(os.environ["OPENPROGRAM_TEST_MARKS"], f"{n}-{worker}"), "w").close()
        """
    )
    result = scenario_project.runpytest_subprocess(
        "-n", "2", "--openprogram-scenarios", "--openprogram-report", "r.html", timeout=300
    )
    result.assert_outcomes(passed=10, failed=2)
    # the traced tests ran on workers (which ones is up to the scheduler), not in-process
    workers = {p.name.split("-")[1] for p in marks.iterdir()}
    assert len(list(marks.iterdir())) == 6 and workers and workers <= {"gw0", "gw1"}
    result.stdout.fnmatch_lines(["*2 workers*"])
    report = parse_report((scenario_project.path / "r.html").read_text(encoding="utf-8"))
    ids = {r["id"] for r in report.rows}
    traced = {f"test_inner_xdist_traced.py::test_traced[{n}]" for n in range(6)}
    scenarios = {f"{path}::{title}" for path, title in TITLES.items()}
    assert ids == traced | scenarios | {"scenarios/bad/typo.yaml::invalid"}
    assert report.counts == {"passed": 10, "failed": 1, "error": 1, "skipped": 0}
    assert all(r["runs"] for r in report.rows if r["kind"] != "invalid")
    # no temporary file is left beside the report
    assert [p.name for p in scenario_project.path.iterdir() if p.name.startswith(".r.html")] == []


def test_data_cannot_break_out_of_the_page() -> None:
    nasty = "</script><script>alert(1)</script><!-- \u2028 <img src=x onerror=alert(2)>"
    record = bulk_record(0, title=nasty, failure=nasty, tags=["x"], description=nasty)
    run = record["runs"][0]
    run["trace"][2]["text"] = nasty
    run["timeline"] = report_pkg.build_timeline(run)
    html = report_pkg.render_report([record])
    parsed = parse_report(html)
    # one inline program and one data element: nothing from the data opened or closed one
    assert parsed.scripts == 2
    assert html.count("</script>") == 2
    assert parsed.external == []  # the <img src=...> stayed text
    (row,) = parsed.rows
    assert row["title"] == nasty and row["failure"] == nasty
    assert row["runs"][0]["trace"][2]["text"] == nasty
    assert row["runs"][0]["timeline"]["rounds"][0]["items"][0]["text"] == nasty


def test_the_page_is_self_contained() -> None:
    html = report_pkg.render_report([bulk_record(1)])
    assert "<style>" in html and "<script>" in html
    assert not re.search(r"https?://", html)
    assert "default-src 'none'" in html  # a CSP that forbids any fetch
    assert parse_report(html).external == []


def test_thousands_of_tests_render_fast_and_build_no_timeline_up_front(tmp_path: Path) -> None:
    records = [bulk_record(i) for i in range(3000)]
    start = time.perf_counter()
    path = report_pkg.write_report(tmp_path / "big.html", records)
    elapsed = time.perf_counter() - start
    html = path.read_text(encoding="utf-8")
    assert elapsed < 15, elapsed
    parsed = parse_report(html)
    assert len(parsed.rows) == 3000
    # no timeline is in the markup: the script builds one when its row is opened
    assert 'class="timeline"' not in html
    assert parsed.scripts == 2  # one data blob and the program, not one per row
    assert len(html) < 3000 * 4000


def test_failures_come_first_in_the_served_page() -> None:
    statuses = ["passed", "failed", "error", "passed", "skipped", "failed", "error", "passed"]
    records = [
        bulk_record(i, status=status, duration=0.01 * i) for i, status in enumerate(statuses)
    ]
    html = report_pkg.render_report(reversed(records))
    rows = parse_report(html).rows  # the markup as served: no script has run
    # failed, error, skipped, passed; by id within each
    assert [(r["status"], r["title"]) for r in rows] == [
        ("failed", "test 1"),
        ("failed", "test 5"),
        ("error", "test 2"),
        ("error", "test 6"),
        ("skipped", "test 4"),
        ("passed", "test 0"),
        ("passed", "test 3"),
        ("passed", "test 7"),
    ]
    # the summary's link to the slowest test still lands on its row
    (slowest,) = re.findall(r'<a href="#(t\d+)" data-goto="t\d+">test 7</a>', html)
    assert f'id="{slowest}" data-i="{slowest[1:]}" data-id="tests/test_x.py::test_00007"' in html


def test_the_report_is_replaced_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "r.html"
    report_pkg.write_report(target, [bulk_record(1)])
    before = target.read_text(encoding="utf-8")
    calls: list[tuple[str, str]] = []
    real_replace = os.replace

    def failing_replace(src: str, dst: str) -> None:
        calls.append((str(src), str(dst)))
        raise OSError("disk full")

    monkeypatch.setattr(_render.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        report_pkg.write_report(target, [bulk_record(2)])
    assert target.read_text(encoding="utf-8") == before  # never half-written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]  # temp file removed
    ((src, dst),) = calls
    assert Path(src).parent == tmp_path and dst == str(target)
    monkeypatch.setattr(_render.os, "replace", real_replace)
    report_pkg.write_report(target, [bulk_record(2)])
    assert "test 2" in target.read_text(encoding="utf-8")


def test_openprogram_sim_run_writes_the_same_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_scenarios(tmp_path)
    monkeypatch.chdir(tmp_path)
    code = cli_main(["run", "scenarios", "--report", "out/report.html"])
    assert code == 2  # one file does not load
    assert "report written to" in capsys.readouterr().err
    parsed = parse_report((tmp_path / "out" / "report.html").read_text(encoding="utf-8"))
    by_path = {r["id"]: r for r in parsed.rows}
    assert set(by_path) == set(TITLES) | {"scenarios/bad/typo.yaml"}
    assert [r["status"] for r in parsed.rows] == ["failed", "error"] + ["passed"] * 4
    assert by_path["scenarios/steering/broken.yaml"]["status"] == "failed"
    assert "<- differs" in by_path["scenarios/steering/broken.yaml"]["failure"]
    assert by_path["scenarios/bad/typo.yaml"]["status"] == "error"
    nested = by_path["scenarios/nested/research.yaml"]["runs"][0]
    assert max(e["depth"] for e in nested["trace"]) == 1
    assert json.loads(json.dumps(nested))  # plain JSON all the way down
