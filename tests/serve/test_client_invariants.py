"""The client's side of the protocol, checked on every named session over real loopback
HTTP: small agents on the plain ``openai`` SDK with planted bugs are each caught by their
invariant, with a message naming it, the session, the request and why; the SDK's own
retries pass; each invariant can be turned off (``ClientChecks``, ``serve --no-check``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx2
import pytest
from serve_support import interrupt, read_banner, serve_process

from openprogram_sim.play import serve_scenario
from openprogram_sim.wire import CLIENT_CHECKS, ClientChecks, WireServer

SEARCH_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
CHAT_TOOLS = [{"type": "function", "function": {"name": "search", "parameters": SEARCH_SCHEMA}}]
ASK = {"role": "user", "content": "Find a and b."}

TWO_CALLS = """\
scenario: two calls in one round
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
exec: {content: "Find a and b."}
model:
  - tool_calls: [{search: {q: a}}, {search: {q: b}}]
  - text: "Found both."
"""

RATE_LIMITED = """\
scenario: rate limited once
exec: {content: "Hi."}
model:
  - {stop_reason: error, error: "slow down", error_reason: rate_limit, retry_after: 1}
  - text: "Hello."
"""

TWO_ERRORS = """\
scenario: two server errors, then the answer
exec: {content: "Hi."}
model:
  - {stop_reason: error, error: "boom", error_reason: server}
  - {stop_reason: error, error: "boom", error_reason: server}
  - text: "Hello."
"""


THREE_TEXTS = """\
scenario: three answers
exec: {content: "Hi."}
model: [{text: "Hi."}, {text: "Hi again."}, {text: "Hello."}]
"""


def scenario(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "served.yaml"
    path.write_text(text)
    return path


def titles(server: WireServer, session: str) -> list[str]:
    response = httpx2.delete(f"{server.url}/s/{session}")
    assert response.status_code == 200
    return [f"{f['title']} | {f['where']}" for f in response.json()["failures"]]


def run_loop(openai: ModuleType, url: str, *, drop_second: bool = False) -> str:
    """An agent on the plain ``openai`` SDK: every call run and answered, until the model
    answers with text. ``drop_second``: the planted bug, a round's second result is lost."""
    client = openai.OpenAI(base_url=url, api_key="sk-test-0123456789", max_retries=0)
    messages: list[Any] = [ASK]
    with client:
        while True:
            reply = (
                client.chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS)
                .choices[0]
                .message
            )
            messages.append(reply.model_dump(exclude_none=True))
            if not reply.tool_calls:
                return str(reply.content)
            kept = [c for i, c in enumerate(reply.tool_calls) if not (drop_second and i == 1)]
            for call in kept:
                q = json.loads(call.function.arguments)["q"]
                messages.append({"role": "tool", "tool_call_id": call.id, "content": q})


def test_a_client_that_drops_the_second_result_breaks_answered_once(
    openai: ModuleType, tmp_path: Path
) -> None:
    with serve_scenario(scenario(tmp_path, TWO_CALLS)) as server:
        assert run_loop(openai, server.base_url("openai", "dropper"), drop_second=True)
        got = titles(server, "dropper")
        assert run_loop(openai, server.base_url("openai", "fixed")) == "Found both."
        fixed = titles(server, "fixed")
    assert got == [
        "client check answered_once broken by request #2: call call_wire1_1 (search) served "
        "in answer #1 has no result in the next request | session 'dropper', request #2"
    ]
    assert fixed == []


def test_a_result_sent_twice_or_for_no_call_is_caught(tmp_path: Path) -> None:
    with serve_scenario(scenario(tmp_path, TWO_CALLS)) as server:
        with httpx2.Client(base_url=server.url) as http:
            url = "/s/odd/v1/chat/completions"
            first = http.post(url, json={"model": "m", "messages": [ASK], "tools": CHAT_TOOLS})
            reply = first.json()["choices"][0]["message"]
            ids = [c["id"] for c in reply["tool_calls"]]
            results = [{"role": "tool", "tool_call_id": i, "content": "r"} for i in ids]
            stray = {"role": "tool", "tool_call_id": "call_nobody", "content": "r"}
            body = {"model": "m", "messages": [ASK, reply, *results, results[0], stray]}
            assert http.post(url, json=body).status_code == 200
        got = titles(server, "odd")
    assert got == [
        "client check answered_once broken by request #2: call call_wire1_0 (search) served "
        "in answer #1 has 2 results in the next request | session 'odd', request #2",
        "client check no_unknown_result broken by request #2: a tool result for call "
        "'call_nobody', which was never made (not served in this session, nor in the "
        "request's own history) | session 'odd', request #2",
    ]


