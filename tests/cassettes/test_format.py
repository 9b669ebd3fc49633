"""The cassette file: readable (JSON parsed, streams event by event with their chunk
boundaries and timing), faithful (the exact bytes come back), and still a vcrpy cassette
that plain vcrpy replays to a plain httpx client."""

from __future__ import annotations

import asyncio
import time

import httpx
import httpx2
import pytest
import vcr
import yaml
from cassette_support import MODELS, record, session, set_secrets

from openprogram.providers.eventstream import encode_message
from openprogram_sim.cassettes import SERIALIZER, Cassette, CassetteFormatError
from openprogram_sim.cassettes._format import EXTRA
from openprogram_sim.play import serve_scenario


def _cassette_dict(response_body: bytes, content_type: str, chunks: list[list[float]]) -> dict:
    return {
        "version": 1,
        "interactions": [
            {
                "request": {
                    "method": "POST",
                    "uri": "https://api.example.com/v1/messages",
                    "body": b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}',
                    "headers": {"content-type": ["application/json"]},
                },
                "response": {
                    "status": {"code": 200, "message": "OK"},
                    "headers": {"content-type": [content_type]},
                    "body": {"string": response_body},
                    EXTRA: {"chunks": chunks, "latency": 0.25},
                },
            }
        ],
    }


def _round_trip(data: dict) -> tuple[str, dict]:
    text = SERIALIZER.serialize(data)
    return text, SERIALIZER.deserialize(text)


SSE = (
    b'event: message_start\ndata: {"type":"message_start"}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","text":"Hel"}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","text":"lo"}\n\n'
)


def test_a_stream_is_stored_event_by_event_with_its_chunks() -> None:
    cut = SSE.index(b'"Hel"')  # a network chunk that began inside an event
    chunks = [[0, 0.0012], [cut, 0.0304], [len(SSE) - 10, 0.5]]
    text, back = _round_trip(_cassette_dict(SSE, "text/event-stream", chunks))
    stored = yaml.safe_load(text)["interactions"][0]["response"]
    pieces = stored["body"]["stream"]
    assert pieces[0] == {
        "after": 0.0012,
        "text": 'event: message_start\ndata: {"type":"message_start"}\n\n',
    }
    assert "after" not in pieces[1] and pieces[2]["after"] == 0.0304  # the cut, in its event
    assert stored["latency"] == 0.25
    assert "event: content_block_delta\n" in text  # literal blocks: read as sent
    response = back["interactions"][0]["response"]
    assert response["body"]["string"] == SSE
    assert response[EXTRA]["chunks"] == chunks


def test_json_bodies_are_stored_parsed() -> None:
    body = b'{"id": "msg_1", "content": [{"type": "text", "text": "caf\\u00e9"}]}'
    text, back = _round_trip(_cassette_dict(body, "application/json", [[0, 0.0]]))
    stored = yaml.safe_load(text)["interactions"][0]
    assert stored["request"]["body"] == {
        "json": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    }
    assert stored["response"]["body"]["json"]["content"][0]["text"] == "café"
    import json

    assert json.loads(back["interactions"][0]["response"]["body"]["string"]) == json.loads(body)


def test_crlf_streams_are_stored_with_lf_and_come_back_exact() -> None:
    body = b'data: {"a": 1}\r\n\r\ndata: {"b": 2}\r\n\r\n'
    text, back = _round_trip(_cassette_dict(body, "text/event-stream", [[0, 0.0], [19, 0.1]]))
    stored = yaml.safe_load(text)["interactions"][0]["response"]["body"]
    assert stored["line_ends"] == "crlf"
    assert stored["stream"][0]["text"] == 'data: {"a": 1}\n\n'
    assert back["interactions"][0]["response"]["body"]["string"] == body


def test_event_stream_frames_are_stored_decoded_and_encode_back_exact() -> None:
    frames = [
        encode_message({":event-type": "messageStart", ":message-type": "event"}, b'{"a":1}'),
        encode_message({":event-type": "messageStop", ":message-type": "event"}, b'{"s":"x"}'),
    ]
    body = b"".join(frames)
    inside = len(frames[0]) + 5  # a chunk that began inside the second frame
    chunks = [[0, 0.0], [inside, 0.2]]
    text, back = _round_trip(_cassette_dict(body, "application/vnd.amazon.eventstream", chunks))
    pieces = yaml.safe_load(text)["interactions"][0]["response"]["body"]["stream"]
    assert pieces[0]["frame"] == {
        "headers": {":event-type": "messageStart", ":message-type": "event"},
        "payload": '{"a":1}',
    }
    assert isinstance(pieces[1]["bytes"], bytes) and pieces[2]["after"] == 0.2
    assert back["interactions"][0]["response"]["body"]["string"] == body
    assert back["interactions"][0]["response"][EXTRA]["chunks"] == chunks


