"""The pytest form of an eval (``--openprogram-eval PROVIDER:MODEL --openprogram-samples
N``) in real pytest sessions (pytester) against a served stochastic scenario: one item per
scenario on the sequential test's verdict, the rates in the JUnit properties, the summary
and regressions of a failing one, the eval view as the report, under xdist too."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

import openprogram_sim.eval  # noqa: F401  (kept loaded across the inner sessions)
from openprogram_sim.play import serve_scenario
from openprogram_sim.wire import WireServer

ROOT = Path(__file__).resolve().parents[2]
WEIGHTED = ROOT / "scenarios" / "stochastic" / "weighted_pick.yaml"
KEY = "sk-" + "placeholder-plugin-" + "0123456789" + "abcdefghijklmnop"  # no key-shaped literal
MODEL = "openai:gpt-4o-mini"

# The served model looks the order up with probability 0.7: a scenario that expects the
# lookup passes at a true rate of 0.7, one that forbids it at 0.3.
NEVER_LOOKS = """\
scenario: the model answers without looking the order up
tools:
  lookup_order:
    parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]}
    returns: "order 42: shipped"
exec:
  content: "Where is order 42?"
  tools: [lookup_order]
model:
  - text: "It is probably on its way."
expect:
  properties:
    - never: {tool: lookup_order}
"""


@pytest.fixture
def server() -> Iterator[WireServer]:
    with serve_scenario(WEIGHTED) as served:
        yield served


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """Two scenarios under scenarios/stochastic/: the served one (true rate 0.7) and one
    that forbids the lookup (true rate 0.3)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("CI", "")  # the eval records its samples
    folder = pytester.path / "scenarios" / "stochastic"
    folder.mkdir(parents=True)
    (folder / "weighted_pick.yaml").write_text(WEIGHTED.read_text(encoding="utf-8"))
    (folder / "never_looks.yaml").write_text(NEVER_LOOKS)
    return pytester


def _eval_args(server: WireServer, *extra: str) -> list[str]:
    return [
        "-p", "no:cacheprovider", "--openprogram-eval", MODEL,
        "--openprogram-base-url", server.url + "/s/{sample}/v1", *extra,
    ]  # fmt: skip


