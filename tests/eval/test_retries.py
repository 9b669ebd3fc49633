"""Retries of a sample's model calls refused with HTTP 429 or 5xx: the wire server plays
the refusals (``wire:`` turn faults with ``retry-after-ms``, ``retry-after`` or neither),
openprogram's real openai adapter sends through the eval's client (:meth:`EvalOptions.
client`: the sample's cassette, retried), and the cassette it leaves replays offline
through the plain adapter, which never retries, and distills into a scenario that passes."""

from __future__ import annotations

import asyncio
import email.utils
import os
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from test_eval_cli import ROOT, eval_cli, run_eval, sessions_url

from openprogram_sim.cassettes import Cassette, distill_yaml
from openprogram_sim.eval import EvalOptions, RetryPolicy
from openprogram_sim.eval._retries import asked_wait
from openprogram_sim.play import (
    RunOutcome,
    arun_scenario,
    check_outcome,
    run_scenario,
    serve_scenario,
)
from openprogram_sim.scenario import load_scenario

KEY = "sk-" + "placeholder-retry-" + "0123456789abcdefghij"

HEAD = """scenario: a model refused on the way
tools:
  lookup_order:
    parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]}
    returns: "order 42: shipped"
exec: {content: "Where is order 42?", tools: [lookup_order]}
expect:
  result: "Order 42 has shipped."
  trajectory:
    calls:
      - lookup_order: {order_id: "42"}
model:
"""
LOOKUP = '  - tool_calls: [{lookup_order: {order_id: "42"}}]\n'
ANSWER = '  - text: "Order 42 has shipped."\n'


def refused(status: int, **wire: Any) -> str:
    fault = ", ".join(f"{k}: {v}" for k, v in {"status": status, **wire}.items())
    return f'  - {{stop_reason: error, error: "slow down", wire: {{{fault}}}}}\n'


def write(tmp_path: Path, *turns: str) -> Path:
    path = tmp_path / "refused.yaml"
    path.write_text(HEAD + "".join(turns))
    return path


def sample(
    tmp_path: Path, path: Path, policy: RetryPolicy, name: str = "s1"
) -> tuple[RunOutcome, Cassette, float, list[Any]]:
    """One sample as the eval records it: the scenario through the real adapter, the
    eval's retrying client on its cassette; what the server received."""
    scenario = load_scenario(path)
    options = EvalOptions(model="openai:gpt-4o-mini", retries=policy)
    cassette = Cassette(tmp_path / "sample-001.yaml", record_mode="all")
    env = {"OPENAI_API_KEY": KEY, "CI": ""}
    with serve_scenario(path) as server, mock.patch.dict(os.environ, env):
        cassette.record_mode = "all"
        cassette.load()

        async def run() -> RunOutcome:
            async with options.client(cassette) as client:
                provider = cassette.provider(
                    options.model, client=client, base_url=f"{server.url}/s/{name}/v1"
                )
                return await arun_scenario(scenario, provider)

        began = time.monotonic()
        outcome = asyncio.run(run())
        took = time.monotonic() - began
        cassette.describe(model=options.model)
        cassette.save()
        received = list(server.session(name).requests)
    return outcome, cassette, took, received


def statuses(cassette: Cassette) -> list[int]:
    return [int(response["status"]["code"]) for _, response in cassette.vcr.data]


def replay(path: Path, scenario: Path) -> RunOutcome:
    """The cassette through the plain adapter (no retries), offline."""
    recorded = Cassette(path).load()
    outcome = asyncio.run(arun_scenario(load_scenario(scenario), recorded.provider()))
    recorded.assert_played()
    return outcome


def test_a_429_and_a_503_are_retried_and_the_cassette_replays_as_the_loop_saw_it(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, refused(429, retry_after_ms=50), LOOKUP, refused(503), ANSWER)
    outcome, cassette, _, received = sample(tmp_path, path, RetryPolicy(max_retries=3))
    assert outcome.error is None and outcome.result == "Order 42 has shipped."
    assert outcome.model_calls == 2  # the loop saw two calls, each answered
    assert len(received) == 4  # the server saw the refusals too
    assert statuses(cassette) == [200, 200]
    retries = cassette.metadata["retries"]
    assert [(r["call"], r["retry"], r["status"], r["asked"]) for r in retries] == [
        (1, 1, 429, "retry-after-ms: 50"),
        (2, 1, 503, "backoff (up to 0.5 s)"),
    ]
    assert retries[0]["waited"] == 0.05
    assert 0.25 <= retries[1]["waited"] <= 0.5  # equal jitter: half the ceiling and more
    assert '"code":"rate_limit_exceeded"' in retries[0]["body"]
    assert retries[0]["path"] == "/s/s1/v1/chat/completions"
    text = cassette.path.read_text()
    assert KEY not in text and "placeholder-retry" not in text
    # offline, through the adapter alone: the same run, every interaction played
    again = replay(cassette.path, path)
    assert again.error is None and again.result == outcome.result
    assert again.model_calls == 2
    # distilled, the regression a failing sample would leave passes on the scripted model
    distilled = tmp_path / "distilled.yaml"
    distilled.write_text(distill_yaml(cassette.path, scenario=str(path)))
    verdict = check_outcome(run_scenario(load_scenario(distilled)))
    assert verdict.passed, verdict.failures


