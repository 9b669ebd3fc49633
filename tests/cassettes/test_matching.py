"""Matching on method, path and JSON body: a request the cassette cannot answer gets the
API's own HTTP 400 (``x-should-retry: false``) naming the cassette, the closest recorded
request and the JSON paths that differ with both values, through our adapters and the
official SDKs alike; recorded interactions never requested fail; replay opens no socket."""

from __future__ import annotations

import pytest
from cassette_support import (
    MODELS,
    SESSION,
    block_sockets,
    record,
    session,
    set_secrets,
    with_cassette,
)

from openprogram_sim.cassettes import Cassette, CassetteError, CassetteMismatchError
from openprogram_sim.errors import ScenarioError
from openprogram_sim.play import check_outcome, run_scenario, serve_scenario
from openprogram_sim.scenario import parse_scenario
from openprogram_sim.trace import IgnoreList, differences, parse_path

CHANGED = SESSION.replace('["sunny, 21°C", "rain, 12°C"]', '["sunny, 22°C", "rain, 12°C"]')


@pytest.fixture
def recordings(tmp_path_factory, monkeypatch):
    """The session recorded once per API (Anthropic and OpenAI Chat)."""
    set_secrets(monkeypatch)
    root = tmp_path_factory.mktemp("recorded")
    with serve_scenario(session(), cycle=True) as server:
        for api in ("anthropic", "openai-chat"):
            record(session(), api, server, root / f"{api}.yaml")
    return root


def test_our_adapter_reports_the_closest_request_and_the_json_path(recordings) -> None:
    path = recordings / "anthropic.yaml"
    cassette = Cassette(path).load()
    outcome = run_scenario(session(CHANGED), cassette.provider())
    message = str(outcome.error)
    assert type(outcome.error).__name__ == "ModelError"
    assert message.startswith("Anthropic API error: HTTP 400 (invalid_request_error): ")
    assert f"cassette {path}: no recorded interaction matches request 2 (POST /v1/messages)" in (
        message
    )
    assert "closest: interaction 2 of 2, POST /v1/messages" in message
    assert (
        '$.messages[2].content[0].content[0].text: recorded "sunny, 21°C", sent "sunny, 22°C"'
        in message
    )
    assert outcome.trace[-1] == {"type": "agent_end", "depth": 0, "round": 2, "reason": "error"}
    problems = cassette.problems()
    assert problems[0] in message and len(problems) == 2
    assert "1 of 2 recorded interaction(s) were never requested (interaction 2)" in problems[1]
    with pytest.raises(CassetteMismatchError, match="closest: interaction 2 of 2"):
        cassette.assert_played()


def test_a_scenario_replaying_it_fails_with_that_message(recordings, tmp_path) -> None:
    text = with_cassette(str(recordings / "anthropic.yaml"), MODELS["anthropic"], CHANGED)
    verdict = check_outcome(run_scenario(parse_scenario(text, str(tmp_path / "s.yaml"))))
    titles = [f.title for f in verdict.failures]
    assert "exec raised, and the scenario expects no error" in titles
    assert "1 of 2 recorded interactions of cassette " in "\n".join(titles)
    assert 'sent "sunny, 22°C"' in verdict.report()


def test_values_in_the_message_are_scrubbed(recordings) -> None:
    key = "sk-proj-" + "Zz9" * 12
    leaky = SESSION.replace('["sunny, 21°C", "rain, 12°C"]', f'["{key}", "rain, 12°C"]')
    cassette = Cassette(recordings / "anthropic.yaml").load()
    outcome = run_scenario(session(leaky), cassette.provider())
    assert key not in str(outcome.error)
    assert 'sent "<redacted:openai-key>"' in str(outcome.error)


