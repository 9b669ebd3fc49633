"""An eval's JUnit XML: a test case per scenario carrying the rates as properties, failed
with the summary and the samples' reasons when its verdict is not pass; from evals run over
loopback against a served stochastic scenario."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_eval_report import WEIGHTED, sample_eval

from openprogram_sim.eval import (
    Sample,
    ScenarioResult,
    pass_at_k,
    wilson,
    write_eval_junit,
    write_eval_report,
)


def _cases(path: Path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root
    return {case.attrib["file"]: case for case in suite.iter("testcase")}


def _props(case: ET.Element | None) -> dict[str, str]:
    assert case is not None
    return {p.attrib["name"]: p.attrib["value"] for p in case.iter("property")}


@pytest.mark.slow
def test_each_scenario_is_a_case_with_its_rates(tmp_path: Path) -> None:
    failing, _ = sample_eval(WEIGHTED, tmp_path / "a", 10)
    passing, _ = sample_eval(WEIGHTED, tmp_path / "b", 60, threshold=0.3)
    passing.path = "scenarios/stochastic/weighted_pick_gate.yaml"  # two cases, two files
    out = write_eval_junit([failing, passing], tmp_path / "junit.xml", model="openai:gpt-4o-mini")
    root = ET.parse(out).getroot()
    (suite,) = root
    assert suite.attrib["tests"] == "2" and suite.attrib["failures"] == "1"
    assert _props(suite.find("properties")) == {"openprogram.eval.model": "openai:gpt-4o-mini"}
    cases = _cases(out)
    low, high = wilson(7, 10, 0.95).low, wilson(7, 10, 0.95).high
    props = _props(cases["scenarios/stochastic/weighted_pick.yaml"].find("properties"))
    assert props["openprogram.eval.pass_rate"] == "0.7"
    assert (props["openprogram.eval.passed"], props["openprogram.eval.n"]) == ("7", "10")
    assert float(props["openprogram.eval.interval.low"]) == round(low, 6)
    assert float(props["openprogram.eval.interval.high"]) == round(high, 6)
    assert props["openprogram.eval.verdict"] == "fail"
    assert props["openprogram.eval.flaky"] == "true"
    assert props["openprogram.eval.stopped_early"] == "false"
    assert float(props["openprogram.eval.pass_at.3"]) == round(pass_at_k(10, 7, 3), 6)
    assert props["openprogram.eval.expectation.trajectory.rate"] == "0.7"
    assert props["openprogram.eval.expectation.properties.passed"] == "10"
    assert props["openprogram.eval.regression.1"] == failing.regressions[0].path
    failure = cases["scenarios/stochastic/weighted_pick.yaml"].find("failure")
    assert failure is not None and failure.attrib["type"] == "eval.fail"
    assert failure.attrib["message"].startswith(
        "FAIL scenarios/stochastic/weighted_pick.yaml: 7/10 samples passed (rate 0.700"
    )
    bad = [s for s in failing.samples if not s.passed]
    numbers = ", ".join(str(s.index) for s in bad)
    assert f"failed in sample(s) {numbers} (first: {bad[0].cassette}):" in failure.text
    assert "trajectory (exact) did not match" in failure.text
    # the gate well below the truth: passed, decided early, no failure element
    gate = cases["scenarios/stochastic/weighted_pick_gate.yaml"]
    props = _props(gate)
    assert gate.find("failure") is None
    assert props["openprogram.eval.verdict"] == "pass"
    assert props["openprogram.eval.stopped_early"] == "true"
    assert int(props["openprogram.eval.n"]) < 60
    assert props["openprogram.eval.threshold"] == "0.3"
    assert props["openprogram.eval.decision"].startswith("threshold 0.3: lower bound ")


def test_text_xml_cannot_hold_is_replaced_and_markup_escaped(tmp_path: Path) -> None:
    nasty = 'ends </failure></testcase> <x a="1"> & \x1b[31mred\x00 \ufffe'
    sample = Sample(
        index=1, passed=False, checks={"result": False}, failures=[nasty],
        cassette=str(tmp_path / "sample-001.yaml"), error=nasty, model_calls=1, calls=[],
    )  # fmt: skip
    result = ScenarioResult(
        path=f"s/{nasty}.yaml", title=nasty, max_samples=1, confidence=0.95, threshold=None,
        expectations=["result"], samples=[sample],
    )  # fmt: skip
    out = write_eval_junit([result], tmp_path / "j.xml", name=nasty)
    (case,) = _cases(out).values()  # it parses
    failure = case.find("failure")
    assert failure is not None
    assert 'ends </failure></testcase> <x a="1"> & \ufffd[31mred\ufffd \ufffd' in failure.text
    assert case.attrib["name"].endswith("::" + nasty.replace("\x1b", "\ufffd").replace(
        "\x00", "\ufffd").replace("\ufffe", "\ufffd"))  # fmt: skip
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".j.xml")] == []


def test_a_scenario_interrupted_before_its_first_sample(tmp_path: Path) -> None:
    result = ScenarioResult(
        path="scenarios/x.yaml", title="x", max_samples=5, confidence=0.95, threshold=0.5,
        interrupted=True,
    )  # fmt: skip
    (case,) = _cases(write_eval_junit([result], tmp_path / "j.xml")).values()
    props = _props(case.find("properties"))
    assert (props["openprogram.eval.n"], props["openprogram.eval.verdict"]) == ("0", "undecided")
    assert props["openprogram.eval.interrupted"] == "true"
    assert props["openprogram.eval.decision"] == "threshold 0.5: no samples"
    failure = case.find("failure")
    assert failure is not None and failure.text is not None
    assert failure.text.splitlines()[1:] == ["interrupted after 0 of 5 samples"]
    html = write_eval_report([result], tmp_path / "e.html").read_text(encoding="utf-8")
    assert "No samples were taken." in html
    assert "interrupted after 0 of 5 samples" in html
