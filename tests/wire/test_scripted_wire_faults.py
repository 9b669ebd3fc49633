"""ScriptedWire plays a turn's ``wire:`` faults (and ``latency``, ``fault: raise`` /
``hang``) as the loopback server does: the same scenario file, run through each of the five
real adapters, streaming and not, gives the same outcome in process as over real HTTP: the
same trace (error texts and details included), stop reason, result or error, and the same
requests sent. Each file also states, in its ``expect:``, what the fault must look like to
the loop, and both runs must pass it."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from wire_support import MODE_IDS, MODES, make_provider

from openprogram_sim.play import RunOutcome, check_outcome, run_scenario, scenario_server
from openprogram_sim.scenario import Scenario, load_scenario
from openprogram_sim.wire import ScriptedWire, WireFault, WireServer

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"
TEXT = "A reply long enough to stream in several pieces over the wire."
CHAT = "https://api.openai.com/v1/chat/completions"
ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

_ONE_TURN = """\
scenario: {title}
exec: {{content: "Go.", tools: []}}
model:
{turns}
expect:
{expect}
"""


@dataclass(frozen=True)
class Case:
    text: str
    client_timeout: float | None = None
    """The adapter's timeout (seconds): what ends a hang."""
    streaming_only: bool = False


def _one_turn(title: str, turns: str, expect: str, **options: Any) -> Case:
    return Case(_ONE_TURN.format(title=title, turns=turns, expect=expect), **options)


