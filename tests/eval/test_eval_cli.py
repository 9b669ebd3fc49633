"""``openprogram-sim eval`` end to end over loopback: a stochastic scenario served by the
wire server (a known true pass rate, 0.7), sampled through the real openai adapter by the
command in a subprocess, each sample recorded as a cassette."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openprogram_sim.play import serve_scenario
from openprogram_sim.wire import WireServer

ROOT = Path(__file__).resolve().parents[2]
WEIGHTED = ROOT / "scenarios" / "stochastic" / "weighted_pick.yaml"
TRUTH = 0.7
KEY = "sk-" + "placeholder-eval-" + "0123456789" + "abcdefghijklmnopqrstuv"  # no key-shaped literal


def eval_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    env.pop("CI", None)
    return subprocess.run(
        [sys.executable, "-m", "openprogram_sim.cli", "eval", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def variant(tmp_path: Path, name: str, **changes: str) -> Path:
    """The weighted scenario with some of its text replaced (weights, seed)."""
    text = WEIGHTED.read_text()
    for old, new in changes.items():
        text = text.replace(old.replace("_", " ").replace("  ", "_"), new)
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def server() -> Iterator[WireServer]:
    with serve_scenario(WEIGHTED) as served:
        yield served


def sessions_url(server: WireServer) -> str:
    return server.url + "/s/{sample}/v1"


def run_eval(
    tmp_path: Path,
    url: str,
    *extra: str,
    scenario: Path = WEIGHTED,
    more: tuple[Path, ...] = (),
    model: str = "openai:gpt-4o-mini",
    cwd: Path = ROOT,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``eval`` of ``scenario`` (and ``more``) against ``url``, its results file read."""
    out = tmp_path / "results.json"
    shown = [str(s.relative_to(cwd) if s.is_relative_to(cwd) else s) for s in (scenario, *more)]
    done = eval_cli(
        *shown, "--model", model, "--base-url", url,
        "--out", str(tmp_path / "eval"), "--json", str(out), *extra, cwd=cwd,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return done, json.loads(out.read_text())


def no_key_on_disk(folder: Path) -> int:
    """Check every file written (cassettes, regressions) for the key; the cassettes."""
    for file in folder.rglob("*"):
        if file.is_file():
            text = file.read_text()
            assert KEY not in text, file
            assert "placeholder-eval" not in text, file
    return len(list(folder.glob("*/sample-*.yaml")))


@pytest.mark.slow
def test_eval_estimates_the_served_rate_and_records_each_sample(
    tmp_path: Path, server: WireServer
) -> None:
    done, data = run_eval(tmp_path, sessions_url(server), "--samples", "40")
    (result,) = data["scenarios"]
    assert result["samples"] == 40 and not result["stopped_early"]
    low, high = result["interval"]["low"], result["interval"]["high"]
    assert low <= TRUTH <= high  # seeded: the server's draws follow the scenario's seed
    assert result["passed"] == 29  # fixed by the seed and the sample names
    assert result["flaky"] is True
    assert result["verdict"] == "fail"  # without --threshold every sample must pass
    assert result["expectations"] == {
        "trajectory": {"passed": 29, "samples": 40},
        "properties": {"passed": 40, "samples": 40},
    }
    assert result["pass_at_k"]["1"] == pytest.approx(29 / 40)
    assert done.returncode == 1
    line = done.stdout.splitlines()[0]
    assert line.startswith(
        "FAIL      scenarios/stochastic/weighted_pick.yaml  29/40 passed (rate 0.725, 95% "
        "interval [0.572, 0.839])  flaky"
    ), line
    assert "expectations: trajectory 29/40  properties 40/40" in done.stdout
    assert "1 scenarios: 0 passed, 1 failed (openai:gpt-4o-mini, 40 samples;" in done.stdout
    cassettes = sorted((tmp_path / "eval" / "scenarios__stochastic__weighted_pick").glob("*.yaml"))
    assert [c.name for c in cassettes] == [f"sample-{i:03d}.yaml" for i in range(1, 41)]
    assert [s["cassette"] for s in result["sample_results"]] == [str(c) for c in cassettes]
    assert "authorization: Bearer <redacted>" in cassettes[0].read_text()
    assert no_key_on_disk(tmp_path / "eval") == 40


@pytest.mark.slow
def test_a_threshold_well_above_the_truth_fails_early(tmp_path: Path, server: WireServer) -> None:
    done, data = run_eval(tmp_path, sessions_url(server), "--samples", "100", "--threshold", "0.95")
    (result,) = data["scenarios"]
    assert result["verdict"] == "fail" and done.returncode == 1
    assert result["stopped_early"] and result["samples"] < 40
    assert result["decision_interval"]["high"] < 0.95
    assert f"stopped after {result['samples']} of 100 samples: the verdict was decided" in (
        done.stdout
    )
    assert "threshold 0.95: upper bound" in done.stdout
    assert no_key_on_disk(tmp_path / "eval") == result["samples"]


@pytest.mark.slow
def test_a_threshold_well_below_the_truth_passes_early(tmp_path: Path, server: WireServer) -> None:
    done, data = run_eval(tmp_path, sessions_url(server), "--samples", "100", "--threshold", "0.3")
    (result,) = data["scenarios"]
    assert result["verdict"] == "pass" and done.returncode == 0
    assert result["stopped_early"] and result["samples"] < 40
    assert result["decision_interval"]["low"] > 0.3
    assert done.stdout.startswith("PASS      scenarios/stochastic/weighted_pick.yaml")
    assert "1 scenarios: 1 passed, 0 failed" in done.stdout
    assert no_key_on_disk(tmp_path / "eval") == result["samples"]


@pytest.mark.slow
def test_a_planted_drop_is_flagged_against_the_baseline_and_a_rerun_is_not(
    tmp_path: Path, server: WireServer
) -> None:
    gate = ("--samples", "40", "--threshold", "0.05", "--no-early-stop")
    _, before = run_eval(tmp_path / "before", sessions_url(server), *gate)
    baseline = tmp_path / "before" / "results.json"
    # the same rate, other draws: the scenario served with another seed
    rerun = variant(tmp_path, "rerun.yaml", **{"seed: 7": "seed: 8"})
    # a planted drop: the lookup now comes one time in five
    worse = variant(tmp_path, "worse.yaml", **{"weight: 0.7": "weight: 0.2"})
    worse.write_text(worse.read_text().replace("weight: 0.3", "weight: 0.8"))
    for name, served, flagged in (("same", rerun, False), ("drop", worse, True)):
        with serve_scenario(served) as other:
            done, data = run_eval(
                tmp_path / name, sessions_url(other), *gate, "--baseline", str(baseline)
            )
        (result,) = data["scenarios"]
        change = result["baseline"]
        assert change["before"] == {"passed": before["scenarios"][0]["passed"], "samples": 40}
        assert change["significant"] is flagged, (name, change)
        assert done.returncode == (1 if flagged else 0), done.stdout
        mark = "CHANGED " if flagged else "same    "
        assert f"baseline  {mark} scenarios/stochastic/weighted_pick.yaml  " in done.stdout
        if flagged:
            assert change["direction"] == "drop" and change["p_value"] < 0.05
            assert "drop beyond chance (Fisher's exact test, p = " in done.stdout
            assert "; 1 dropped against the baseline" in done.stdout
        else:
            assert "no change beyond chance" in done.stdout


def test_expectations_that_pin_a_script_are_not_applicable(
    tmp_path: Path, server: WireServer
) -> None:
    scripted = WEIGHTED.read_text() + (
        "  events:\n    - tool_execution_start: {tool_name: lookup_order}\n  model_calls: 2\n"
    )
    path = tmp_path / "pinned.yaml"
    path.write_text(scripted)
    done, data = run_eval(tmp_path, sessions_url(server), "--samples", "2", scenario=path)
    (result,) = data["scenarios"]
    assert result["not_applicable"] == ["events", "model_calls"]
    assert set(result["expectations"]) == {"trajectory", "properties"}
    assert "not applicable: events, model_calls (they pin what a script does)" in done.stdout


def test_a_setup_mistake_stops_the_eval_with_status_2(tmp_path: Path) -> None:
    done = eval_cli(
        str(WEIGHTED), "--model", "openai:gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1",
        "--out", str(tmp_path), cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith(
        "openprogram-sim eval: scenarios/stochastic/weighted_pick.yaml: sample 1: no request "
        "reached the model (exec raised ModelError: "
    ), done.stderr
    assert "check --base-url and the key's environment variable" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threshold", "1.5"], "--threshold is a pass rate between 0 and 1 (e.g. 0.8), got 1.5"),
        (["--samples", "0"], "--samples must be at least 1, got 0"),
        (["--model", "gpt-4o"], "--model 'gpt-4o' is not PROVIDER:MODEL (e.g. openai:gpt-4o-mini)"),
    ],
)
def test_bad_options_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    from openprogram_sim.cli import main

    argv = ["eval", str(WEIGHTED), "--model", "openai:gpt-4o-mini", "--out", str(tmp_path)]
    assert main([*argv, *args]) == 2
    assert capsys.readouterr().err == f"openprogram-sim eval: {message}\n"