def test_binary_bodies_stay_bytes() -> None:
    body = bytes(range(256))
    _, back = _round_trip(_cassette_dict(body, "application/octet-stream", [[0, 0.0]]))
    assert back["interactions"][0]["response"]["body"]["string"] == body


def test_a_file_that_is_not_a_cassette_is_refused_with_its_name(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("interactions:\n- request: {method: POST}\n", encoding="utf-8")
    with pytest.raises(CassetteFormatError, match=r"bad\.yaml: interactions\[0\]\.request"):
        Cassette(bad).load()
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("a: &a [x, x]\nb: [*a, *a]\ninteractions: []\n", encoding="utf-8")
    with pytest.raises(CassetteFormatError, match="aliases"):
        Cassette(bomb).load()


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """An OpenAI Chat session recorded over loopback, and the server's base URL."""
    set_secrets(monkeypatch)
    path = tmp_path / "openai.yaml"
    with serve_scenario(session()) as server:
        record(session(), "openai-chat", server, path)
        url = server.adapter_url("openai-chat")
    return path, url


def test_plain_vcrpy_replays_it_to_a_plain_httpx_client(recorded) -> None:
    path, url = recorded
    first = Cassette(path).load().vcr.data[0]
    plain = vcr.VCR(record_mode="none")  # vcrpy's own matchers, stubs and record mode
    plain.register_serializer("openprogram", SERIALIZER)
    with plain.use_cassette(str(path), serializer="openprogram") as cassette:
        response = httpx.post(f"{url}/chat/completions", content=first[0].body, headers={"x": "y"})
        assert cassette.play_count == 1
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.content == first[1]["body"]["string"]
    assert response.text.startswith("data: ")


def test_replay_keeps_the_chunks_and_can_keep_the_pace(recorded) -> None:
    path, url = recorded
    data = Cassette(path).load().vcr.data
    data_chunks = data[0][1][EXTRA]["chunks"]

    async def read(timing: str) -> tuple[list[bytes], float]:
        cassette = Cassette(path, timing=timing, allow_unplayed=True).load()
        # make the recording look slow: 4 chunks 0.05 s apart
        reply = cassette.vcr.data[0][1]
        size = len(reply["body"]["string"])
        reply[EXTRA]["chunks"] = [[i * size // 4, 0.05] for i in range(4)]
        async with cassette.client() as client:
            started = time.perf_counter()
            request = client.build_request(
                "POST", f"{url}/chat/completions", content=data[0][0].body
            )
            response = await client.send(request, stream=True)
            parts = [part async for part in response.aiter_raw()]
            return parts, time.perf_counter() - started

    assert data_chunks[0][0] == 0
    parts, fast = asyncio.run(read("instant"))
    assert len(parts) == 4 and fast < 0.1
    parts, slow = asyncio.run(read("recorded"))
    assert len(parts) == 4 and slow >= 0.2


def test_httpx2_and_httpx_clients_record_and_replay_alike(tmp_path, monkeypatch) -> None:
    set_secrets(monkeypatch)
    with serve_scenario(session(), cycle=True) as server:
        url = server.adapter_url("openai-chat") + "/chat/completions"
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
        live = {}
        with Cassette(tmp_path / "c.yaml", record_mode="once").patch():
            live["httpx2"] = httpx2.post(url, json=body, headers={"authorization": "Bearer k"})
            live["httpx"] = httpx.post(url, json={**body, "n": 2})

            async def async_calls() -> None:
                async with httpx2.AsyncClient() as a:
                    live["httpx2-async"] = await a.post(url, json={**body, "n": 3})
                async with httpx.AsyncClient() as b:
                    live["httpx-async"] = await b.post(url, json={**body, "n": 4})

            asyncio.run(async_calls())
    replayed = {}
    cassette = Cassette(tmp_path / "c.yaml")
    with cassette.patch():
        replayed["httpx2"] = httpx2.post(url, json=body)
        replayed["httpx"] = httpx.post(url, json={**body, "n": 2})

        async def again() -> None:
            async with httpx2.AsyncClient() as a:
                replayed["httpx2-async"] = await a.post(url, json={**body, "n": 3})
            async with httpx.AsyncClient() as b:
                replayed["httpx-async"] = await b.post(url, json={**body, "n": 4})

        asyncio.run(again())
    assert cassette.problems() == []
    for name, response in live.items():
        assert replayed[name].status_code == response.status_code == 200, name
        assert replayed[name].json() == response.json(), name
    assert MODELS  # the same five APIs are covered end to end in test_end_to_end
