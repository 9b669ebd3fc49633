"""The server's two stacks (asyncio + h11, pure Python; uvloop + httptools, the ``fast``
extra) serve the same bytes, faults and reports; which one runs is chosen as documented;
and a turn's response encoded once and stamped per request is byte for byte what
encoding it for that request gives. Real loopback HTTP throughout."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

from openprogram_sim.models import Turn, WireFault
from openprogram_sim.wire import APIS, WireServer, _server, encode, serve
from openprogram_sim.wire import _encode as encoding

FAST = _server._fast_missing() is None
needs_fast = pytest.mark.skipif(not FAST, reason="the fast extra is not installed")
STREAM = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
TOOL_TURN = {
    "text": "Looking that up for you, one moment please.",
    "thinking": "the user wants tides",
    "tool_calls": [{"search": {"q": "tides 9081726354"}}, {"fetch": {"url": "x"}}],
}


def raw_exchange(port: int, body: dict[str, Any], path: str = "/v1/chat/completions") -> bytes:
    """One request on a raw socket: its answer, read to the end of the chunked body or to
    the server's close (a cut)."""

    async def go() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        data = json.dumps(body).encode()
        writer.write(
            f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\n\r\n".encode()
            + data
        )
        answer = b""
        while not answer.endswith(b"\r\n0\r\n\r\n") and not whole(answer):
            more = await asyncio.wait_for(reader.read(65536), 10)
            if not more:
                break
            answer += more
        writer.close()
        return answer

    return asyncio.run(go())