def test_retry_after_in_seconds_is_waited(tmp_path: Path) -> None:
    path = write(tmp_path, refused(429, retry_after=1), LOOKUP, ANSWER)
    outcome, cassette, took, _ = sample(tmp_path, path, RetryPolicy())
    assert outcome.error is None
    assert took >= 1.0
    (retry,) = cassette.metadata["retries"]
    assert (retry["asked"], retry["waited"]) == ("retry-after: 1", 1.0)


def test_after_the_last_retry_the_loop_sees_the_refusal(tmp_path: Path) -> None:
    path = write(tmp_path, *[refused(429, retry_after_ms=10)] * 3, ANSWER)
    outcome, cassette, _, received = sample(tmp_path, path, RetryPolicy(max_retries=2))
    assert len(received) == 3
    assert outcome.error is not None and "429" in str(outcome.error_text)
    assert outcome.model_calls == 1
    assert statuses(cassette) == [429]  # what the loop saw, and replays
    assert [r["retry"] for r in cassette.metadata["retries"]] == [1, 2]
    again = replay(cassette.path, path)
    assert again.error_text == outcome.error_text


@pytest.mark.parametrize(
    ("fault", "why"),
    [
        (refused(503, headers='{"x-should-retry": "false"}'), "the server said not to"),
        (refused(429, retry_after=3600), "asked for longer than max_wait"),
        (refused(400), "not a 429 or 5xx"),
    ],
)
def test_a_refusal_that_is_not_to_be_retried_reaches_the_loop(
    tmp_path: Path, fault: str, why: str
) -> None:
    path = write(tmp_path, fault, ANSWER)
    outcome, cassette, took, received = sample(tmp_path, path, RetryPolicy())
    assert len(received) == 1, why
    assert outcome.error is not None and took < 30
    assert "retries" not in cassette.metadata


def test_max_retries_zero_sends_once(tmp_path: Path) -> None:
    path = write(tmp_path, refused(503), ANSWER)
    _, cassette, _, received = sample(tmp_path, path, RetryPolicy(max_retries=0))
    assert len(received) == 1 and statuses(cassette) == [503]


def test_the_backoff_doubles_to_its_cap_with_jitter_and_retry_after_comes_first() -> None:
    policy = RetryPolicy()
    ceilings = [policy.wait({}, n, 0.0, lambda: 1.0)[0] for n in range(1, 9)]
    assert ceilings == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    floors = [policy.wait({}, n, 0.0, lambda: 0.0)[0] for n in range(1, 4)]
    assert floors == [0.25, 0.5, 1.0]
    both = {"retry-after-ms": "1500", "retry-after": "9"}
    assert policy.wait(both, 1, 0.0, lambda: 0.0) == (1.5, "retry-after-ms: 1500")
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 12, usegmt=True)
    assert asked_wait({"retry-after": date}, now) == (12.0, f"retry-after: {date}")
    assert asked_wait({"retry-after": "soon"}, now) is None
    assert policy.retryable(529, {}) and policy.retryable(429, {})
    assert not policy.retryable(404, {}) and not policy.retryable(500, {"x-should-retry": "false"})


def test_bad_max_retries_is_named(tmp_path: Path) -> None:
    done = eval_cli(
        "scenarios/stochastic/weighted_pick.yaml", "--model", "openai:gpt-4o-mini",
        "--out", str(tmp_path), "--max-retries", "-1", cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == "openprogram-sim eval: --max-retries must be 0 or more, got -1\n"


@pytest.mark.slow
def test_eval_retries_served_refusals_and_counts_them(tmp_path: Path) -> None:
    path = write(tmp_path, refused(429, retry_after_ms=50), LOOKUP, refused(503), ANSWER)
    with serve_scenario(path) as server:
        done, data = run_eval(tmp_path, sessions_url(server), "--samples", "2", scenario=path)
    (result,) = data["scenarios"]
    assert result["passed"] == 2 and done.returncode == 0, done.stdout
    for one in result["sample_results"]:
        assert [(r["call"], r["status"]) for r in one["retries"]] == [(1, 429), (2, 503)]
        recorded = Cassette(one["cassette"]).load()
        assert statuses(recorded) == [200, 200]
        assert len(recorded.metadata["retries"]) == 2
    assert result["retries"] == data["retries"] == 4
    assert (
        "retries: 4 model call(s) retried (HTTP 429, 503); each kept in its sample's cassette"
    ) in done.stdout
    assert "2 samples; $0.0000 spent; 4 model call(s) retried; cassettes under" in done.stdout
    with serve_scenario(path) as server:
        done, data = run_eval(
            tmp_path / "none", sessions_url(server), "--samples", "2", "--max-retries", "0",
            scenario=path,
        )  # fmt: skip
    (result,) = data["scenarios"]
    assert result["passed"] == 0 and result["retries"] == 0 and done.returncode == 1
    assert "HTTP 429" in result["sample_results"][0]["failures"][0]
