"""Behaviour coverage on the wire: the client's own behaviours, read from each served
session's report (a tool error passed back, a 429's retry-after honoured, a cut stream
recovered, every parallel result returned, stopped on text, ...), shown by real clients on
the official ``openai`` and ``anthropic`` SDKs, each in a session with a script of its own;
the table ``serve --coverage`` prints, asserted whole."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest
from test_serve_report import KEY, claude_agent

from openprogram_sim.coverage import WIRE_CATALOGUE, WireCoverage, wire_behaviours
from openprogram_sim.wire import serve

ASK = {"role": "user", "content": "Hi."}
TWO_CALLS = [
    {"tool_calls": [{"search": {"q": "a"}}, {"search": {"q": "b"}}]},
    {"text": "Found both."},
]
RATE_LIMITED = [
    {"stop_reason": "error", "error": "slow down", "error_reason": "rate_limit",
     "wire": {"retry_after_ms": 150}},
    {"text": "Hello."},
]  # fmt: skip
SEARCH = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def eager(openai: ModuleType, url: str) -> str:
    """Retries a 429 at once, ignoring its retry-after (the planted bug)."""
    client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)
    with client:
        for _ in range(3):
            try:
                return str(client.chat.completions.create(model="m", messages=[ASK]).choices[0]
                           .message.content)  # fmt: skip
            except openai.RateLimitError:
                continue
    raise AssertionError("no answer")


def streaming_retry(openai: ModuleType, url: str) -> str:
    """Streams, and asks again when the stream brings an error."""
    client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)
    with client:
        for _ in range(3):
            try:
                stream = client.chat.completions.create(model="m", messages=[ASK], stream=True)
                return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            except openai.APIError:
                continue
    raise AssertionError("no answer")


def conversation(openai: ModuleType, url: str) -> list[str]:
    """Two user turns on one history."""
    client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)
    messages: list[dict[str, Any]] = [ASK]
    said = []
    with client:
        for follow in ("And then?", None):
            reply = client.chat.completions.create(model="m", messages=messages).choices[0].message
            said.append(str(reply.content))
            messages.append({"role": "assistant", "content": reply.content})
            if follow is not None:
                messages.append({"role": "user", "content": follow})
    return said


def responses_chain(openai: ModuleType, url: str) -> str:
    """OpenAI Responses, sending only the new items with ``previous_response_id``."""
    client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)
    tools = [{"type": "function", "name": "search", "parameters": SEARCH}]
    with client:
        first = client.responses.create(model="gpt-5-mini", input="Find a.", tools=tools)
        (call,) = [o for o in first.output if o.type == "function_call"]
        q = json.loads(call.arguments)["q"]
        output = {"type": "function_call_output", "call_id": call.call_id, "output": f"r {q}"}
        second = client.responses.create(
            model="gpt-5-mini", previous_response_id=first.id, input=[output], tools=tools
        )
    return str(second.output_text)


@pytest.mark.slow
def test_the_behaviours_each_client_showed_and_the_table(
    openai: ModuleType, anthropic: ModuleType
) -> None:
    with serve(["unused"]) as server:
        scripts = {
            "limited": RATE_LIMITED,
            "eager": RATE_LIMITED,
            "cut": [{"text": "an answer cut off in its middle", "wire": {"cut_after": 1}},
                    {"text": "Hello."}],
            "instream": [{"text": "partial", "stop_reason": "error", "error": "overloaded",
                          "wire": {"error_mode": "stream"}}, {"text": "Hello."}],
            "claude": TWO_CALLS,
            "talk": [{"text": "Hello."}, {"text": "Then this."}],
            "chain": [{"tool_calls": [{"search": {"q": "a"}}]}, {"text": "Found a."}],
        }  # fmt: skip
        for name, turns in scripts.items():
            server.open_session(name, turns)
        url = server.base_url
        sdk = openai.OpenAI(base_url=url("openai", "limited"), api_key=KEY)  # its own retries
        with sdk:
            assert (
                sdk.chat.completions.create(model="m", messages=[ASK]).choices[0].message.content
                == "Hello."
            )
        assert eager(openai, url("openai", "eager")) == "Hello."
        cut = openai.OpenAI(base_url=url("openai", "cut"), api_key=KEY)  # retries a cut body
        with cut:
            assert (
                cut.chat.completions.create(model="m", messages=[ASK]).choices[0].message.content
                == "Hello."
            )
        assert streaming_retry(openai, url("openai", "instream")) == "Hello."
        assert claude_agent(anthropic, url("anthropic", "claude")) == "Found both."
        assert conversation(openai, url("openai", "talk")) == ["Hello.", "Then this."]
        assert responses_chain(openai, url("openai", "chain")) == "Found a."
        report = server.check()

    seen = {r.name: wire_behaviours(r) for r in report.sessions}
    assert seen == {
        "limited": ["retried_error_status", "honoured_retry_after", "stopped_on_text",
                    "not_streamed"],
        "eager": ["retried_error_status", "stopped_on_text", "not_streamed"],
        "cut": ["recovered_cut_stream", "stopped_on_text", "not_streamed"],
        "instream": ["retried_stream_error", "stopped_on_text", "streamed"],
        "claude": ["tool_round", "every_parallel_result", "tool_error_returned",
                   "stopped_on_text", "streamed"],
        "talk": ["stopped_on_text", "new_user_turn", "not_streamed"],
        "chain": ["tool_round", "stopped_on_text", "not_streamed", "previous_response"],
    }  # fmt: skip
    # the eager client broke retry_after; the others hold every client check
    assert [f.title.split(": it came")[0] for f in report.failures] == [
        "session 'eager': client check retry_after broken by request #2"
    ]

    coverage = WireCoverage()
    for one in report.sessions:
        coverage.add(one.label, wire_behaviours(one))
    assert coverage.table() == "\n".join(
        [
            "client behaviour coverage: 12 behaviours, 12 seen (100.0%), over 7 session(s)",
            "  group     behaviour              sessions  status",
            "  tools     tool_round                    2  seen",
            "  tools     every_parallel_result         1  seen",
            "  tools     tool_error_returned           1  seen",
            "  faults    retried_error_status          2  seen",
            "  faults    honoured_retry_after          1  seen",
            "  faults    recovered_cut_stream          1  seen",
            "  faults    retried_stream_error          1  seen",
            "  stops     stopped_on_text               7  seen",
            "  stops     new_user_turn                 1  seen",
            "  protocol  streamed                      2  seen",
            "  protocol  not_streamed                  5  seen",
            "  protocol  previous_response             1  seen",
        ]
    )
    assert coverage.to_json()["behaviours"]["honoured_retry_after"] == ["session 'limited'"]


def test_what_no_session_showed_is_named(openai: ModuleType) -> None:
    with serve([{"text": "Hello."}]) as server:
        client = openai.OpenAI(base_url=server.base_url("openai", "one"), api_key=KEY)
        with client:
            client.chat.completions.create(model="m", messages=[ASK])
        report = server.check()
    coverage = WireCoverage()
    for one in report.sessions:
        coverage.add(one.label, wire_behaviours(one))
    table = coverage.table().splitlines()
    assert table[0] == "client behaviour coverage: 12 behaviours, 2 seen (16.7%), over 1 session(s)"
    assert table[-10:] == [f"not seen: {b.id}: {b.title}" for b in WIRE_CATALOGUE
                           if b.id not in ("stopped_on_text", "not_streamed")]  # fmt: skip
    assert coverage.missing == [
        "tool_round", "every_parallel_result", "tool_error_returned", "retried_error_status",
        "honoured_retry_after", "recovered_cut_stream", "retried_stream_error",
        "new_user_turn", "streamed", "previous_response",
    ]  # fmt: skip
    with pytest.raises(
        ValueError, match="unknown wire behaviour 'retry'; the behaviours are tool_round, "
    ):
        coverage.add("x", ["retry"])