@pytest.mark.slow
def test_a_retry_at_once_after_429_breaks_retry_after_and_the_sdks_own_retry_passes(
    openai: ModuleType, tmp_path: Path
) -> None:
    def eager(url: str) -> str:
        """Retries a 429 at once, ignoring retry-after (the planted bug)."""
        client = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0)
        with client:
            for _ in range(3):
                try:
                    reply = client.chat.completions.create(model="m", messages=[ASK])
                except openai.RateLimitError:
                    continue
                return str(reply.choices[0].message.content)
        raise AssertionError("no answer")

    with serve_scenario(scenario(tmp_path, RATE_LIMITED)) as server:
        assert eager(server.base_url("openai", "eager")) == "Hello."
        got = titles(server, "eager")
        sdk = openai.OpenAI(base_url=server.base_url("openai", "sdk"), api_key="sk-test")
        started = time.monotonic()
        with sdk:  # the SDK's own retry (max_retries=2) waits as retry-after says
            reply = sdk.chat.completions.create(model="m", messages=[ASK])
        waited = time.monotonic() - started
        assert reply.choices[0].message.content == "Hello."
        honoured = titles(server, "sdk")
    (only,) = got
    assert only.startswith("client check retry_after broken by request #2: it came 0.")
    assert only.endswith(
        " s after answer #1, whose retry-after asked for 1 s | session 'eager', request #2"
    )
    assert (honoured, waited >= 1.0) == ([], True)


def test_more_retries_than_allowed_break_max_retries(tmp_path: Path) -> None:
    path = scenario(tmp_path, TWO_ERRORS)
    body = {"model": "m", "messages": [ASK]}
    with serve_scenario(path, client_checks={"max_retries": 1}) as server:
        with httpx2.Client(base_url=server.url) as http:
            statuses = [http.post("/s/r/v1/chat/completions", json=body).status_code
                        for _ in range(3)]  # fmt: skip
        got = titles(server, "r")
    assert statuses == [500, 500, 200]
    assert got == [
        "client check max_retries broken by request #3: retry 2 of request #1 in a row, "
        "where 1 are allowed (max_retries) | session 'r', request #3"
    ]


def test_a_key_in_the_body_and_a_request_after_the_final_text_are_caught(
    openai: ModuleType, tmp_path: Path
) -> None:
    path = scenario(tmp_path, THREE_TEXTS)
    key = "sk-" + "test-secret-" + "0123456789"  # no key-shaped literal
    with serve_scenario(path) as server:
        client = openai.OpenAI(base_url=server.base_url("openai", "k"), api_key=key, max_retries=0)
        with client:
            leaked = [{"role": "user", "content": f"my key is {key}"}]
            client.chat.completions.create(model="m", messages=leaked)
            client.chat.completions.create(model="m", messages=leaked)  # again, after the text
            client.chat.completions.create(model="m", messages=[ASK])
        got = titles(server, "k")
    assert got == [
        "client check no_key_in_body broken by request #1: the body holds the API key the "
        "client sent in authorization | session 'k', request #1",
        "client check no_request_after_final broken by request #2: answer #1 was the final "
        "text, and this request brings no new user message (the same request again) "
        "| session 'k', request #2",
        "client check no_key_in_body broken by request #2: the body holds the API key the "
        "client sent in authorization | session 'k', request #2",
    ]


def test_checks_turned_off_and_bad_names(openai: ModuleType, tmp_path: Path) -> None:
    off = ClientChecks(off=frozenset({"answered_once"}))
    with serve_scenario(scenario(tmp_path, TWO_CALLS), client_checks=off) as server:
        run_loop(openai, server.base_url("openai", "dropper"), drop_second=True)
        assert titles(server, "dropper") == []
    with pytest.raises(ValueError) as caught:
        ClientChecks.of({"retry_afterr": False})
    assert str(caught.value) == (
        "unknown client check(s) 'retry_afterr'; the checks are answered_once, "
        "no_unknown_result, retry_after, max_retries, no_key_in_body, no_request_after_final"
    )