CASES: dict[str, Case] = {
    "rate_limit_after_a_tool_round": Case(
        """\
scenario: a rate limit after a tool round, with a header of the provider's
tools:
  search: {returns: "hit"}
exec: {content: "Find it.", tools: [search]}
model:
  - tool_calls: [{search: {q: a}}]
  - stop_reason: error
    error: "Rate limit reached for requests"
    error_reason: rate_limit
    retryable: true
    retry_after: 17
    wire: {headers: {x-request-id: req-7}}
expect:
  raises: {type: ModelError, message: "Rate limit reached"}
  model_calls: 2
  events:
    - tool_execution_end: {round: 1, is_error: false}
    - message_end: {role: assistant, round: 2, stop_reason: error, error_reason: rate_limit,
                    retryable: true, retry_after: 17, error_status: 429}
    - agent_end: {reason: error}
"""
    ),
    "status_and_retry_after_ms": _one_turn(
        "an HTTP 503 whose retry-after-ms is read first",
        '  - {stop_reason: error, error: "upstream busy",\n'
        "     wire: {status: 503, retry_after_ms: 1500}}",
        '  raises: {type: ModelError, message: "upstream busy"}\n'
        "  events:\n"
        "    - message_end: {stop_reason: error, error_status: 503, retry_after: 1.5,"
        " retryable: true}",
    ),
    "error_mode_http_drops_the_content": _one_turn(
        "an error turn with content, sent as an HTTP error",
        f'  - {{text: "{TEXT}", stop_reason: error, error: "went wrong", error_reason: server,'
        " wire: {error_mode: http}}",
        "  raises: true\n  events:\n"
        "    - message_end: {role: assistant, stop_reason: error, error_status: 500,"
        " error_reason: server}",
    ),
    "error_mode_stream_keeps_the_content": _one_turn(
        "an error event inside a 200 stream, after the content",
        f'  - {{text: "{TEXT}", stop_reason: error, error: "went wrong",\n'
        "     wire: {error_mode: stream}}",
        f'  raises: true\n  events:\n    - message_end: {{stop_reason: error, text: "{TEXT}"}}',
        streaming_only=True,
    ),
    "cut_after": _one_turn(
        "the connection drops after two body chunks",
        f'  - {{text: "{TEXT}", wire: {{cut_after: 2}}}}',
        "  raises: true\n  events:\n"
        "    - message_end: {stop_reason: error, error_reason: network, retryable: true}",
    ),
    "cut_after_with_an_interval": _one_turn(
        "the connection drops after three chunks sent 10 ms apart",
        f'  - {{text: "{TEXT}", wire: {{cut_after: 3, interval: 0.01}}}}',
        "  raises: true\n  events:\n"
        "    - message_end: {stop_reason: error, error_reason: network, retryable: true}",
    ),
    "fault_raise": _one_turn(
        "a provider that crashes after the body",
        f'  - {{text: "{TEXT}", fault: raise}}',
        "  raises: true\n  events:\n"
        "    - message_end: {stop_reason: error, error_reason: network, retryable: true}",
    ),
    "corrupt_chunk": _one_turn(
        "the first body chunk cannot be parsed",
        f'  - {{text: "{TEXT}", wire: {{corrupt_chunk: 1}}}}',
        "  raises: true\n  events:\n"
        "    - message_end: {stop_reason: error, error_reason: stream, retryable: false}",
    ),
    "latency_and_interval": Case(
        """\
scenario: a slow but healthy model, chunk by chunk
tools:
  search: {returns: "Tides follow the moon."}
exec: {content: "Why are there tides?", tools: [search]}
model:
  - tool_calls: [{search: {q: tides}}]
    latency: 0.05
    wire: {interval: 0.01}
  - text: "Because of the moon, and a little of the sun."
    wire: {interval: 0.01, headers: {x-served-by: openprogram-sim}}
expect:
  result: "Because of the moon, and a little of the sun."
  model_calls: 2
  events:
    - agent_end: {reason: stop}
"""
    ),
    "hang_until_the_client_gives_up": _one_turn(
        "a provider that hangs until the client's read timeout",
        '  - {text: "Let me think...", fault: hang}',
        "  raises: true\n  events:\n"
        "    - message_end: {stop_reason: error, error_reason: timeout, retryable: true}",
        client_timeout=0.2,
    ),
    "latency_beyond_the_client_timeout": _one_turn(
        "a first byte later than the client waits",
        '  - {text: "Too late.", latency: 5}',
        "  raises: true\n  events:\n    - message_end: {stop_reason: error, error_reason: timeout}",
        client_timeout=0.2,
    ),
    # The library's hang ended by an abort, its chunks 10 ms apart: each chunk is then its
    # own write on the server too, so both clients read the same pieces before the abort.
    # (Without an interval the server writes a reply at once while ScriptedWire hands its
    # chunks over one by one, so what a mid-reply abort keeps may differ: on Anthropic the
    # abort lands between the text block's start and its first delta.)
    "hang_then_abort": Case(
        (LIBRARY / "abort/hang_then_abort.yaml")
        .read_text()
        .replace("fault: hang}", "fault: hang, wire: {interval: 0.01}}"),
        streaming_only=True,
    ),
}

PARAMS = [
    pytest.param(name, api, stream, id=f"{name}-{mode}")
    for name, case in CASES.items()
    for (api, stream), mode in zip(MODES, MODE_IDS, strict=True)
    if stream or not case.streaming_only
]


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Scenario]:
    folder = tmp_path_factory.mktemp("wire_faults")
    loaded = {}
    for name, case in CASES.items():
        path = folder / f"{name}.yaml"
        path.write_text(case.text)
        loaded[name] = load_scenario(path)
    return loaded


@pytest.fixture(scope="module")
def servers(scenarios: dict[str, Scenario]) -> Iterator[dict[str, WireServer]]:
    """One server per file for the module; each case plays a session of its own."""
    running: dict[str, WireServer] = {}
    try:
        for name, scenario in scenarios.items():
            running[name] = scenario_server(scenario).start()
        yield running
    finally:
        for server in running.values():
            server.stop()


def _outcome(run: RunOutcome) -> dict[str, Any]:
    errored = [e for e in run.trace if e["type"] == "message_end" and "error" in e]
    details = ("error", "error_reason", "error_status", "retryable", "retry_after")
    return {
        "reason": run.trace[-1].get("reason"),
        "stop_reasons": [e.get("stop_reason") for e in run.trace if e["type"] == "message_end"],
        "error_details": [{k: e.get(k) for k in details} for e in errored],
        "result": run.result,
        "raised": None if run.error is None else (type(run.error).__name__, str(run.error)),
    }


