"""Wire faults at the HTTP level: what a client reading raw bytes sees for each one, and
the mistakes a fault spec is refused for."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from openprogram_sim import ScenarioError
from openprogram_sim.models import Turn
from openprogram_sim.wire import WireFault, serve

TEXT = "Partly cloudy, clearing later in the afternoon."
CHAT = "/v1/chat/completions"
ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_fault_specs_are_checked_when_given() -> None:
    with pytest.raises(ValueError, match=r"unknown wire key\(s\) \['statuz'\]; allowed: status"):
        WireFault.coerce({"statuz": 429})
    with pytest.raises(ValueError, match="HTTP error status"):
        WireFault.coerce({"status": 200})
    with pytest.raises(ValueError, match="cut_after must be an integer >= 0"):
        WireFault.coerce({"cut_after": -1})
    with pytest.raises(ValueError, match="error_mode must be auto, http or stream"):
        WireFault.coerce({"error_mode": "later"})


def test_a_turn_carries_its_fault_as_a_pair_or_a_wire_key() -> None:
    fault = WireFault(status=503)
    script = [(Turn(error="down", stop_reason="error"), fault), {"text": "ok"}]
    with serve(script) as server, httpx2.Client(base_url=server.url) as client:
        assert client.post(CHAT, json=ASK).status_code == 503
        assert client.post(CHAT, json=ASK).status_code == 200


def test_raise_drops_the_connection_after_the_body() -> None:
    script = [{"text": TEXT, "fault": "raise"}] * 2
    with serve(script) as server, httpx2.Client(base_url=server.url) as client:
        with client.stream("POST", CHAT, json={**ASK, "stream": True}) as reply:
            received = []
            with pytest.raises(httpx2.RemoteProtocolError):
                for chunk in reply.iter_raw():
                    received.append(chunk)
        streamed = b"".join(received).decode()
        assert "Partly cloudy" in streamed and "[DONE]" not in streamed
        with pytest.raises(httpx2.RemoteProtocolError):
            client.post(CHAT, json=ASK)  # half a JSON body, then nothing


def test_hang_without_streaming_sends_nothing() -> None:
    held = [{"text": TEXT, "fault": "hang"}]
    timeout = pytest.raises(httpx2.ReadTimeout)
    with serve(held) as server, httpx2.Client(base_url=server.url) as client, timeout:
        client.post(CHAT, json=ASK, timeout=0.3)
    # stopping the server ended the held connection (the `with` returned)


def test_a_corrupt_chunk_is_unparseable_in_each_framing() -> None:
    script = [
        {"text": TEXT, "wire": {"corrupt_chunk": 2}},
        {"text": TEXT, "wire": {"corrupt_chunk": 1}},
    ]
    with serve(script) as server, httpx2.Client(base_url=server.url) as client:
        events = client.post(CHAT, json={**ASK, "stream": True}).text.split("\n\n")
        with pytest.raises(json.JSONDecodeError):
            json.loads(events[1].removeprefix("data: "))
        body = client.post(CHAT, json=ASK).content
        with pytest.raises(json.JSONDecodeError):
            json.loads(body)


def test_a_corrupt_event_stream_frame_fails_its_checksum() -> None:
    from openprogram.providers.eventstream import EventStreamDecoder, EventStreamError

    with serve([{"text": TEXT, "wire": {"corrupt_chunk": 2}}]) as server:
        reply = httpx2.post(
            f"{server.url}/model/m/converse-stream",
            json={"messages": [{"role": "user", "content": [{"text": "hi"}]}]},
        )
    with pytest.raises(EventStreamError, match="message CRC mismatch"):
        EventStreamDecoder().feed(reply.content)


def test_a_fault_the_response_cannot_carry_is_a_500_saying_why() -> None:
    with serve([{"text": "short", "wire": {"corrupt_chunk": 40}}]) as server:
        reply = httpx2.post(f"{server.url}{CHAT}", json=ASK)
        assert reply.status_code == 500
        assert (
            "corrupt_chunk is 40, but the response has 1 chunk(s)"
            in reply.json()["error"]["message"]
        )
        assert reply.headers["x-should-retry"] == "false"


def test_a_scenario_file_carries_wire_faults(tmp_path: Path) -> None:
    """``wire:`` under a model turn in a file: the server cuts the stream after chunk 2, and
    the scripted model (which plays the same file) ignores the key."""
    from openprogram_sim.play import run_scenario, serve_scenario
    from openprogram_sim.scenario import load_scenario

    path = tmp_path / "cut.yaml"
    path.write_text(
        "scenario: a stream cut mid-way\n"
        "exec: {content: hi, tools: []}\n"
        "model:\n"
        "  - text: 'A reply long enough for several pieces on the wire.'\n"
        "    wire: {cut_after: 2, headers: {x-scripted: 'yes'}}\n"
    )
    scenario = load_scenario(path)
    assert run_scenario(scenario).result == "A reply long enough for several pieces on the wire."
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with serve_scenario(scenario) as server, httpx2.Client() as client:
        url = server.base_url("openai") + "/chat/completions"
        with client.stream("POST", url, json=body) as response:
            assert response.headers["x-scripted"] == "yes"
            with pytest.raises(httpx2.RemoteProtocolError):
                for _ in response.iter_bytes():
                    pass
    bad = path.read_text().replace("cut_after: 2", "cut_after: -1")
    path.write_text(bad)
    with pytest.raises(ScenarioError, match=r"cut.yaml:5: \(model\[0\]\.wire\.cut_after\)"):
        load_scenario(path, shown_as="cut.yaml")