def _cases(path: Path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    return {case.attrib["name"]: case for case in root.iter("testcase")}


def _props(case: ET.Element) -> dict[str, str]:
    return {p.attrib["name"]: p.attrib["value"] for p in case.iter("property")}


def _no_key_under(folder: Path) -> int:
    files = [f for f in folder.rglob("*") if f.is_file()]
    for file in files:
        assert KEY not in file.read_text(encoding="utf-8"), file
    return len(files)


@pytest.mark.slow
def test_each_scenario_is_an_item_on_the_sequential_verdict(
    project: pytest.Pytester, server: WireServer
) -> None:
    result = project.runpytest(
        *_eval_args(server, "--openprogram-samples", "100", "--openprogram-threshold", "0.5",
                    "--junitxml", "junit.xml", "--openprogram-report", "eval.html", "-rA"),
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    # the failing item shows the summary, how the verdict was decided and the regression
    result.stdout.fnmatch_lines(
        [
            "eval failed: the model answers without looking the order up",
            "  file: scenarios/stochastic/never_looks.yaml",
            f"  model: {MODEL}",
            "FAIL scenarios/stochastic/never_looks.yaml: * samples passed (rate 0.*, 95% "
            "interval [[]*], flaky); threshold 0.5: upper bound 0.* < 0.5 (Clopper-Pearson *)",
            "stopped early after * of 100 samples: the verdict was decided",
            "expectations held: properties */*",
            "regression: reports/eval/regressions/scenarios__stochastic__never_looks-1.yaml *",
            "failed in sample(s) * (first: reports/eval/scenarios__stochastic__never_looks/"
            "sample-*.yaml):",
            '  property 1 (never) does not hold: never: {"tool": "lookup_order"}',
        ]
    )
    # the session's end: one line per scenario
    result.stdout.fnmatch_lines(
        [
            f"*openprogram eval ({MODEL})*",
            "FAIL      scenarios/stochastic/never_looks.yaml  */* passed (rate 0.*stopped early)",
            "PASS      scenarios/stochastic/weighted_pick.yaml  */* passed (rate 0.*stopped early)",
            "cassettes and regressions under reports/eval",
        ]
    )
    # the JUnit properties carry the rates; the rates are near the truth
    cases = _cases(project.path / "junit.xml")
    never = _props(cases["the model answers without looking the order up"])
    looks = _props(cases["a one_of turn plays one weighted reply, drawn from the scenario's seed"])
    assert never["openprogram.eval.verdict"] == "fail"
    assert looks["openprogram.eval.verdict"] == "pass"
    for props, truth in ((never, 0.3), (looks, 0.7)):
        n, passed = int(props["openprogram.eval.n"]), int(props["openprogram.eval.passed"])
        assert 0 < passed < n < 100 and props["openprogram.eval.stopped_early"] == "true"
        assert float(props["openprogram.eval.pass_rate"]) == pytest.approx(passed / n, abs=1e-6)
        low = float(props["openprogram.eval.interval.low"])
        high = float(props["openprogram.eval.interval.high"])
        assert low <= truth <= high
        assert props["openprogram.eval.flaky"] == "true"
        assert props["openprogram.eval.threshold"] == "0.5"
        assert "openprogram.eval.pass_at.1" in props
    assert (
        never["openprogram.eval.expectation.properties.passed"] == never["openprogram.eval.passed"]
    )
    assert looks["openprogram.eval.expectation.trajectory.n"] == looks["openprogram.eval.n"]
    assert "openprogram.eval.regression.1" in never
    # the report is the eval view, each scenario's samples under it
    html = (project.path / "eval.html").read_text(encoding="utf-8")
    assert '<meta name="generator" content="openprogram_sim.eval">' in html
    sections = re.findall(r'<section class="scenario \w+" id="s\d+" data-path="([^"]+)" '
                          r'data-verdict="(\w+)">', html)  # fmt: skip
    assert sections == [
        ("scenarios/stochastic/never_looks.yaml", "fail"),
        ("scenarios/stochastic/weighted_pick.yaml", "pass"),
    ]
    rows = re.findall(r'data-status="(\w+)" data-kind="sample" data-tags="" data-sample', html)
    total = int(never["openprogram.eval.n"]) + int(looks["openprogram.eval.n"])
    assert len(rows) == total
    # the samples are cassettes under reports/eval, no key in any file
    samples = list((project.path / "reports" / "eval").glob("*/sample-*.yaml"))
    assert len(samples) == total
    assert _no_key_under(project.path / "reports" / "eval") > total
    assert KEY not in out


@pytest.mark.slow
def test_xdist_workers_run_the_evals_into_one_report(
    project: pytest.Pytester, server: WireServer
) -> None:
    result = project.runpytest_subprocess(
        *_eval_args(server, "-n", "2", "--openprogram-samples", "8", "--junitxml", "junit.xml",
                    "--openprogram-report", "eval.html"),
        timeout=300,
    )  # fmt: skip
    # without a threshold every sample must pass: both fail (each takes both kinds)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*2 workers*"])
    cases = _cases(project.path / "junit.xml")
    assert len(cases) == 2
    for case in cases.values():
        props = _props(case)
        assert props["openprogram.eval.n"] == "8"
        assert props["openprogram.eval.verdict"] == "fail"
        assert case.find("failure") is not None
    html = (project.path / "eval.html").read_text(encoding="utf-8")
    assert len(re.findall(r'data-kind="sample"', html)) == 16
    assert html.count('<section class="scenario') == 2
    result.stdout.fnmatch_lines(["*openprogram report (2 tests): *eval.html*"])


def test_eval_options_are_checked_before_any_sample(project: pytest.Pytester) -> None:
    alone = project.runpytest("--openprogram-samples", "5", "--openprogram-threshold", "0.8")
    assert alone.ret == pytest.ExitCode.USAGE_ERROR
    alone.stderr.fnmatch_lines(
        ["*--openprogram-samples, --openprogram-threshold: only used with --openprogram-eval "
         "PROVIDER:MODEL (e.g. --openprogram-eval openai:gpt-4o-mini)"]
    )  # fmt: skip
    for args, said in (
        (["--openprogram-eval", "gpt-4o"], "*--openprogram-eval 'gpt-4o' is not PROVIDER:MODEL*"),
        (
            ["--openprogram-eval", MODEL, "--openprogram-samples", "0"],
            "*--openprogram-samples must be at least 1, got 0",
        ),
        (
            ["--openprogram-eval", MODEL, "--openprogram-threshold", "80"],
            "*--openprogram-threshold is a pass rate between 0 and 1 (e.g. 0.8), got 80.0",
        ),
        (
            ["--openprogram-eval", MODEL, "--openprogram-concurrency", "0"],
            "*--openprogram-concurrency must be at least 1, got 0",
        ),
        (
            ["--openprogram-eval", "openai:no-such-model", "--openprogram-budget", "2"],
            "*--openprogram-budget 2: the pricing table has no price for openai:no-such-model*"
            "--openprogram-pricing FILE*",
        ),
    ):
        bad = project.runpytest(*args)
        assert bad.ret == pytest.ExitCode.USAGE_ERROR, args
        bad.stderr.fnmatch_lines([said])
    assert not (project.path / "reports").exists()


def test_an_eval_that_cannot_reach_the_model_says_what_to_check(
    project: pytest.Pytester,
) -> None:
    with serve_scenario(WEIGHTED) as gone:  # a port that was served, and is closed now
        url = gone.url
    result = project.runpytest(
        "-p", "no:cacheprovider", "--openprogram-eval", MODEL, "--openprogram-base-url",
        url + "/v1", "--openprogram-samples", "3", "-k", "weighted",
    )  # fmt: skip
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "eval could not run: a one_of turn plays one weighted reply*",
            "  file: scenarios/stochastic/weighted_pick.yaml",
            "*sample 1: no request reached the model (exec raised *); check --base-url and "
            "the key's environment variable",
        ]
    )


