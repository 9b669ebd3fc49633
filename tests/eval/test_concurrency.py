"""``--concurrency K`` over loopback: samples (and scenarios) K at a time against the wire
server, the verdict and the files exactly those of a run one at a time, a provider's limit
kept, Ctrl-C still reporting what ran."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from test_eval_cli import KEY, ROOT, WEIGHTED, eval_cli, run_eval, sessions_url

from openprogram_sim.eval import EvalOptions, evaluate_all
from openprogram_sim.play import serve_scenario
from openprogram_sim.scenario import load_scenario

FOLDER = "scenarios__stochastic__weighted_pick"


@pytest.mark.slow
def test_k_at_a_time_gives_the_verdict_and_files_of_one_at_a_time(tmp_path: Path) -> None:
    gate = ("--samples", "100", "--threshold", "0.95")
    runs, served = {}, {}
    for k in ("1", "4"):
        with serve_scenario(WEIGHTED) as server:  # a fresh server: the same sessions drawn
            runs[k] = run_eval(tmp_path / k, sessions_url(server), *gate, "--concurrency", k)
            served[k] = server.check().checked  # a session a sample, as the server saw them
    (one,), (four,) = runs["1"][1]["scenarios"], runs["4"][1]["scenarios"]
    assert four["samples"] == one["samples"] < 40 and four["verdict"] == one["verdict"] == "fail"
    assert four["passed"] == one["passed"] and four["interval"] == one["interval"]
    strip = ("cassette",)
    assert [{k: v for k, v in s.items() if k not in strip} for s in four["sample_results"]] == [
        {k: v for k, v in s.items() if k not in strip} for s in one["sample_results"]
    ]
    assert one["discarded"] == []
    # the samples in flight when the verdict was decided: started after it, not counted
    n = four["samples"]
    assert four["discarded"] == list(range(n + 1, n + 1 + len(four["discarded"])))
    # every sample the server served was counted or discarded: none started unaccounted
    # (how many were in flight at the decision depends on timing: samples finishing in
    # the same wait as sample n had freed slots not yet filled)
    session = f"session '{FOLDER}-{{}}'"
    assert sorted(served["1"]) == sorted(session.format(i) for i in range(1, n + 1))
    started = n + len(four["discarded"])
    assert sorted(served["4"]) == sorted(session.format(i) for i in range(1, started + 1))
    files = sorted(p.name for p in (tmp_path / "4" / "eval" / FOLDER).iterdir())
    assert files == [f"sample-{i:03d}.yaml" for i in range(1, n + 1)]
    assert runs["4"][1]["concurrency"] == 4
    stdout = runs["4"][0].stdout
    assert f"stopped after {n} of 100 samples: the verdict was decided" in stdout
    assert (
        f"discarded: sample(s) {', '.join(map(str, four['discarded']))}, in flight when the "
        "verdict was decided (not counted; their cassettes removed"
    ) in stdout
    assert runs["4"][0].stdout.splitlines()[0] == runs["1"][0].stdout.splitlines()[0]


SLOW = """scenario: a model that takes {wait} s a reply
tools:
  lookup_order:
    parameters: {{type: object, properties: {{order_id: {{type: string}}}}}}
    returns: "order 42: shipped"
exec: {{content: "Where is order 42?", tools: [lookup_order]}}
model:
  - tool_calls: [{{lookup_order: {{order_id: "42"}}}}]
    latency: {wait}
  - text: "Order 42 has shipped."
    latency: {wait}
expect:
  result: "Order 42 has shipped."
