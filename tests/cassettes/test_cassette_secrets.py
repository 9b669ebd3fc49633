"""Secrets never reach disk: credential headers, key query parameters, cookies, SigV4
headers and key-shaped strings in bodies are scrubbed by default, and a final scan refuses
to save a cassette that still holds one, naming where."""

from __future__ import annotations

import json

import pytest
import yaml
from cassette_support import SECRETS, assert_no_secret_on_disk, record, set_secrets
from vcr.request import Request

from openprogram_sim.cassettes import (
    SERIALIZER,
    Cassette,
    Persister,
    Scrubber,
    SecretLeakError,
    find_secrets,
)
from openprogram_sim.cassettes._format import EXTRA
from openprogram_sim.cassettes._scrub import scrub_response
from openprogram_sim.cassettes._secrets import known_secrets
from openprogram_sim.play import run_scenario, serve_scenario
from openprogram_sim.scenario import parse_scenario

OPENAI_SHAPE = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
GOOGLE_SHAPE = "AIzaSy" + "B" * 33


def test_headers_keep_their_name_and_scheme_only() -> None:
    scrubber = Scrubber()
    headers = scrubber.headers(
        {
            "Authorization": ["Bearer sk-abc"],
            "x-api-key": ["k1"],
            "x-goog-api-key": "k2",
            "api-key": ["k3"],
            "cookie": ["session=s3cr3t"],
            "set-cookie": ["a=b; Path=/"],
            "x-amz-security-token": ["FwoGZX"],
            "x-amz-date": ["20260101T000000Z"],
            "user-agent": ["python-httpx2/2.16.2"],
        }
    )
    assert headers == {
        "Authorization": ["Bearer <redacted>"],
        "x-api-key": ["<redacted>"],
        "x-goog-api-key": "<redacted>",
        "api-key": ["<redacted>"],
        "cookie": ["<redacted>"],
        "set-cookie": ["<redacted>"],
        "x-amz-security-token": ["<redacted>"],
        "x-amz-date": ["<redacted>"],
        "user-agent": ["python-httpx2/2.16.2"],
    }


def test_key_query_parameters_are_masked() -> None:
    url = Scrubber().url(
        "https://generativelanguage.googleapis.com/v1beta/models/g:streamGenerateContent"
        "?alt=sse&key=AIzaSyQQQ&X-Amz-Signature=abc&X-Amz-Security-Token=t"
    )
    assert url.endswith(
        "?alt=sse&key=<redacted>&X-Amz-Signature=<redacted>&X-Amz-Security-Token=<redacted>"
    )


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"key {OPENAI_SHAPE} here", "openai-key"),
        ("sk-ant-api03-" + "x" * 40, "anthropic-key"),
        (f"{GOOGLE_SHAPE}", "google-key"),
        # built from pieces, so that no literal in the source has a credential's shape
        ("id " + "AKIA" + "J7QK2XW4ZP3M5N6R,", "aws-access-key-id"),
        ("ASIA" + "J7QK2XW4ZP3M5N6R", "aws-access-key-id"),
        ("secret " + "kP9/xR2mQ7+vL4nW8sT1" + "yB6cZ3dF5gH0jK2lM4nO end", "aws-secret-key"),
        (
            '"aws_secret_access_key": "' + "kP9xR2mQ7avL4nW8sT1y" + 'B6cZ3dF5gH0jK2lM4nOq"',
            "aws-secret-key",
        ),
    ],
)
def test_key_shapes_are_scrubbed(text: str, kind: str) -> None:
    scrubbed = Scrubber().text(text)
    assert f"<redacted:{kind}>" in scrubbed
    assert find_secrets({"body": text}) == [("body", kind)]
    assert find_secrets({"body": scrubbed}) == []


@pytest.mark.parametrize(
    "text",
    [
        "a" * 40,  # no case mix
        "0123456789abcdef0123456789abcdef01234567",  # a SHA-1
        "toolu_01XFyAjstT3966qvRynZyVPo",
        "ta" + "sk-" + "abcdefghijklmnopqrstuvwxyz0123",  # "sk-" inside a word
        "EqQBCkgIARABGAIiQL1" + "xY/+9" * 40,  # a long base64 signature
    ],
)
def test_ordinary_strings_are_left_alone(text: str) -> None:
    assert Scrubber().text(text) == text


