"""Faults on top of a real cassette, through the real adapter: a stream cut after event N,
and a 429/5xx answered before turn N (the recorded reply then waits for a retry)."""

from __future__ import annotations

import json

import pytest
from cassette_support import MODELS, record, session, set_secrets, with_cassette

from openprogram_sim.cassettes import Cassette, ReplayFault
from openprogram_sim.play import check_outcome, run_scenario, serve_scenario
from openprogram_sim.scenario import parse_scenario


@pytest.fixture
def recordings(tmp_path, monkeypatch):
    set_secrets(monkeypatch)
    with serve_scenario(session(), cycle=True) as server:
        for api in ("gemini", "openai-chat", "bedrock"):
            record(session(), api, server, tmp_path / f"{api}.yaml")
    return tmp_path


def _replay(folder, api: str, faults: str):
    text = with_cassette(f"{api}.yaml", MODELS[api], faults=faults)
    return run_scenario(parse_scenario(text, str(folder / "s.yaml")))


@pytest.mark.parametrize("api", ["gemini", "bedrock"])
def test_a_stream_cut_after_event_n(recordings, api: str) -> None:
    outcome = _replay(recordings, api, "[{turn: 2, cut_after: 1}]")
    assert type(outcome.error).__name__ == "ModelError"
    assert "peer closed connection" in str(outcome.error)
    reply = [e for e in outcome.trace if e["type"] == "message_end" and e["role"] == "assistant"]
    assert reply[-1]["stop_reason"] == "error"
    assert reply[-1]["error_reason"] == "network"
    assert len(reply) == 2 and reply[0]["stop_reason"] == "toolUse"  # turn 1 as recorded


def test_a_429_before_turn_2(recordings) -> None:
    faults = "[{turn: 2, status: 429, retry_after: 7, message: slow down}]"
    outcome = _replay(recordings, "openai-chat", faults)
    end = [e for e in outcome.trace if e["type"] == "message_end" and e["role"] == "assistant"]
    assert end[-1]["error_reason"] == "rate_limit"
    assert end[-1]["error_status"] == 429
    assert end[-1]["retry_after"] == 7.0
    assert end[-1]["retryable"] is True
    assert "slow down" in end[-1]["error"]
    # the recorded turn 2 was never asked for, and a fault allows that
    verdict = check_outcome(outcome)
    assert [f.title for f in verdict.failures] == ["exec raised, and the scenario expects no error"]


def test_an_sdk_retries_past_a_503_onto_the_recording(recordings, openai) -> None:
    cassette = Cassette(
        recordings / "openai-chat.yaml",
        faults=[ReplayFault(turn=1, status=503, retry_after=0.01)],
    )
    body = json.loads(Cassette(recordings / "openai-chat.yaml").load().vcr.data[0][0].body)
    with cassette.patch():
        client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-x", max_retries=1)
        chunks = list(client.chat.completions.create(**body))
    assert cassette.requests == 2  # the 503, then the retry the recording answered
    calls = [c.choices[0].delta.tool_calls for c in chunks if c.choices]
    assert any(calls)
    assert cassette.mismatches == []


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ({"turn": 0, "status": 429}, "turns count from 1"),
        ({"turn": 1}, "exactly one of cut_after=N or status=CODE"),
        ({"turn": 1, "status": 200}, "give a 4xx or 5xx status"),
    ],
)
def test_faults_are_checked_when_made(fault: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReplayFault(**fault)