"""


def timed_eval(tmp_path: Path, **options: Any) -> float:
    """Seconds 8 samples of two 0.5 s replies take in process (no interpreter to start),
    through the real adapter over loopback."""
    tmp_path.mkdir()
    path = tmp_path / "slow.yaml"
    path.write_text(SLOW.format(wait=0.5))
    scenario = load_scenario(path)
    env = {"OPENAI_API_KEY": KEY, "CI": ""}
    with serve_scenario(path) as server, mock.patch.dict(os.environ, env):
        settings = EvalOptions(
            model="openai:gpt-4o-mini", samples=8, base_url=sessions_url(server),
            out=tmp_path / "eval", **options,
        )  # fmt: skip
        began = time.monotonic()
        (result,) = evaluate_all([scenario], settings)
        took = time.monotonic() - began
    assert result.passed == result.n == 8
    return took


@pytest.mark.slow
def test_samples_overlap_within_the_providers_limit(tmp_path: Path) -> None:
    # 8 samples of two 0.5 s replies: 8 s one at a time, at the least
    took = timed_eval(tmp_path / "four", concurrency=4)
    assert took < 6.5, took  # faster than one at a time could be: they overlapped
    # the provider's limit wins over --concurrency: two at a time take 4 s at the least
    limits = {"openai": 2, "anthropic": 1}
    took = timed_eval(tmp_path / "two", concurrency=8, provider_limits=limits)
    assert took >= 4.0, took


@pytest.mark.slow
def test_the_pyprojects_limits_hold_unless_a_flag_says_otherwise(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        "[tool.openprogram.eval]\nmax-concurrency-per-provider = {openai = 2, anthropic = 1}\n"
    )
    for name, flags, want in (
        ("kept", (), 2),
        ("flag", ("--max-concurrency-per-provider", "openai=3"), 3),
    ):
        with serve_scenario(WEIGHTED) as server:  # each run its own sessions
            _, data = run_eval(
                tmp_path / name, sessions_url(server), "--samples", "2", "--concurrency", "8",
                *flags, cwd=project,
            )  # fmt: skip
        assert data["concurrency"] == want, name
        # each sample had its own served session: none ran out of script
        assert [s["error"] for s in data["scenarios"][0]["sample_results"]] == [None, None]


def test_a_bad_pyproject_limit_is_named(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.openprogram.eval]\nmax-concurrency-per-provider = {openai = "lots"}\n'
    )
    done = eval_cli(
        str(WEIGHTED), "--model", "openai:gpt-4o-mini", "--out", str(tmp_path / "o"),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        f"openprogram-sim eval: {tmp_path / 'pyproject.toml'}: [tool.openprogram.eval] "
        "max-concurrency-per-provider: openai = 'lots' is not a number of samples >= 1\n"
    )


@pytest.mark.slow
def test_scenarios_run_at_once_are_reported_in_their_order(tmp_path: Path) -> None:
    copies = []
    for name in ("b_first.yaml", "a_second.yaml", "c_third.yaml"):
        copy = tmp_path / name
        copy.write_text(WEIGHTED.read_text())
        copies.append(copy)
    with serve_scenario(WEIGHTED) as server:
        done, data = run_eval(
            tmp_path, sessions_url(server), "--samples", "6", "--concurrency", "5",
            scenario=copies[0], more=tuple(copies[1:]),
        )  # fmt: skip
    assert [s["path"] for s in data["scenarios"]] == [str(c) for c in copies]
    assert [s["samples"] for s in data["scenarios"]] == [6, 6, 6]
    heads = [line.split()[1] for line in done.stdout.splitlines() if line[:4] in ("PASS", "FAIL")]
    assert heads == [str(c) for c in copies]
    for copy in copies:
        folder = tmp_path / "eval" / f"{copy.stem}"
        names = sorted(p.name for p in folder.iterdir())
        assert names == [f"sample-{i:03d}.yaml" for i in range(1, 7)], folder


@pytest.mark.slow
def test_ctrl_c_with_samples_in_flight_reports_each_of_them(tmp_path: Path) -> None:
    scenario = tmp_path / "slow.yaml"
    scenario.write_text(SLOW.format(wait=0.2))
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    env.pop("CI", None)
    out, results = tmp_path / "eval", tmp_path / "results.json"
    with serve_scenario(scenario) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "openprogram_sim.cli", "eval", str(scenario),
             "--model", "openai:gpt-4o-mini", "--base-url", sessions_url(server),
             "--samples", "100000", "--concurrency", "3", "--out", str(out),
             "--json", str(results)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not list(out.glob("*/sample-004.yaml")) and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 2, stderr
    assert stderr == (
        "openprogram-sim eval: stopping after this sample (Ctrl-C again to stop now)\n"
        "openprogram-sim eval: interrupted after 1 scenario(s); the samples taken are under "
        f"{out}\n"
    )
    taken = sorted(p.name for p in out.glob("*/sample-*.yaml"))
    assert len(taken) >= 4
    assert taken == [f"sample-{i:03d}.yaml" for i in range(1, len(taken) + 1)]
    assert f"interrupted after {len(taken)} of 100000 samples" in stdout
    assert f"{len(taken)}/{len(taken)} passed" in stdout
    assert not results.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrency", "0"], "--concurrency must be at least 1, got 0"),
        (
            ["--max-concurrency-per-provider", "openai"],
            "--max-concurrency-per-provider 'openai' is not PROVIDER=N (e.g. openai=4)",
        ),
        (
            ["--max-concurrency-per-provider", "openai=0"],
            "--max-concurrency-per-provider openai=0: the limit must be at least 1",
        ),
    ],
)
def test_bad_concurrency_options_are_named(tmp_path: Path, args: list[str], message: str) -> None:
    done = eval_cli(
        "scenarios/stochastic/weighted_pick.yaml", "--model", "openai:gpt-4o-mini",
        "--out", str(tmp_path), *args, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == f"openprogram-sim eval: {message}\n"


def test_a_setup_mistake_with_samples_in_flight_names_the_first_sample(tmp_path: Path) -> None:
    done = eval_cli(
        "scenarios/stochastic/weighted_pick.yaml", "--model", "openai:gpt-4o-mini",
        "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path), "--concurrency", "3",
        cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith(
        "openprogram-sim eval: scenarios/stochastic/weighted_pick.yaml: sample 1: no request "
        "reached the model (exec raised ModelError: "
    ), done.stderr
    assert done.stdout == ""