def test_the_cli_restates_the_check_names() -> None:
    from openprogram_sim.cli import serve as cli
    from openprogram_sim.wire import _client_checks

    assert cli.CLIENT_CHECKS == CLIENT_CHECKS
    assert cli.DEFAULT_MAX_RETRIES == _client_checks.DEFAULT_MAX_RETRIES


@pytest.mark.slow
@pytest.mark.parametrize("flags", [[], ["--no-check", "answered_once"]])
def test_serve_no_check_turns_an_invariant_off(
    openai: ModuleType, tmp_path: Path, flags: list[str]
) -> None:
    path = scenario(tmp_path, TWO_CALLS)
    with serve_process(path, "-q", *flags) as process:
        url, _ = read_banner(process)
        run_loop(openai, f"{url}/s/dropper/v1", drop_second=True)
        out, err = interrupt(process)
    assert process.returncode == (0 if flags else 1), err
    if flags:
        assert "PASS every scripted turn was served" in out
    else:
        assert (
            "- session 'dropper': client check answered_once broken by request #2: call "
            "call_wire1_1 (search) served in answer #1 has no result in the next request\n"
            "  at session 'dropper', request #2\n"
            "  (turn it off with serve --no-check answered_once, or the "
            "scenario's wire: {checks: {answered_once: false}})"
        ) in out


@pytest.mark.slow
def test_serve_refuses_an_unknown_check_name(tmp_path: Path) -> None:
    with serve_process(scenario(tmp_path, TWO_CALLS), "--no-check", "retry") as process:
        _, err = process.communicate(timeout=20)
    assert process.returncode == 2
    assert "argument --no-check: invalid choice: 'retry'" in err


def test_the_scenarios_wire_checks_turn_one_off_and_serve_adds_to_them(
    openai: ModuleType, tmp_path: Path
) -> None:
    path = scenario(tmp_path, TWO_CALLS + "wire: {checks: {answered_once: false}}\n")
    with serve_scenario(path) as server:
        run_loop(openai, server.base_url("openai", "dropper"), drop_second=True)
        assert titles(server, "dropper") == []
    path = scenario(tmp_path, TWO_ERRORS + "wire: {max_retries: 1}\n")
    body = {"model": "m", "messages": [ASK]}
    for given, broken in ((None, True), ({"max_retries": 2}, False)):
        with serve_scenario(path, client_checks=given) as server:
            with httpx2.Client(base_url=server.url) as http:
                for _ in range(3):
                    http.post("/s/r/v1/chat/completions", json=body)
            assert bool(titles(server, "r")) is broken


def test_an_unknown_check_in_the_scenario_is_refused_with_its_line(tmp_path: Path) -> None:
    from openprogram_sim.errors import ScenarioError
    from openprogram_sim.scenario import load_scenario

    path = scenario(tmp_path, TWO_CALLS + "wire:\n  checks: {retry_afterr: false}\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value) == (
        f"invalid scenario (1 problem):\n  {path}:10: (wire.checks.retry_afterr) Input should "
        "be 'answered_once', 'no_unknown_result', 'retry_after', 'max_retries', "
        "'no_key_in_body' or 'no_request_after_final' (got \"retry_afterr\")"
    )


def test_the_scenario_schema_names_the_same_checks() -> None:
    from typing import get_args

    from openprogram_sim.scenario._schema import ClientCheckName

    assert get_args(ClientCheckName) == CLIENT_CHECKS


SAME_IDS = """\
scenario: two rounds whose calls the script gives the same id
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
exec: {content: "Find a and b."}
model:
  - tool_calls: [{name: search, arguments: {q: a}, id: c1}]
  - tool_calls: [{name: search, arguments: {q: b}, id: c1}]
  - text: "Found both."
"""


def test_a_result_in_the_history_is_not_counted_again(openai: ModuleType, tmp_path: Path) -> None:
    with serve_scenario(scenario(tmp_path, SAME_IDS)) as server:
        assert run_loop(openai, server.base_url("openai", "same")) == "Found both."
        assert titles(server, "same") == []
