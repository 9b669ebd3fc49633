"""Secrets a hostile upstream streams so that no single event shows them (issue 23, item 7):
each repro is recorded from a real loopback server through a recording cassette, and the
file written must hold no piece of the secret, while a replay gives the client the text
with the secret masked."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
import yaml
from cassette_support import MODELS, record, set_secrets
from hypothesis import given
from hypothesis import strategies as st
from upstream import Answer, record_raw, sse, upstream
from vcr.request import Request

from openprogram_sim.cassettes import SERIALIZER, Cassette, Persister, SecretLeakError
from openprogram_sim.cassettes._secrets import JsonView
from openprogram_sim.play import run_scenario, serve_scenario
from openprogram_sim.scenario import parse_scenario

# 48 random-looking characters after the prefix, built so no literal has a key's shape
KEY = "sk-" + "proj-" + "Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0Ef3Hi6Kl9No2Qr5Tu8"
AWS_SECRET = "kP9/xR2mQ7+vL4nW8sT1" + "yB6cZ3dF5gH0jK2lM4nO"
GATEWAY = "gw-plainsecret-0123456789"  # a key with no shape: known only by its value


def _chat(text: str) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]})


def _args(call: int, text: str) -> str:
    delta = {"tool_calls": [{"index": call, "function": {"arguments": text}}]}
    return json.dumps({"choices": [{"index": 0, "delta": delta}]})


def _replayed(path) -> str:
    """What a client reads when the cassette is replayed: the joined delta text."""

    async def go() -> bytes:
        with Cassette(path) as cassette:
            async with cassette.client() as client:
                response = await client.post(
                    "http://127.0.0.1:1/v1/chat/completions", json={"model": "m", "stream": True}
                )
                return await response.aread()

    out = []
    for line in asyncio.run(go()).decode().splitlines():
        if line.startswith("data: {"):
            choice = json.loads(line[6:])["choices"][0]["delta"]
            out.append(choice.get("content") or "")
            for call in choice.get("tool_calls") or []:
                out.append(f"[{call['index']}]{call['function']['arguments']}")
    return "".join(out)


def _no_piece_of(secret: str, text: str) -> None:
    """No 12 characters in a row of ``secret`` (past its prefix) are in ``text``."""
    for i in range(3, len(secret) - 11):
        assert secret[i : i + 12] not in text, f"{secret[i : i + 12]!r} is on disk"


def test_a_key_in_two_pieces_whose_first_already_looks_like_a_key(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    record_raw(path, Answer(sse(_chat("key: " + KEY[:28]), _chat(KEY[28:] + " ok"), "[DONE]")))
    stored = path.read_text(encoding="utf-8")
    _no_piece_of(KEY, stored)
    assert _replayed(path) == "key: <redacted:openai-key> ok"


def test_a_key_in_interleaved_tool_call_argument_deltas(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    events = sse(
        _args(0, '{"k": "' + KEY[:20]),
        _args(1, '{"q": "x'),
        _args(0, KEY[20:] + '"}'),
        _args(1, '"}'),
        "[DONE]",
    )
    record_raw(path, Answer(events))
    _no_piece_of(KEY, path.read_text(encoding="utf-8"))
    assert _replayed(path) == '[0]{"k": "<redacted:openai-key>[1]{"q": "x[0]"}[1]"}'


@pytest.mark.parametrize("split", [False, True])
def test_a_key_written_with_json_escapes(tmp_path, split: bool) -> None:
    escaped = "\\u0073" + KEY[1:]  # \u0073 is "s": the client reads the key
    first = escaped[:30] if split else escaped
    events = ['data: {"choices":[{"index":0,"delta":{"content":"' + first + '"}}]}\n\n']
    if split:
        events.append(f"data: {_chat(KEY[25:])}\n\n")
    path = tmp_path / "c.yaml"
    record_raw(path, Answer([e.encode() for e in events] + sse("[DONE]")))
    _no_piece_of(KEY, path.read_text(encoding="utf-8"))
    assert _replayed(path) == "<redacted:openai-key>"


def test_a_key_escaped_inside_streamed_tool_arguments(tmp_path) -> None:
    """Tool-call arguments are JSON text inside the event's JSON: the client parses them
    again, so ``\\u0073k-`` in them (written ``\\\\u0073k-`` in the event) is a key too."""
    escaped = "\\u0073" + KEY[1:]

    def partial(text: str) -> str:
        delta = {"type": "input_json_delta", "partial_json": text}
        return json.dumps({"type": "content_block_delta", "index": 1, "delta": delta})

    events = sse(partial('{"k": "' + escaped[:20]), partial(escaped[20:] + '"}'))
    path = tmp_path / "c.yaml"
    record_raw(path, Answer(events), url_path="/v1/messages")
    stored = path.read_text(encoding="utf-8")
    _no_piece_of(KEY, stored)
    assert "<redacted:openai-key>" in stored


def test_an_aws_secret_written_with_escaped_slashes(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)  # known by its shape only
    data = _chat(f"secret {AWS_SECRET} end").replace("/", "\\/")
    path = tmp_path / "c.yaml"
    record_raw(path, Answer([f"data: {data}\n\n".encode(), *sse("[DONE]")]))
    stored = path.read_text(encoding="utf-8")
    _no_piece_of(AWS_SECRET.replace("/", "\\/"), stored)
    _no_piece_of(AWS_SECRET, stored)
    assert _replayed(path) == "secret <redacted:aws-secret-key> end"


@pytest.mark.parametrize(
    "encoded",
    [
        base64.b64encode(GATEWAY.encode()).decode(),
        base64.b64encode(GATEWAY.encode()).decode().rstrip("="),
        base64.urlsafe_b64encode(b"user:" + GATEWAY.encode()).decode().rstrip("="),
        base64.b64encode(b"ab" + GATEWAY.encode() + b"\n").decode(),
    ],
    ids=["standard", "no-padding", "urlsafe-basic-credential", "inside-longer-text"],
)
def test_an_environment_key_in_base64(tmp_path, monkeypatch, encoded: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", GATEWAY)
    path = tmp_path / "c.yaml"
    record_raw(path, Answer(sse(_chat(f"token {encoded} end"), "[DONE]")))
    stored = path.read_text(encoding="utf-8")
    _no_piece_of(encoded, stored)
    assert "<redacted>" in _replayed(path)


@pytest.mark.parametrize(
    "query",
    [
        "subscription-key=0123456789abcdef0123456789abcdef",
        "sv=2024-11-04&se=2030-01-01&sr=b&sp=r&sig=AbCdEf0123456789%2BxyzXYZ%3D",
    ],
    ids=["azure-subscription-key", "azure-sas-sig"],
)
def test_credential_query_parameters_are_masked(tmp_path, query: str) -> None:
    secret = query.rpartition("=")[2]
    body = json.dumps({"url": f"https://acct.blob.core.windows.net/c/f.txt?{query}"})
    path = tmp_path / "c.yaml"
    answer = Answer([body.encode()], headers={"content-type": "application/json"})
    record_raw(path, answer, url_path=f"/v1/chat/completions?api-version=1&{query}")
    stored = path.read_text(encoding="utf-8")
    assert secret not in stored
    name = query.rpartition("=")[0].rpartition("&")[2]
    assert stored.count(f"{name}=<redacted>") == 2  # the request's URI and the reply's URL


def _streamed(*events: str) -> dict:
    body = "".join(f"data: {e}\n\n" for e in events).encode()
    return {
        "requests": [Request("POST", "https://x/v1/chat/completions", b"{}", {})],
        "responses": [
            {
                "status": {"code": 200, "message": "OK"},
                "headers": {"content-type": ["text/event-stream"]},
                "body": {"string": body},
            }
        ],
    }


def test_the_final_scan_reads_the_stitched_decoded_stream(tmp_path) -> None:
    """A cassette written by other code than the recorder: the last look before the save
    decodes each event and stitches the deltas, and refuses what it finds."""
    escaped = '{"choices":[{"index":0,"delta":{"content":"\\u0073' + KEY[1:] + '"}}]}'
    interleaved = [_args(0, KEY[:20]), _args(1, "x"), _args(0, KEY[20:])]
    for data in (_streamed(escaped), _streamed(*interleaved)):
        path = tmp_path / "c.yaml"
        with pytest.raises(SecretLeakError) as caught:
            Persister().save_cassette(path, data, SERIALIZER)
        assert (
            "interactions[0].response.body: a secret in the stream's text as the client "
            "reads it (its events decoded and joined)"
        ) in str(caught.value)
        assert not path.exists()


LEAKY = f"""\
scenario: a tool reads a config that holds the gateway key
tools:
  read_config:
    returns: "token={GATEWAY}"
