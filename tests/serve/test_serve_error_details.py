"""An error turn's details (``error_reason``, ``retryable``, ``retry_after``: scenario-file
keys) go over the wire as the provider says them: the status, ``retry-after`` (and
OpenAI's ``retry-after-ms``), ``x-should-retry``. The adapters read them back, so the
library's scenario passes over real HTTP as it does on the scripted model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openprogram_sim.play import run_scenario, serve_scenario
from openprogram_sim.scenario import load_scenario
from openprogram_sim.wire import APIS, WireServer, serve

SCENARIO = load_scenario(
    Path(__file__).resolve().parents[2] / "scenarios/stops/error_stop_with_details.yaml"
)
HI = [{"role": "user", "content": "hi"}]


DETAILS = ("error_reason", "retryable", "retry_after")


def _errored(trace: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in trace if e["type"] == "message_end" and e.get("error"))


@pytest.fixture(scope="module")
def server() -> Iterator[WireServer]:
    with serve_scenario(SCENARIO) as running:  # each case plays its own session
        yield running


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("api", APIS)
def test_each_adapter_reads_back_the_scripted_details(
    server: WireServer, api: str, stream: bool
) -> None:
    scripted = _errored(run_scenario(SCENARIO).trace)
    session = f"{api}-{stream}"
    outcome = run_scenario(SCENARIO, server.provider(api, stream=stream, session=session))
    server.assert_consumed(session)
    got = _errored(outcome.trace)
    assert {k: got.get(k) for k in DETAILS} == {k: scripted[k] for k in DETAILS}
    assert got["error_status"] == 429
    assert scripted["error"] in got["error"]  # inside the adapter's own wording


def test_the_openai_client_sees_the_rate_limit_and_when_to_retry() -> None:
    openai = pytest.importorskip("openai")
    turn = {"stop_reason": "error", "error": "slow down", "error_reason": "rate_limit"}
    with serve([{**turn, "retryable": True, "retry_after": 17}]) as server:
        c = openai.OpenAI(base_url=server.base_url("openai"), api_key="k", max_retries=0)
        with c, pytest.raises(openai.RateLimitError) as caught:
            c.chat.completions.create(model="gpt-4o-mini", messages=HI)
    headers = caught.value.response.headers
    assert (headers["retry-after"], headers["retry-after-ms"]) == ("17", "17000")
    assert headers["x-should-retry"] == "true"


REASONS = [
    ("overloaded", 529, "OverloadedError"),
    ("auth", 401, "AuthenticationError"),
    ("invalid_request", 400, "BadRequestError"),
    ("server", 500, "InternalServerError"),
]


@pytest.mark.parametrize(("reason", "status", "error"), REASONS)
def test_the_anthropic_client_sees_each_reason_as_its_error(
    reason: str, status: int, error: str
) -> None:
    anthropic = pytest.importorskip("anthropic")
    turn = {"stop_reason": "error", "error": f"scripted {reason}", "error_reason": reason}
    with serve([turn]) as server:
        c = anthropic.Anthropic(base_url=server.base_url("anthropic"), api_key="k", max_retries=0)
        with c, pytest.raises(getattr(anthropic, error)) as caught:
            c.messages.create(model="claude-scripted", max_tokens=10, messages=HI)
    assert caught.value.status_code == status
