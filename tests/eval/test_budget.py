"""``--budget USD`` over loopback: a served scenario whose turns carry tokens, priced by a
``--pricing`` file; the eval stops before the next sample's estimated cost would pass the
budget, says so, and the JSON holds what was spent."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_eval_cli import ROOT, eval_cli, run_eval, sessions_url
from test_pricing import PRICES, usage_scenario

from openprogram_sim.play import serve_scenario


@pytest.mark.slow
def test_the_budget_stops_the_eval_before_it_is_passed(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    served = usage_scenario(tmp_path)
    second = tmp_path / "second.yaml"
    second.write_text(served.read_text())
    with serve_scenario(served) as server:
        done, data = run_eval(
            tmp_path, sessions_url(server), "--samples", "40", "--threshold", "0.5",
            "--pricing", str(prices), "--budget", "0.5", scenario=served, more=(second,),
        )  # fmt: skip
    first, other = data["scenarios"]
    samples = first["sample_results"]
    costs = [s["cost_usd"] for s in samples]
    spent = data["cost"]["spent_usd"]
    assert spent == pytest.approx(sum(costs)) and 0 < len(samples) < 40
    # it stopped because the next sample, at the mean so far, would pass the budget ...
    estimate = data["cost"]["next_sample_estimate_usd"]
    assert estimate == pytest.approx(sum(costs) / len(costs))
    assert spent + estimate > 0.5
    # ... and the last sample started was allowed: the spend before it and its estimate fit
    before = costs[:-1]
    assert sum(before) + (sum(before) / len(before) if before else 0) <= 0.5
    assert data["cost"]["stopped_by_budget"] is True and data["cost"]["budget_usd"] == 0.5
    assert first["budget_stopped"] is True and first["stopped_early"] is False
    assert first["verdict"] == "undecided"
    # the second scenario never started: reported, with no samples, and not passed
    assert other["samples"] == 0 and other["budget_stopped"] is True
    assert done.returncode == 1
    n = len(samples)
    assert f"stopped by --budget after {n} of 40 samples" in done.stdout
    assert "2 scenarios: 0 passed, 0 failed, 2 undecided (not passed: the budget stopped them)" in (
        done.stdout
    )
    assert "stopped by --budget after 0 of 40 samples" in done.stdout
    assert (
        f"budget $0.5000: stopped by it after ${spent:.4f} spent (the next sample was "
        f"estimated at ${estimate:.4f}); 2 scenario(s) not finished"
    ) in done.stdout
    assert len(list((tmp_path / "eval").glob("*/sample-*.yaml"))) == n


@pytest.mark.slow
def test_a_budget_a_verdict_fits_in_changes_nothing(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    with serve_scenario(usage_scenario(tmp_path)) as server:
        done, data = run_eval(
            tmp_path, sessions_url(server), "--samples", "3", "--pricing", str(prices),
            "--budget", "100",
        )  # fmt: skip
    assert data["cost"]["stopped_by_budget"] is False
    assert data["scenarios"][0]["samples"] == 3
    assert "stopped by" not in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--budget", "1", "--model", "openai:our-finetune"],
            "--budget 1: the pricing table has no price for openai:our-finetune, so the spend "
            "cannot be counted; give one with --pricing FILE or [tool.openprogram.pricing] in "
            "pyproject.toml (docs/evals.md)",
        ),
        (["--budget", "0"], "--budget must be dollars > 0 (e.g. 2.50), got 0.0"),
        (["--budget", "nan"], "--budget must be dollars > 0 (e.g. 2.50), got nan"),
    ],
)
def test_a_budget_that_cannot_be_kept_is_refused_before_any_sample(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = eval_cli(
        "scenarios/stochastic/weighted_pick.yaml", "--model", "openai:gpt-4o-mini",
        "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path), *args, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.endswith(f"openprogram-sim eval: {message}\n"), done.stderr
    assert not list(tmp_path.rglob("sample-*.yaml"))