exec:
  content: "What is in the config?"
  tools: [read_config]
model:
  - tool_calls: [{{read_config: {{}}}}]
  - text: "It holds a token."
expect:
  result: "It holds a token."
"""


def test_a_replay_where_the_scrubbed_variable_is_unset_names_it(tmp_path, monkeypatch) -> None:
    """Issue 23, item 12: a key with no shape is scrubbed by its value, as ``<redacted>``;
    where its variable is unset, the request sent holds the value and cannot match: the
    mismatch says which variable and what to do."""
    set_secrets(monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", GATEWAY)
    scenario = parse_scenario(LEAKY, "leaky.yaml")
    path = tmp_path / "c.yaml"
    with serve_scenario(scenario) as server:
        assert record(scenario, "openai-chat", server, path).error is None
    stored = path.read_text(encoding="utf-8")
    assert GATEWAY not in stored and "token=<redacted>" in stored
    assert "secrets_from_env:\n    - OPENAI_API_KEY\n" in stored  # the name, never the value

    monkeypatch.delenv("OPENAI_API_KEY")  # as in CI, where the key is not given
    cassette = Cassette(path).load()
    outcome = run_scenario(scenario, cassette.provider(MODELS["openai-chat"]))
    assert outcome.error is not None
    assert (
        "the recording holds <redacted> at $.messages[2].content, a secret scrubbed by its "
        "value (the value of OPENAI_API_KEY when it was recorded); OPENAI_API_KEY is not set "
        "here, so the request sent cannot be scrubbed alike and does not match: set "
        "OPENAI_API_KEY to the value it had when the cassette was recorded (in CI, from its "
        "secret store), or keep the secret out of the request and record the cassette again"
    ) in cassette.problems()[0]
    assert "leave it out of matching" not in cassette.problems()[0]  # not the fix here

    monkeypatch.setenv("OPENAI_API_KEY", GATEWAY)  # the fix the message gives
    cassette = Cassette(path).load()
    outcome = run_scenario(scenario, cassette.provider(MODELS["openai-chat"]))
    assert outcome.result == "It holds a token." and cassette.problems() == []


@given(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=30),
    st.booleans(),
)
def test_the_json_view_reads_escapes_and_maps_back(text: str, ascii_only: bool) -> None:
    written = json.dumps(text, ensure_ascii=ascii_only)[1:-1].replace("/", "\\/")
    view = JsonView(written)
    # a character past U+FFFF, escaped, is two halves of a pair: each reads as U+FFFD
    halves = "\ufffd\ufffd" if ascii_only else None
    assert view.text == "".join(halves if halves and ord(c) > 0xFFFF else c for c in text)
    for i in range(len(view.text)):
        piece = written[view.start(i) : view.end(i + 1)]
        assert JsonView(piece).text == view.text[i]


def test_a_patched_session_names_the_scrubbed_variable_too(tmp_path, monkeypatch) -> None:
    """The pytest fixture's way (every client patched, vcrpy saving as the block ends)."""
    import httpx2

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", GATEWAY)
    path = tmp_path / "c.yaml"
    answer = Answer([b'{"ok": true}'], headers={"content-type": "application/json"})
    with upstream(answer) as base, Cassette(path, record_mode="once").patch():
        httpx2.post(base + "/v1/messages", json={"note": f"the token is {GATEWAY}"})
    stored = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert stored["metadata"]["openprogram"]["secrets_from_env"] == ["ANTHROPIC_API_KEY"]
    assert stored["interactions"][0]["request"]["body"] == {
        "json": {"note": "the token is <redacted>"}
    }