def test_known_values_are_scrubbed_in_every_form() -> None:
    secret = "my-gateway-token/with+odd=chars"
    scrubber = Scrubber([secret])
    for form in (secret, json.dumps(secret)[1:-1], "my-gateway-token%2Fwith%2Bodd%3Dchars"):
        assert scrubber.text(f"x {form} y") == "x <redacted> y"
    learned = Scrubber()
    learned.learn({"authorization": "Bearer gw-abcdef123456"})  # passed as api_key=
    assert learned.text("echo gw-abcdef123456") == "echo <redacted>"


def test_a_key_split_across_two_chunks_is_scrubbed_whole() -> None:
    event = f'data: {{"text": "your key is {OPENAI_SHAPE}"}}\n\n'.encode()
    body = b'data: {"text": "hi"}\n\n' + event
    split = body.index(b"a1B2c3D4e5") + 5  # a chunk began in the middle of the key
    response = {
        "status": {"code": 200, "message": "OK"},
        "headers": {"content-type": ["text/event-stream"], "set-cookie": ["s=1"]},
        "body": {"string": body},
        EXTRA: {"chunks": [[0, 0.0], [split, 0.01]]},
    }
    out = scrub_response(response, Scrubber())
    assert OPENAI_SHAPE.encode() not in out["body"]["string"]
    assert b"<redacted:openai-key>" in out["body"]["string"]
    assert out["headers"]["set-cookie"] == ["<redacted>"]
    offset = out[EXTRA]["chunks"][1][0]
    assert len(body) - len(event) <= offset <= len(out["body"]["string"])


def test_keys_in_bodies_never_reach_disk_and_the_replay_still_matches(
    tmp_path, monkeypatch
) -> None:
    set_secrets(monkeypatch)
    scenario_text = f"""\
scenario: a tool leaks a key, and the model repeats one
tools:
  read_config:
    returns: "OPENAI_API_KEY={OPENAI_SHAPE} region=eu; secret {SECRETS["AWS_SECRET_ACCESS_KEY"]}"
exec:
  content: "What is in the config?"
  tools: [read_config]
model:
  - tool_calls: [{{read_config: {{}}}}]
  - text: "It holds a key, and here is another: {GOOGLE_SHAPE}"
"""
    scenario = parse_scenario(scenario_text, "leak.yaml")
    path = tmp_path / "leak.yaml"
    with serve_scenario(scenario) as server:
        recorded = record(scenario, "openai-chat", server, path)
    assert recorded.error is None
    assert_no_secret_on_disk(tmp_path)
    stored = path.read_text(encoding="utf-8")
    assert OPENAI_SHAPE not in stored and GOOGLE_SHAPE not in stored
    assert "<redacted:openai-key>" in stored and "<redacted:google-key>" in stored
    # the replayed request still carries the key: it is scrubbed the same way to match
    cassette = Cassette(path).load()
    replayed = run_scenario(scenario, cassette.provider())
    assert cassette.problems() == []
    assert replayed.result == "It holds a key, and here is another: <redacted:google-key>"


def _dict_with(body: bytes, header: str = "<redacted>") -> dict:
    return {
        "requests": [Request("POST", "https://x/v1/messages", body, {"x-api-key": header})],
        "responses": [
            {
                "status": {"code": 200, "message": "OK"},
                "headers": {"content-type": ["application/json"]},
                "body": {"string": b'{"ok": true}'},
            }
        ],
    }


def test_the_final_scan_refuses_to_save_and_names_the_place(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("old content\n", encoding="utf-8")
    leaking = _dict_with(json.dumps({"note": OPENAI_SHAPE}).encode(), header="live-key-123")
    with pytest.raises(SecretLeakError) as caught:
        Persister().save_cassette(path, leaking, SERIALIZER)
    message = str(caught.value)
    assert "interactions[0].request.headers.x-api-key: credential header" in message
    assert "interactions[0].request.body.json.note: openai-key" in message
    assert OPENAI_SHAPE not in message and "live-key-123" not in message
    assert path.read_text(encoding="utf-8") == "old content\n"  # nothing written
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]


def test_the_final_scan_knows_the_environments_keys(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "plain-looking-secret-value")
    body = json.dumps({"note": "plain-looking-secret-value"}).encode()
    with pytest.raises(SecretLeakError, match="known secret value"):
        Persister(known_secrets).save_cassette(tmp_path / "c.yaml", _dict_with(body), SERIALIZER)
    assert not (tmp_path / "c.yaml").exists()


def test_a_clean_cassette_is_written(tmp_path) -> None:
    Persister().save_cassette(tmp_path / "c.yaml", _dict_with(b'{"a": 1}'), SERIALIZER)
    data = yaml.safe_load((tmp_path / "c.yaml").read_text(encoding="utf-8"))
    assert data["interactions"][0]["request"]["body"] == {"json": {"a": 1}}