def test_the_openai_sdk_gets_the_message_and_does_not_retry(recordings, openai) -> None:
    cassette = Cassette(recordings / "openai-chat.yaml")
    with cassette.patch():
        client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-x", max_retries=3)
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "Something else"}]
            )
    assert cassette.requests == 1  # no retry
    message = str(caught.value)
    assert "no recorded interaction matches request 1 (POST /v1/chat/completions)" in message
    assert "closest: interaction 1 of 2" in message
    assert (
        '$.messages[0].content: recorded "You are a weather assistant.", sent "Something else"'
        in message
    )
    assert "... and 3 more difference(s)" in message


@pytest.mark.filterwarnings("ignore:The model:DeprecationWarning")
def test_the_anthropic_sdk_gets_the_message_and_does_not_retry(recordings, anthropic) -> None:
    cassette = Cassette(recordings / "anthropic.yaml")
    with cassette.patch():
        client = anthropic.Anthropic(base_url="http://127.0.0.1:9", api_key="k", max_retries=3)
        with pytest.raises(anthropic.BadRequestError, match="closest: interaction 1 of 2"):
            client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=10,
                messages=[{"role": "user", "content": "Something else"}],
            )
    assert cassette.requests == 1


def test_replay_opens_no_socket(recordings, monkeypatch, openai) -> None:
    attempts = block_sockets(monkeypatch)
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name)
    cassette = Cassette(recordings / "anthropic.yaml").load()
    outcome = run_scenario(session(), cassette.provider())
    assert outcome.error is None and cassette.problems() == []
    # an official SDK, through the patched transports
    sdk = Cassette(recordings / "openai-chat.yaml", allow_unplayed=True)
    with sdk.patch():
        client = openai.OpenAI(base_url="http://203.0.113.9/v1", api_key="sk-x", max_retries=0)
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            stream=True,
            **_first_request_fields(sdk),
        )
        pieces = [c.choices[0].delta.tool_calls for c in stream if c.choices]
    assert any(pieces)
    assert attempts == []


def _first_request_fields(cassette: Cassette) -> dict:
    import json

    body = json.loads(cassette.vcr.data[0][0].body)
    return {k: v for k, v in body.items() if k not in ("model", "stream")}


def test_a_missing_cassette_says_how_to_record_it(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(CassetteError, match="does not exist and the record mode is none"):
        Cassette(tmp_path / "nope.yaml").load()
    text = with_cassette("nope.yaml", MODELS["anthropic"])
    outcome = run_scenario(parse_scenario(text, str(tmp_path / "s.yaml")))
    assert f"{tmp_path / 's.yaml'}:" in str(outcome.error)
    assert "openprogram-sim record" in str(outcome.error)


def test_ignored_fields_do_not_count(recordings) -> None:
    cassette = Cassette(recordings / "anthropic.yaml", ignore=["$.system"]).load()
    other_prompt = SESSION.replace("You are a weather assistant.", "You are terse.")
    outcome = run_scenario(session(other_prompt), cassette.provider())
    assert outcome.error is None and cassette.problems() == []


def test_ignore_patterns() -> None:
    ignore = IgnoreList(["$.metadata", "$.messages[*].cache_control", '$["x-y"]'])
    body = {
        "metadata": {"user_id": "u1"},
        "messages": [{"text": "a", "cache_control": 1}, {"text": "b"}],
        "x-y": 1,
        "keep": True,
    }
    assert ignore.prune(body) == {"messages": [{"text": "a"}, {"text": "b"}], "keep": True}
    assert parse_path('$.a[0]["b c"].*') == ("a", 0, "b c", "*")
    with pytest.raises(ValueError, match=r"ignore pattern 'messages' must start with \$"):
        parse_path("messages")
    assert [d.path for d in differences({"a": [1, True]}, {"a": [1, 1], "b": 2})] == [
        "$.a[1]",
        "$.b",
    ]


def test_a_bad_ignore_pattern_is_a_load_error_with_its_line() -> None:
    text = with_cassette("c.yaml", MODELS["anthropic"], ignore="['$.a b']")
    with pytest.raises(
        ScenarioError, match=r"s\.yaml:\d+: \(model\.ignore\) ignore pattern '\$\.a b': cannot read"
    ):
        parse_scenario(text, "s.yaml")