def test_a_baseline_that_is_not_an_eval_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from openprogram_sim.cli import main

    bad = tmp_path / "b.json"
    bad.write_text('{"x": 1}')
    argv = ["eval", str(WEIGHTED), "--model", "openai:gpt-4o-mini", "--baseline", str(bad)]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"openprogram-sim eval: --baseline {bad}: not an eval's --json file (no scenarios: "
        "list); write one with openprogram-sim eval ... --json FILE\n"
    )


THREE = ROOT / "scenarios" / "stochastic" / "three_ways.yaml"


@pytest.mark.slow
def test_each_distinct_failure_is_distilled_once_and_fails_under_run(tmp_path: Path) -> None:
    with serve_scenario(THREE) as server:
        done, data = run_eval(tmp_path, sessions_url(server), "--samples", "30", scenario=THREE)
    (result,) = data["scenarios"]
    failing = [s for s in result["sample_results"] if not s["passed"]]
    regressions = result["regressions"]
    # two wrong ways (the wrong order looked up, no lookup): two files, with their counts
    assert len(regressions) == 2
    assert sum(r["count"] for r in regressions) == len(failing) == 30 - result["passed"]
    assert sorted(i for r in regressions for i in r["samples"]) == [s["index"] for s in failing]
    assert sorted(r["failed"] for r in regressions) == [
        ["trajectory"],
        ["trajectory", "properties"],
    ]
    folder = tmp_path / "eval" / "regressions"
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        "scenarios__stochastic__three_ways-1.yaml",
        "scenarios__stochastic__three_ways-2.yaml",
    ]
    for regression in regressions:
        text = Path(regression["path"]).read_text()
        assert text.startswith(
            "# A regression from openprogram-sim eval of scenarios/stochastic/three_ways.yaml: "
            f"{regression['count']} failing\n# sample(s) made this trajectory; it fails on "
            f"{', '.join(regression['failed'])}, as they did.\n"
        ), text
        assert f"regression: {regression['path']} ({regression['count']} failing" in done.stdout
        assert KEY not in text
    # each fails under run, offline, on the expectation its samples failed
    run = subprocess.run(
        [sys.executable, "-m", "openprogram_sim.cli", "run", str(folder)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout
    assert "2 scenarios: 0 passed, 2 failed" in run.stdout
    assert run.stdout.count("trajectory (superset) did not match") == 2
    assert no_key_on_disk(tmp_path / "eval") == 30
    # a rerun whose samples all pass leaves no regression of the last run behind
    right = THREE.read_text().split("model:")[0] + (
        'model:\n  - tool_calls: [{lookup_order: {order_id: "42"}}]\n  - text: "Shipped."\n'
    )
    always = tmp_path / "always.yaml"
    always.write_text(right)
    with serve_scenario(always) as server:
        done, data = run_eval(tmp_path, sessions_url(server), "--samples", "3", scenario=THREE)
    assert data["scenarios"][0]["passed"] == 3 and done.returncode == 0
    assert list(folder.iterdir()) == []


@pytest.mark.slow
def test_a_conversation_is_judged_by_its_steps_results_not_their_events(tmp_path: Path) -> None:
    talk = ROOT / "scenarios" / "conversation" / "second_user_turn.yaml"
    with serve_scenario(talk) as server:
        done, data = run_eval(tmp_path, sessions_url(server), "--samples", "2", scenario=talk)
    (result,) = data["scenarios"]
    assert result["not_applicable"] == ["events", "counts", "requests", "history", "model_calls"]
    assert result["expectations"] == {"exec": {"passed": 2, "samples": 2}}
    assert done.returncode == 0, done.stdout
    # a step's result that the model does not give fails the sample
    wrong = talk.read_text().replace('- text: "Sun tomorrow."', '- text: "Snow."')
    other = tmp_path / "other.yaml"
    other.write_text(wrong)
    with serve_scenario(other) as server:
        done, data = run_eval(tmp_path, sessions_url(server), "--samples", "2", scenario=talk)
    assert data["scenarios"][0]["passed"] == 0 and done.returncode == 1
    assert data["scenarios"][0]["sample_results"][0]["failures"] == [
        "exec 2: exec returned something else\nat scenarios/conversation/second_user_turn.yaml:38\n"
        '  expected: "Sun tomorrow."\n  actual:   "Snow."'
    ]


def test_tokens_are_counted_per_sample_and_in_total(tmp_path: Path) -> None:
    text = WEIGHTED.read_text().replace(
        '  - text: "Order 42 has shipped."',
        '  - text: "Order 42 has shipped."\n    usage: {input: 30, output: 7}',
    )
    text = text.replace(
        "      - weight: 0.3\n        text:",
        "      - weight: 0.3\n        usage: {input: 20, output: 3}\n        text:",
    )
    text = text.replace(
        "      - weight: 0.7\n",
        "      - weight: 0.7\n        usage: {input: 20, output: 9}\n",
    )
    served = tmp_path / "tokens.yaml"
    served.write_text(text)
    with serve_scenario(served) as server:
        done, data = run_eval(tmp_path, sessions_url(server), "--samples", "4")
    (result,) = data["scenarios"]
    by_sample = [s["usage"] for s in result["sample_results"]]
    looked = [s["checks"]["trajectory"] for s in result["sample_results"]]
    want = [{"input": 50, "output": 16} if hit else {"input": 20, "output": 3} for hit in looked]
    assert [{k: u[k] for k in ("input", "output")} for u in by_sample] == want
    total_in = sum(w["input"] for w in want)
    total_out = sum(w["output"] for w in want)
    assert result["usage"]["input"] == total_in and result["usage"]["output"] == total_out
    assert f"tokens: {total_in} input, {total_out} output (" in done.stdout


@pytest.mark.slow
def test_ctrl_c_ends_the_eval_after_the_sample_running(tmp_path: Path, server: WireServer) -> None:
    import signal
    import time

    env = {**os.environ, "OPENAI_API_KEY": KEY}
    out, results = tmp_path / "eval", tmp_path / "results.json"
    page, junit = tmp_path / "eval.html", tmp_path / "eval.xml"
    process = subprocess.Popen(
        [sys.executable, "-m", "openprogram_sim.cli", "eval",
         "scenarios/stochastic/weighted_pick.yaml", "--model", "openai:gpt-4o-mini",
         "--base-url", sessions_url(server), "--samples", "100000", "--out", str(out),
         "--json", str(results), "--report", str(page), "--junitxml", str(junit)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not list(out.glob("*/sample-003.yaml")) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 2, stderr
    assert stderr == (
        "openprogram-sim eval: stopping after this sample (Ctrl-C again to stop now)\n"
        "openprogram-sim eval: interrupted after 1 scenario(s); the samples taken are under "
        f"{out}\n"
    )
    taken = len(list(out.glob("*/sample-*.yaml")))
    assert taken >= 3
    assert f"interrupted after {taken} of 100000 samples" in stdout
    assert not results.exists()  # an interrupted eval writes no results file
    assert not junit.exists()  # nor a gate's JUnit file
    assert "interrupted" in page.read_text()  # the page shows what ran


@pytest.mark.slow
def test_report_and_junitxml_are_written_with_the_eval(tmp_path: Path, server: WireServer) -> None:
    import xml.etree.ElementTree as ET

    page, junit = tmp_path / "out" / "eval.html", tmp_path / "out" / "eval.xml"
    done, data = run_eval(
        tmp_path, sessions_url(server), "--samples", "8", "--threshold", "0.5",
        "--report", str(page), "--junitxml", str(junit),
    )  # fmt: skip
    (result,) = data["scenarios"]
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") or html.lstrip().lower().startswith("<!doctype")
    assert "scenarios/stochastic/weighted_pick.yaml" in html and "openai:gpt-4o-mini" in html
    for sample in result["sample_results"]:
        assert sample["cassette"] in html  # each sample listed with its cassette's path
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    (case,) = suite.findall("testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["openprogram.eval.pass_rate"] == repr(round(result["rate"], 6))
    assert props["openprogram.eval.n"] == str(result["samples"])
    assert props["openprogram.eval.verdict"] == result["verdict"]
    assert (case.find("failure") is None) == (result["verdict"] == "pass")
    assert done.returncode == (0 if result["verdict"] == "pass" else 1)
