"""``openprogram-sim serve`` as a user runs it: a real process, the banner with each API's
base URL, a line per request, Ctrl-C, then the report and the exit status. (The files it
refuses are refused before any server starts: those run through ``main(argv)`` in-process.)"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest
from _support import run_cli
from serve_support import serve_process

DATA = Path(__file__).parent / "data"
TIDES = DATA / "tides.yaml"
SEARCH = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}
ASK = {"role": "user", "content": "Why are there tides?"}
BANNER_LINES = 7
BANNERS: dict[str, str] = {}


@contextmanager
def served(path: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``openprogram-sim serve path --port 0``, and its root URL read from the banner (kept
    in ``BANNERS``; ``stop`` returns what follows it)."""
    with serve_process(path, *extra) as process:
        banner = [process.stdout.readline() for _ in range(BANNER_LINES)]  # type: ignore[union-attr]
        match = re.search(r"listening on (http://\S+)", banner[1])
        assert match, banner
        BANNERS[match.group(1)] = "".join(banner)
        yield process, match.group(1)


def stop(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Ctrl-C, then the exit status and everything printed."""
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=20)
    return process.returncode, out, err


def test_a_client_that_follows_the_script_passes() -> None:
    with served(TIDES) as (process, url), httpx2.Client(base_url=url) as client:
        first = client.post(
            "/v1/chat/completions", json={"model": "m", "messages": [ASK], "tools": [SEARCH]}
        ).json()
        call = first["choices"][0]["message"]["tool_calls"][0]
        result = {"role": "tool", "tool_call_id": call["id"], "content": "Tides follow the moon."}
        history = [ASK, first["choices"][0]["message"], result]
        second = client.post("/v1/chat/completions", json={"model": "m", "messages": history})
        assert second.json()["choices"][0]["message"]["content"] == "Because of the moon."
        code, out, err = stop(process)
    assert code == 0, out + err
    assert "PASS" in out and "2 model call(s)" in out
    assert "#1 openai-chat (json) <- turn 1/2" in err
    assert "Traceback" not in err


def test_banner_names_each_apis_base_url() -> None:
    with served(TIDES, "-q") as (process, url):
        code, _out, err = stop(process)
    assert code == 1  # nothing was served
    banner = BANNERS[url]
    assert banner.startswith("openprogram-sim serve: research tides, then answer (2 scripted")
    # the stack it runs on: the fast one here, where the test extra installs uvloop + httptools
    assert f"listening on {url}  (uvloop + httptools; Ctrl-C to stop)" in banner
    assert f"OpenAI (Chat, Responses)  {url}/v1  base_url" in banner
    assert f"Bedrock                   {url}  endpoint_url" in banner
    assert f"Anthropic                 {url}  base_url or ANTHROPIC_BASE_URL" in banner
    assert f"Gemini                    {url}  base_url or GOOGLE_GEMINI_BASE_URL" in banner
    assert "openprogram:" not in banner  # one URL per API: the SDKs' serves our adapters too
    assert f"sessions: {url}/s/NAME/" in banner
    assert err == ""


def test_unserved_turns_and_unmet_requests_fail_with_runs_diff() -> None:
    with served(TIDES, "-q") as (process, url), httpx2.Client(base_url=url) as client:
        # no tools offered, and the client stops after one call
        client.post("/v1/chat/completions", json={"model": "m", "messages": [ASK]})
        code, out, err = stop(process)
    assert code == 1
    assert "1 of 2 scripted turns were never requested" in out
    assert "request 1 (depth 0, round 1) differs" in out
    assert 'tools: expected ["search"], actual []' in out
    # the expectation's file and line, relative to the working directory when under it
    here = Path.cwd()
    assert f"at {TIDES.relative_to(here) if TIDES.is_relative_to(here) else TIDES}:" in out
    assert "Traceback" not in err


def test_a_client_that_gives_up_leaves_no_traceback(tmp_path: Path) -> None:
    slow = tmp_path / "slow.yaml"
    slow.write_text(
        TIDES.read_text().replace(
            '  - text: "Because of the moon."', '  - text: "Because of the moon."\n    latency: 5'
        )
    )
    with served(slow, "-q") as (process, url), httpx2.Client(base_url=url) as client:
        client.post("/v1/chat/completions", json={"model": "m", "messages": [ASK]})
        with pytest.raises(httpx2.ReadTimeout):
            client.post("/v1/chat/completions", json={"model": "m", "messages": [ASK]}, timeout=0.2)
        time.sleep(0.2)
        code, _out, err = stop(process)
    assert "Traceback" not in err and "ERROR" not in err, err
    assert code == 1  # the requests check still runs (no tools were offered)


def test_a_scenario_that_does_not_load_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("scenario: x\nexec: {content: hi}\nmodel: [{textt: hi}]\n")
    result = run_cli("serve", str(bad))
    assert result.returncode == 2
    assert "did you mean 'text'" in result.stderr


def test_a_cassette_scenario_is_refused_with_the_way_to_serve_it(tmp_path: Path) -> None:
    scenario = tmp_path / "replay.yaml"
    scenario.write_text(
        "scenario: x\nexec: {content: hi}\n"
        "model: {cassette: rec.yaml, model: 'anthropic:claude-x'}\n"
    )
    result = run_cli("serve", str(scenario))
    assert result.returncode == 2
    assert "replays a cassette" in result.stderr
    assert "openprogram-sim distill rec.yaml --scenario" in result.stderr
    assert "Traceback" not in result.stderr