@pytest.mark.parametrize(("name", "api", "stream"), PARAMS)
def test_scripted_wire_gives_what_the_server_gives(
    name: str,
    api: str,
    stream: bool,
    scenarios: dict[str, Scenario],
    servers: dict[str, WireServer],
) -> None:
    scenario, timeout = scenarios[name], CASES[name].client_timeout
    wire = ScriptedWire(scenario.script())
    in_process = make_provider(api, wire, stream=stream)
    session = f"{api}-{'stream' if stream else 'json'}"
    over_http = servers[name].provider(api, stream=stream, session=session)
    if timeout is not None:
        in_process.timeout = over_http.timeout = timeout  # type: ignore[attr-defined]
    try:
        scripted = run_scenario(scenario, in_process)
    finally:
        asyncio.run(in_process.client.aclose())
    served = run_scenario(scenario, over_http)

    assert _outcome(scripted) == _outcome(served)
    assert scripted.trace == served.trace
    for run in (scripted, served):
        verdict = check_outcome(run)
        assert verdict.passed, verdict.report()
    sent = servers[name].session(session).requests
    assert [r.body for r in wire.requests] == [r.body for r in sent]
    wire.assert_consumed()
    servers[name].assert_consumed(session)


# --------------------------------------------------------------------------- the transport


def test_a_cut_is_the_error_a_dropped_connection_gives_sync_and_async() -> None:
    script = [{"text": TEXT, "wire": {"cut_after": 1}}] * 2
    wire = ScriptedWire(script)
    with httpx2.Client(transport=wire.transport) as client:
        with client.stream("POST", CHAT, json={**ASK, "stream": True}) as reply:
            received = []
            with pytest.raises(httpx2.RemoteProtocolError, match="incomplete chunked read"):
                for chunk in reply.iter_raw():
                    received.append(chunk)
        assert len(received) == 1 and b"[DONE]" not in received[0]

    async def post() -> None:
        async with wire.client() as client:
            await client.post(CHAT, json=ASK)

    with pytest.raises(httpx2.RemoteProtocolError):
        asyncio.run(post())
    wire.assert_consumed()


def test_latency_and_interval_are_real_waits() -> None:
    wire = ScriptedWire([{"text": "a" * 24 * 4, "latency": 0.2, "wire": {"interval": 0.05}}])

    async def read() -> tuple[float, list[float]]:
        async with wire.client() as client:
            start = time.perf_counter()
            async with client.stream("POST", CHAT, json={**ASK, "stream": True}) as reply:
                head = time.perf_counter() - start  # the status arrives after the latency
                times = [time.perf_counter() - start async for _ in reply.aiter_raw()]
        return head, times

    head, times = asyncio.run(read())
    assert head >= 0.19
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(gaps) >= 5 and min(gaps) >= 0.04
    assert times[-1] >= 0.2 + 0.05 * len(gaps) - 0.02


def test_hang_lasts_until_the_read_timeout() -> None:
    script = [{"text": TEXT, "fault": "hang"}, {"text": TEXT, "fault": "hang"}]
    wire = ScriptedWire(script)
    with httpx2.Client(transport=wire.transport, timeout=0.15) as client:
        with client.stream("POST", CHAT, json={**ASK, "stream": True}) as reply:
            received = []
            with pytest.raises(httpx2.ReadTimeout):
                for chunk in reply.iter_raw():
                    received.append(chunk)
        # streamed: the reply up to its end, then nothing
        assert b"A reply long" in b"".join(received) and b"[DONE]" not in b"".join(received)
        start = time.perf_counter()
        with pytest.raises(httpx2.ReadTimeout):
            client.post(CHAT, json=ASK)  # not streamed: not even the status arrives
        assert 0.14 <= time.perf_counter() - start < 2


