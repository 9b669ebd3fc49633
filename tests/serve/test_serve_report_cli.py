"""``openprogram-sim serve --report PATH --junitxml PATH --coverage`` as a real process: two
clients on the ``openai`` SDK, one passing and one dropping a result, then Ctrl-C (SIGINT)
or SIGTERM; the verdict, the coverage table and the files written at exit."""

from __future__ import annotations

import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest
from serve_support import interrupt, read_banner, serve_process
from test_serve_report import chat_agent, write_scenario


@pytest.mark.slow
def test_serve_writes_the_report_and_junit_at_ctrl_c(openai: ModuleType, tmp_path: Path) -> None:
    path = write_scenario(tmp_path)
    report, junit = tmp_path / "out" / "report.html", tmp_path / "out" / "junit.xml"
    extra = ("-q", "--report", str(report), "--junitxml", str(junit), "--coverage")
    with serve_process(path, *extra) as process:
        url, banner = read_banner(process)
        assert banner[6].strip() == (
            f"sessions: {url}/s/NAME/... (e.g. {url}/s/NAME/v1) plays a fresh copy of the "
            f"script per NAME; GET {url}/s/NAME/trace gives a live one's trace (JSON)"
        )
        assert chat_agent(openai, f"{url}/s/good/v1") == "Found both."
        chat_agent(openai, f"{url}/s/dropper/v1", drop_second=True)
        out, err = interrupt(process)
    assert process.returncode == 1, out + err
    lines = out.splitlines()
    assert lines[lines.index("FAIL 1 problem(s)") + 1] == (
        "- session 'dropper': client check answered_once broken by request #2: call "
        "call_wire1_1 (search) served in answer #1 has no result in the next request"
    )
    start = lines.index(
        "client behaviour coverage: 12 behaviours, 4 seen (33.3%), over 2 session(s)"
    )
    assert lines[start + 2 : start + 4] == [
        "  tools     tool_round                    2  seen",
        "  tools     every_parallel_result         1  seen",
    ]
    assert lines[-2:] == [
        f"report: {report} (2 session(s))",
        f"JUnit XML: {junit} (2 session(s))",
    ]
    assert "Traceback" not in err

    html = report.read_text()
    assert html.count('<details class="test ') == 2
    assert 'data-id="/s/good" data-status="passed"' in html
    assert 'data-id="/s/dropper" data-status="failed"' in html
    suite = ET.parse(junit).getroot()[0]
    assert [(c.get("name"), c.find("failure") is not None) for c in suite] == [
        ("good", False),
        ("dropper", True),
    ]
    score = {p.get("name"): p.get("value") for p in suite[0].iter("property")}
    assert score["openprogram.trajectory.score"] == "1.0"
    assert sorted(p.name for p in report.parent.iterdir()) == ["junit.xml", "report.html"]


@pytest.mark.slow
def test_sigterm_writes_them_too_and_a_pass_exits_0(openai: ModuleType, tmp_path: Path) -> None:
    path = write_scenario(tmp_path)
    report = tmp_path / "report.html"
    with serve_process(path, "-q", "--report", str(report)) as process:
        url, _ = read_banner(process)
        assert chat_agent(openai, f"{url}/s/only/v1") == "Found both."
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, out + err
    assert out.splitlines()[-1] == f"report: {report} (1 session(s))"
    assert 'data-id="/s/only" data-status="passed"' in report.read_text()


def test_a_report_path_that_cannot_be_written_is_refused_before_serving(tmp_path: Path) -> None:
    path = write_scenario(tmp_path)
    command = [sys.executable, "-m", "openprogram_sim.cli", "serve", str(path), "--port", "0"]
    done = subprocess.run(
        [*command, "--report", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"openprogram-sim serve: --report {tmp_path} is a directory; give the file to write, "
        f"e.g. {tmp_path}/report.html\n"
    )
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = subprocess.run(
        [*command, "--junitxml", str(blocker / "junit.xml")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"openprogram-sim serve: --junitxml {blocker}/junit.xml: {blocker} is a file, not a "
        "directory\n"
    )
