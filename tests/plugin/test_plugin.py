"""The pytest plugin, through real inner pytest sessions (pytester)."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from plugin_data import TITLES
from report_html import parse_report


def test_every_scenario_file_is_an_item_named_by_path_and_title(
    scenario_project: pytest.Pytester,
) -> None:
    result = scenario_project.runpytest("--collect-only", "-q", "--openprogram-scenarios")
    for path, title in TITLES.items():
        result.stdout.fnmatch_lines([f"{path}::{title}"])
    result.stdout.fnmatch_lines(["scenarios/bad/typo.yaml::invalid", "6 tests collected*"])


def test_outcomes_pass_fail_and_invalid(scenario_project: pytest.Pytester) -> None:
    result = scenario_project.runpytest("--openprogram-scenarios", "--strict-markers")
    result.assert_outcomes(passed=4, failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_failure_shows_the_trace_diff_and_no_internal_traceback(
    scenario_project: pytest.Pytester,
) -> None:
    result = scenario_project.runpytest("--openprogram-scenarios=scenarios/steering")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*scenario: steering skips the remaining calls (broken on purpose)*",
            "scenario failed: steering skips the remaining calls (broken on purpose)",
            "  file: scenarios/steering/broken.yaml",
            "- events (ordered) did not match",
            "  expected event 2 of 3 did not match: out of order: it matches only #7, the match "
            "of expected event 1",
            "  closest actual tool_execution_end: #11",
            "    is_error   false        true  * <- differs",
        ]
    )
    out = result.stdout.str()
    for internal in ("Traceback", "openprogram_sim/plugin", "runtest", "raise ScenarioFailed"):
        assert internal not in out


def test_an_invalid_file_fails_with_its_line_and_fix(scenario_project: pytest.Pytester) -> None:
    result = scenario_project.runpytest("--openprogram-scenarios", "scenarios/bad")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "invalid scenario file scenarios/bad/typo.yaml:",
            "  scenarios/bad/typo.yaml:4: (exec.toolz) unknown key 'toolz'; did you mean 'tools'?",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_tags_are_registered_markers_that_m_selects(scenario_project: pytest.Pytester) -> None:
    result = scenario_project.runpytest(
        "--openprogram-scenarios", "--strict-markers", "-m", "steering"
    )
    result.assert_outcomes(failed=1, deselected=5)
    result = scenario_project.runpytest(
        "--openprogram-scenarios", "--strict-markers", "-m", "nested or cap"
    )
    result.assert_outcomes(passed=2, deselected=4)
    result = scenario_project.runpytest(
        "--openprogram-scenarios", "--strict-markers", "-m", "not steering and not basics"
    )
    result.assert_outcomes(passed=3, failed=1, deselected=2)


def test_k_selects_by_words_of_the_title_and_by_path(scenario_project: pytest.Pytester) -> None:
    result = scenario_project.runpytest("--openprogram-scenarios", "-k", "polling")
    result.assert_outcomes(passed=1, deselected=5)
    result = scenario_project.runpytest("--openprogram-scenarios", "-k", "follow-up and pass")
    result.assert_outcomes(passed=1, deselected=5)
    result = scenario_project.runpytest("--openprogram-scenarios", "-k", "one_pick")
    result.assert_outcomes(passed=1, deselected=5)


def test_without_the_option_scenario_files_are_not_collected(
    scenario_project: pytest.Pytester,
) -> None:
    result = scenario_project.runpytest()
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_scenarios_run_beside_python_tests_and_only_under_the_paths_given(
    scenario_project: pytest.Pytester,
) -> None:
    scenario_project.makepyfile(test_plain="def test_ok():\n    assert True\n")
    # a scenario-looking YAML file outside the given paths is left alone
    (scenario_project.path / "elsewhere.yaml").write_text("not: a scenario\n")
    result = scenario_project.runpytest(
        "test_plain.py", "--openprogram-scenarios", "scenarios/basics", "scenarios/cap"
    )
    result.assert_outcomes(passed=3)


def test_a_missing_path_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--openprogram-scenarios", "nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--openprogram-scenarios: no such file or directory*nowhere*"])


def test_junit_test_cases_carry_the_run_properties(scenario_project: pytest.Pytester) -> None:
    scenario_project.runpytest("--openprogram-scenarios", "--junitxml=junit.xml")
    root = ET.parse(scenario_project.path / "junit.xml").getroot()
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in root.iter("testcase")
    }
    assert props[TITLES["scenarios/nested/research.yaml"]] == {
        "model_calls": "4",
        "tool_calls": "2",
        "errors": "0",
        "end_reason": "stop",
        "max_depth": "1",
        "rounds": "2",
    }
    cap = props["the round cap ends a polling loop"]
    assert (cap["end_reason"], cap["errors"], cap["rounds"]) == ("cap", "1", "2")
    broken = props["steering skips the remaining calls (broken on purpose)"]
    assert (broken["tool_calls"], broken["errors"]) == ("3", "2")  # two skipped calls
    failure = next(
        c
        for c in root.iter("testcase")
        if c.get("name") == "steering skips the remaining calls (broken on purpose)"
    ).find("failure")
    assert failure is not None and "<- differs" in (failure.text or "")


def test_the_report_holds_every_scenario_with_verdict_and_timeline(
    scenario_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-secret-value-not-a-real-key")
    result = scenario_project.runpytest(
        "--openprogram-scenarios", "--openprogram-report", "out/report.html"
    )
    result.stdout.fnmatch_lines(["*openprogram report (6 tests): *out/report.html*"])
    html = (scenario_project.path / "out" / "report.html").read_text(encoding="utf-8")
    report = parse_report(html)
    by_path = {r["path"]: r for r in report.rows}
    assert set(by_path) == set(TITLES) | {"scenarios/bad/typo.yaml"}
    assert {p: r["status"] for p, r in by_path.items()} == {
        **dict.fromkeys(TITLES, "passed"),
        "scenarios/steering/broken.yaml": "failed",
        "scenarios/bad/typo.yaml": "error",
    }
    assert (
        "expected event 2 of 3 did not match"
        in by_path["scenarios/steering/broken.yaml"]["failure"]
    )
    assert "typo.yaml:4: (exec.toolz)" in by_path["scenarios/bad/typo.yaml"]["failure"]
    nested = by_path["scenarios/nested/research.yaml"]
    assert nested["title"] == TITLES["scenarios/nested/research.yaml"]
    (run,) = nested["runs"]
    depths = {e["depth"] for e in run["trace"]}
    assert depths == {0, 1}
    results = [e["result"] for e in run["trace"] if e["type"] == "tool_execution_end"]
    assert results == ["<b>bold</b> & </script>", "Tides follow the moon. </script><!--"]
    one_pick = by_path["scenarios/basics/one_pick.yaml"]["runs"][0]
    assert one_pick["usage"] == [{"input": 12, "output": 3}, None]
    assert report.counts == {"passed": 4, "failed": 1, "error": 1, "skipped": 0}
    assert "test-secret-value" not in html
    assert str(scenario_project.path) not in html  # no absolute paths of the machine


def test_python_tests_using_the_fixtures_appear_in_the_report(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_inner_traced_agent='''
        import pytest
        from openprogram import Runtime, ToolRegistry
        from openprogram_sim import assert_events

        ADD = {
            "spec": {"name": "add", "description": "Add.", "parameters": {
                "type": "object", "properties": {"a": {"type": "integer"}}}},
            "execute": lambda a: a + 1,
        }

        def run(model, recorder):
            runtime = Runtime(provider=model, registry=ToolRegistry())
            runtime.subscribe(recorder)
            return runtime.exec("go", tools=[ADD])

        @pytest.mark.slow
        def test_traced(openprogram_model, openprogram_trace):
            model = openprogram_model([{"tool_calls": [{"add": {"a": 1}}], "usage": {"input": 5}},
                                       "two"])
            assert run(model, openprogram_trace) == "two"
            assert_events(openprogram_trace, [  # the fixture itself, not only its .trace
                {"tool_execution_end": {"tool_name": "add", "result": "2"}},
                {"agent_end": {"reason": "stop"}},
            ])

        def test_traced_and_failing(openprogram_model, openprogram_trace,
                                    openprogram_assert_events):
            run(openprogram_model(["plain answer"]), openprogram_trace)
            openprogram_assert_events(openprogram_trace.trace, [
                {"tool_execution_start": {"tool_name": "add"}},
            ])

        def test_scenario_runner(openprogram_scenario):
            verdict = openprogram_scenario("""
        scenario: inline
        exec: {content: hi, tools: []}
        model: [{text: hello}]
        expect: {result: hello}
        """)
            assert verdict.passed

        def test_not_traced():
            assert True
        '''
    )
    pytester.makeini("[pytest]\nmarkers =\n    slow: a slow test\n")
    result = pytester.runpytest("--openprogram-report=r.html")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E * AssertionError: events (ordered) did not match",
            "E *  expected event 1 of 1 did not match: not found in the trace",
        ]
    )
    report = parse_report((pytester.path / "r.html").read_text(encoding="utf-8"))
    rows = {r["id"].split("::")[-1]: r for r in report.rows}
    assert set(rows) == {"test_traced", "test_traced_and_failing", "test_scenario_runner"}
    assert {n: r["kind"] for n, r in rows.items()} == dict.fromkeys(rows, "python")
    traced = rows["test_traced"]
    assert traced["status"] == "passed" and traced["tags"] == ["slow"]
    (run,) = traced["runs"]
    assert run["usage"] == [{"input": 5}, None]
    assert [e["tool_name"] for e in run["trace"] if e["type"] == "tool_execution_end"] == ["add"]
    failing = rows["test_traced_and_failing"]
    assert failing["status"] == "failed"
    assert "did not match" in failing["failure"]
    assert rows["test_scenario_runner"]["runs"][0]["label"] == "inline"


def test_the_plugin_imports_no_harness_at_start_up() -> None:
    code = (
        "import sys, openprogram_sim.plugin as p\n"
        "heavy = [m for m in ('pydantic', 'yaml', 'jinja2', 'openprogram', "
        "'openprogram_sim.scenario') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