def whole(answer: bytes) -> bool:
    """``answer`` has a ``content-length`` and all of it came."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    for line in head.lower().split(b"\r\n"):
        if sep and line.startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def normalized(answer: bytes) -> bytes:
    """Each answer on the connection with its head's header names in lower case, its
    headers sorted and without ``date`` (h11 writes ``Transfer-Encoding``, httptools
    ``transfer-encoding``); bodies, chunk framing included, as they came."""
    out = []
    rest = answer
    while rest:
        head, _, rest = rest.partition(b"\r\n\r\n")
        status, *headers = head.split(b"\r\n")
        kept = sorted(
            name.lower() + b":" + value
            for name, _, value in (line.partition(b":") for line in headers)
            if name.lower() != b"date"
        )
        length = [int(h.split(b":")[1]) for h in kept if h.startswith(b"content-length:")]
        end = length[0] - 7 if length else rest.find(b"\r\n0\r\n\r\n")
        body, rest = (rest, b"") if end < 0 else (rest[: end + 7], rest[end + 7 :])
        out.append(b"\r\n".join([status, *kept]) + b"\r\n\r\n" + body)
    return b"|".join(out)


# --------------------------------------------------------------------------- choosing


def test_the_default_stack_is_fast_when_installed_and_the_variable_chooses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(_server.STACK_VARIABLE, raising=False)
    with WireServer(["hi"]) as auto:
        assert auto.stack == (
            "uvloop + httptools"
            if FAST
            else "asyncio + h11 (pure Python; pip install 'openprogram-sim[fast]' for uvloop + "
            "httptools)"
        )
    monkeypatch.setenv(_server.STACK_VARIABLE, "pure")
    with WireServer(["hi"]) as pure:
        assert pure.stack == "asyncio + h11 (pure Python)"
        assert httpx2.post(pure.url + "/v1/chat/completions", json=STREAM).status_code == 200
    monkeypatch.setenv(_server.STACK_VARIABLE, "quick")
    with pytest.raises(ValueError) as caught:
        WireServer(["hi"])
    assert str(caught.value) == (
        "OPENPROGRAM_SIM_STACK='quick' is not a stack: use 'pure' (asyncio + h11), 'fast' "
        "(uvloop + httptools) or 'auto', or unset it"
    )
    with pytest.raises(ValueError) as caught:
        WireServer(["hi"], stack="turbo")  # type: ignore[arg-type]
    assert str(caught.value) == "stack must be 'auto', 'fast' or 'pure', got 'turbo'"


def test_fast_without_the_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_server, "_fast_missing", lambda: "uvloop, httptools")
    with pytest.raises(ValueError) as caught:
        WireServer(["hi"], stack="fast")
    assert str(caught.value) == (
        "stack='fast' needs uvloop and httptools (uvloop, httptools not installed): "
        "pip install 'openprogram-sim[fast]'"
    )
    assert _server.pick_stack("auto").label.startswith("asyncio + h11 (pure Python; pip")


@pytest.mark.slow
def test_the_server_runs_in_a_python_without_the_extra(tmp_path: Path) -> None:
    # uvloop and httptools made unimportable: the pure stack serves, and says how to go fast
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text("import sys\nsys.modules['uvloop'] = sys.modules['httptools'] = None\n")
    code = (
        "import httpx2\n"
        "from openprogram_sim.wire import serve\n"
        "with serve(['Hello.']) as s:\n"
        "    r = httpx2.post(s.url + '/v1/chat/completions', json={'model': 'm', "
        "'messages': [{'role': 'user', 'content': 'hi'}]})\n"
        "    print(s.stack)\n"
        "    print(r.json()['choices'][0]['message']['content'])\n"
    )
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "asyncio + h11 (pure Python; pip install 'openprogram-sim[fast]' for uvloop + httptools)",
        "Hello.",
    ]


# --------------------------------------------------------------------------- same bytes


@needs_fast
@pytest.mark.parametrize(
    "fault",
    [None, {"corrupt_chunk": 2}, {"cut_after": 3}, {"interval": 0.01}, {"status": 429}],
    ids=["plain", "corrupt", "cut", "interval", "http-error"],
)
def test_both_stacks_answer_the_same_bytes(fault: dict[str, Any] | None) -> None:
    turn: Any = TOOL_TURN if fault is None else (TOOL_TURN, WireFault(**fault))
    answers = {}
    for stack in ("pure", "fast"):
        with serve([turn, turn], stack=stack) as server:  # type: ignore[arg-type]
            first = raw_exchange(server.port, STREAM)
            second = raw_exchange(server.port, STREAM)
            answers[stack] = normalized(first) + b"|" + normalized(second)
    assert answers["pure"] == answers["fast"]
    fast = answers["fast"]
    if fault is None:
        assert fast.count(b"HTTP/1.1 200 OK\r\n") == 2 and fast.count(b"data: [DONE]") == 2
        assert b'"id":"chatcmpl-wire1"' in fast and b'"id":"chatcmpl-wire2"' in fast
        assert b'"id":"call_wire2_1"' in fast
        assert b"tides 9081726354" in fast  # the template's marker digits, as scripted
    elif "cut_after" in fault:
        assert b"data: [DONE]" not in fast and fast.count(b"\r\n0\r\n\r\n") == 0
    elif "status" in fault:
        assert fast.count(b"HTTP/1.1 429 ") == 2


@needs_fast
def test_both_stacks_keep_the_same_sessions_traces_and_reports() -> None:
    seen = {}
    for stack in ("pure", "fast"):
        with serve(["Hello.", "Again."], stack=stack) as server:  # type: ignore[arg-type]
            with httpx2.Client(base_url=server.url) as client:
                assert client.post("/s/a/v1/chat/completions", json=STREAM).status_code == 200
                trace = client.get("/s/a/trace").json()
                assert client.post("/s/a/v1/chat/completions", json=STREAM).status_code == 200
                extra = client.post("/s/a/v1/chat/completions", json=STREAM)
                report = client.delete("/s/a").json()
            checked = server.check()
        kinds = [event["type"] for event in trace["trace"]]
        seen[stack] = (extra.status_code, kinds, report["report"], report["requests"])
        assert not checked.passed and "script is exhausted" in checked.render()
    assert seen["pure"] == seen["fast"]
    status, kinds, text, requests = seen["fast"]
    assert (status, requests) == (400, 3) and kinds
    assert "the script is exhausted: request #3" in text


# --------------------------------------------------------------------------- templates


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_a_stamped_template_is_what_encoding_gives(api: str, stream: bool) -> None:
    turns: list[Any] = [
        TOOL_TURN if api in ("openai-chat", "openai-responses") or stream else "Plain text.",
        {"stop_reason": "error", "error": "boom", "text": "partial"},
        {"stop_reason": "error", "error": "overloaded"},
        {"text": "cut short", "fault": "truncate"},
    ]
    for turn in map(Turn.coerce, turns):
        for seq in (1, 9, 10, 123456, 1):
            options = dict(stream=stream, model="gpt-x", chunk_size=7)
            fresh = encoding._encode(
                api, turn, seq=seq, error_status=500, error_mode="auto", **options
            )
            assert encode(api, turn, seq=seq, **options) == fresh, (api, turn, seq)


def test_a_turn_changed_in_place_is_encoded_again() -> None:
    turn = Turn.coerce("first text")
    assert b"first text" in encode("openai-chat", turn, seq=1).body
    turn.text = "second text"
    body = encode("openai-chat", turn, seq=2).body
    assert b"second text" in body and b"first text" not in body


def test_the_templates_kept_are_bounded() -> None:
    for i in range(encoding._KEPT_TEMPLATES + 50):
        encode("openai-chat", Turn.coerce(f"reply {i}"))
    assert len(encoding._TEMPLATES) == encoding._KEPT_TEMPLATES


def test_bedrock_frames_are_not_stamped_but_encoded_per_request() -> None:
    turn = Turn.coerce(TOOL_TURN)
    encode("bedrock", turn, seq=1)
    kept = [v for k, v in encoding._TEMPLATES.items() if k[0] == "bedrock" and k[1] == id(turn)]
    assert kept and kept[0][2] is None  # binary frames: lengths and CRCs hold the number
    assert encode("bedrock", turn, seq=77).body == encoding._encode(
        "bedrock", turn, seq=77, stream=True, model="scripted", chunk_size=24,
        error_status=500, error_mode="auto",
    ).body  # fmt: skip