def test_a_scenario_naming_fixtures_is_not_sampled(
    project: pytest.Pytester, server: WireServer
) -> None:
    folder = project.path / "scenarios" / "stochastic"
    text = NEVER_LOOKS.replace("tools:\n", "fixtures: [tmp_path]\ntools:\n", 1)
    (folder / "never_looks.yaml").write_text(text)
    result = project.runpytest(*_eval_args(server, "-k", "never", "--openprogram-samples", "2"))
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        ["scenarios/stochastic/never_looks.yaml:*: a scenario that names pytest fixtures "
         "(fixtures:) cannot be sampled*"]
    )  # fmt: skip
    assert not list((project.path / "reports").rglob("sample-*.yaml"))


def test_without_the_option_scenario_items_run_on_the_script(project: pytest.Pytester) -> None:
    result = project.runpytest("-p", "no:cacheprovider", "--openprogram-scenarios")
    # the scripted weighted pick passes on its seed; never_looks's script has no lookup
    result.assert_outcomes(passed=2)
    assert "openprogram eval" not in result.stdout.str()


def test_samples_run_concurrently_and_are_all_counted(
    project: pytest.Pytester, server: WireServer
) -> None:
    result = project.runpytest(
        *_eval_args(server, "-k", "weighted", "--openprogram-samples", "12",
                    "--openprogram-concurrency", "4", "--junitxml", "junit.xml"),
    )  # fmt: skip
    result.assert_outcomes(failed=1, deselected=1)  # no threshold: every sample must pass
    (case,) = _cases(project.path / "junit.xml").values()
    props = _props(case)
    assert props["openprogram.eval.n"] == "12" and props["openprogram.eval.discarded"] == "0"
    assert props["openprogram.eval.cost_usd"] == "0.0"  # a priced model; the server sends no usage
    folder = project.path / "reports" / "eval" / "scenarios__stochastic__weighted_pick"
    assert sorted(p.name for p in folder.glob("sample-*.yaml")) == [
        f"sample-{i:03d}.yaml" for i in range(1, 13)
    ]


def test_an_undecided_verdict_fails_its_item_and_says_to_sample_more(
    project: pytest.Pytester, server: WireServer
) -> None:
    result = project.runpytest(
        *_eval_args(server, "-k", "weighted", "--openprogram-samples", "5",
                    "--openprogram-threshold", "0.7", "--junitxml", "junit.xml"),
    )  # fmt: skip
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "UNDECIDED scenarios/stochastic/weighted_pick.yaml: */5 samples passed *; threshold "
            "0.7: bound [[]*[]] holds 0.7 (Clopper-Pearson *)",
            "5 of 5 samples",
            "undecided: not passed; raise the samples (--openprogram-samples, --samples)",
        ]
    )
    (case,) = _cases(project.path / "junit.xml").values()
    assert _props(case)["openprogram.eval.verdict"] == "undecided"
    failure = case.find("failure")
    assert failure is not None and "eval failed" in failure.attrib["message"]