def test_a_hang_ends_when_the_client_cancels() -> None:
    wire = ScriptedWire([{"text": TEXT, "fault": "hang"}])

    async def give_up() -> float:
        async with wire.client(timeout=None) as client:
            start = time.perf_counter()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(client.post(CHAT, json=ASK), 0.1)
            return time.perf_counter() - start

    assert asyncio.run(give_up()) < 1


def test_a_handler_in_your_own_mock_transport_waits_at_the_first_read() -> None:
    wire = ScriptedWire([{"text": "late", "latency": 0.15}])
    with httpx2.Client(transport=httpx2.MockTransport(wire.handler)) as client:
        start = time.perf_counter()
        with client.stream("POST", CHAT, json=ASK) as reply:
            assert reply.status_code == 200
            body = reply.read()
        assert time.perf_counter() - start >= 0.14
    assert b"late" in body


def test_faults_come_as_a_wire_key_or_a_pair_and_respond_shows_the_bytes() -> None:
    busy = ({"stop_reason": "error", "error": "busy"}, WireFault(status=503, retry_after=2))
    wire = ScriptedWire([busy, {"text": TEXT, "wire": {"corrupt_chunk": 1}}])
    first = wire.respond("POST", CHAT, b'{"model": "m"}')
    assert first.status == 503 and first.headers["retry-after"] == "2"
    assert b'"message":"busy"' in first.body
    second = wire.respond("POST", CHAT, b'{"model": "m"}')
    assert second.status == 200 and second.body.startswith(b'{"openprogram_sim": corrupt')
    wire.assert_consumed()


def test_an_error_reason_picks_the_status_and_error_status_is_the_default() -> None:
    limited = {"stop_reason": "error", "error": "slow down", "error_reason": "rate_limit"}
    plain = {"stop_reason": "error", "error": "overloaded"}
    wire = ScriptedWire([limited, plain], error_status=529)
    url = "https://api.anthropic.com/v1/messages"
    assert wire.respond("POST", url, b"{}").status == 429
    assert wire.respond("POST", url, b"{}").status == 529


def test_a_fault_the_response_cannot_carry_is_a_recorded_500_not_retried() -> None:
    wire = ScriptedWire([{"text": "short", "wire": {"corrupt_chunk": 40}}])
    response = wire.respond("POST", CHAT, b"{}")
    assert response.status == 500 and response.headers["x-should-retry"] == "false"
    assert "corrupt_chunk is 40, but the response has 1 chunk(s)" in wire.errors[0]


def test_requests_run_in_parallel_on_one_wire() -> None:
    """Waits do not hold the wire: two slow replies overlap (each request takes its turn in
    arrival order)."""
    wire = ScriptedWire([{"text": "one", "latency": 0.3}, {"text": "two", "latency": 0.3}])

    async def both() -> list[str]:
        async with wire.client() as client:
            replies = await asyncio.gather(*(client.post(CHAT, json=ASK) for _ in range(2)))
        return sorted(r.json()["choices"][0]["message"]["content"] for r in replies)

    start = time.perf_counter()
    assert asyncio.run(both()) == ["one", "two"]
    assert time.perf_counter() - start < 0.5  # one after the other would take 0.6 s


def test_the_comparison_sees_a_fault_left_out(
    scenarios: dict[str, Scenario], servers: dict[str, WireServer]
) -> None:
    """Negative control: the same turns without their ``wire:`` key in process (what
    ScriptedWire used to serve) do not give the server's outcome."""
    from openprogram_sim.play import build_model

    scenario = scenarios["cut_after"]
    wire = ScriptedWire(build_model(scenario).turns)  # the turns alone, no faults
    in_process = make_provider("openai-chat", wire, stream=True)
    try:
        scripted = run_scenario(scenario, in_process)
    finally:
        asyncio.run(in_process.client.aclose())
    served = run_scenario(scenario, servers["cut_after"].provider("openai-chat", session="control"))
    assert _outcome(scripted) != _outcome(served)
    assert scripted.trace != served.trace
