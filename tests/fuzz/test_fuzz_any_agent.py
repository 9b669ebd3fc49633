"""``openprogram-sim fuzz --agent``: a real agent on the plain openai SDK, with two planted
bugs, fuzzed over real loopback HTTP; each bug found, shrunk to its minimal script, and its
regression file failing against the buggy agent and passing against the fixed one.

The in-process form (``openai_loop:agent``) runs here in a few seconds; the command form
(a real process per session) and ``openprogram-sim serve`` as a real process are the slow
tests at the end.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from openprogram_sim.cli import main
from openprogram_sim.fuzz.agent import (
    PLACEHOLDER_KEY,
    AgentEndpoints,
    AgentTarget,
    declared_tools,
    replay,
    run_agent_campaign,
)
from openprogram_sim.wire import WireServer

AGENTS = Path(__file__).resolve().parent / "agents"
AGENT_SCRIPT = AGENTS / "openai_loop.py"

TWO_CALLS = {"tool_calls": [{"name": "search", "arguments": {"q": ""}},
                            {"name": "search", "arguments": {"q": ""}}]}  # fmt: skip
RATE_LIMIT = {"stop_reason": "error", "error": "rate limited", "error_reason": "rate_limit",
              "retry_after": 0.05}  # fmt: skip
DONE = {"text": "Done."}


def _fuzz(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["fuzz", "--pythonpath", str(AGENTS), *args])
    out, err = capsys.readouterr()
    return code, out, err


def _written(out: str) -> Path:
    match = re.search(r"regression scenario written: (\S+)", out)
    assert match, out
    return Path(match.group(1))


def _model(path: Path) -> list[dict[str, Any]]:
    return yaml.safe_load(path.read_text())["model"]


# --------------------------------------------------------------------------- in process


def test_the_dropped_second_result_is_found_shrunk_and_its_file_fails_until_fixed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = _fuzz(capsys, "--agent", "openai_loop:fixed_retry_after", "--examples", "40",
                         "--regressions", str(tmp_path))  # fmt: skip
    assert code == 1, out
    assert "the agent speaks openai-chat (streaming); its tools: search, add" in out
    assert "CLIENT CHECK BROKEN (seed 0), shrunk case:" in out
    assert re.search(r"client check answered_once broken by request #2: call \S+ \(search\) "
                     r"served in answer #1 has no result in the next request", out)  # fmt: skip
    path = _written(out)
    assert _model(path) == [TWO_CALLS, DONE]  # shrunk: one round of two calls, then the text
    header = path.read_text().splitlines()[:3]
    assert header[0].startswith("# Found by openprogram-sim fuzz --agent openai_loop:fixed_ret")
    assert "replay(" in path.read_text()
    buggy = replay(path, "openai_loop:fixed_retry_after", pythonpath=(str(AGENTS),), show=False)
    assert not buggy.passed and buggy.exit_status == 1
    assert "answered_once" in buggy.report.render()
    fixed = replay(path, "openai_loop:fixed", pythonpath=(str(AGENTS),), show=False)
    assert fixed.passed, fixed.report.render()
    assert fixed.exit_status == 0 and fixed.run.outcome == "ok"


def test_the_retry_that_ignores_retry_after_is_found_shrunk_and_its_file_fails_until_fixed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = _fuzz(capsys, "--agent", "openai_loop:fixed_results", "--examples", "40",
                         "--regressions", str(tmp_path))  # fmt: skip
    assert code == 1, out
    assert re.search(r"client check retry_after broken by request #2: it came [\d.]+ s after "
                     r"answer #1, whose retry-after asked for 0.05 s", out)  # fmt: skip
    path = _written(out)
    assert _model(path) == [RATE_LIMIT, DONE]
    buggy = replay(path, "openai_loop:fixed_results", pythonpath=(str(AGENTS),), show=False)
    assert not buggy.passed and "retry_after" in buggy.report.render()
    fixed = replay(path, "openai_loop:fixed", pythonpath=(str(AGENTS),), show=False)
    assert fixed.passed, fixed.report.render()


def test_an_agent_with_both_bugs_fixed_keeps_every_session_and_the_summary_says_what_was_served(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = _fuzz(capsys, "--agent", "openai_loop:fixed", "--examples", "12",
                           "--seed", "3", "--regressions", str(tmp_path))  # fmt: skip
    assert code == 0, out
    assert out.splitlines()[0].startswith("fuzz: 12 sessions of function openai_loop:fixed, seed 3")
    assert re.search(r"sessions +12 \(", out)
    assert re.search(r"tool calls +\d+ served: .*valid \d+", out)
    assert re.search(r"faults +[1-9]\d*: ", out)  # faults were served and survived
    assert "agent runs      finished 12" in out
    assert "no failure in 12 sessions (seed 3)" in out
    assert "12/12 sessions" in err  # the progress line
    assert list(tmp_path.iterdir()) == []


def test_an_agent_that_raises_on_an_unknown_tool_is_a_failure_whose_file_serve_sees(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = _fuzz(capsys, "--agent", "openai_loop:strict", "--examples", "60",
                         "--regressions", str(tmp_path))  # fmt: skip
    assert code == 1, out
    assert "AGENT FAILED (seed 0), shrunk case:" in out
    assert "- the agent raised: KeyError: \"no tool named 'no_such_tool'\"" in out
    assert "1 of 2 scripted turns were never requested" in out
    path = _written(out)
    assert _model(path) == [
        {"tool_calls": [{"name": "no_such_tool", "arguments": {}}]},
        DONE,
    ]
    again = replay(path, "openai_loop:strict", pythonpath=(str(AGENTS),), show=False)
    assert not again.passed and again.run.outcome == "failed"
    assert replay(path, "openai_loop:fixed", pythonpath=(str(AGENTS),), show=False).passed


def test_an_anthropic_sdk_agent_that_lets_a_cut_stream_escape_is_found_on_its_own_wire(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Another SDK, another wire: tools read from an Anthropic request, faults in its shape."""
    code, out, _ = _fuzz(capsys, "--agent", "anthropic_loop:agent", "--examples", "40",
                         "--regressions", str(tmp_path))  # fmt: skip
    assert code == 1, out
    assert "the agent speaks anthropic (streaming); its tools: search" in out
    assert "AGENT FAILED (seed 0), shrunk case:" in out
    # The cut as the HTTP library raises it (anthropic < 2.17) or as the SDK wraps it (>= 2.17).
    raised = r"(\S*RemoteProtocolError: |\S*APIConnectionError: Connection to \S+ failed: )"
    assert re.search(r"- the agent raised: " + raised + "peer closed connection", out), out
    path = _written(out)
    (cut, done) = _model(path)
    assert (cut["wire"], done) == ({"cut_after": 0}, DONE)
    pythonpath = (str(AGENTS),)
    assert not replay(path, "anthropic_loop:agent", pythonpath=pythonpath, show=False).passed
    assert replay(path, "anthropic_loop:fixed", pythonpath=pythonpath, show=False).passed


@pytest.mark.slow
def test_a_google_genai_agent_that_does_not_stream_keeps_every_session(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A third SDK and wire: no streaming (cuts right after the headers, a 500 for an error
    in the stream), no call ids, arguments that travel as JSON objects only."""
    code, out, _ = _fuzz(capsys, "--agent", "genai_loop:agent", "--examples", "10",
                         "--seed", "2", "--regressions", str(tmp_path))  # fmt: skip
    assert code == 0, out
    assert "the agent speaks gemini (not streaming); its tools: search" in out
    assert re.search(r"faults +[1-9]\d*: .*; 0 turns re-chunked", out), out
    assert "no failure in 10 sessions (seed 2)" in out


def test_your_properties_are_checked_on_every_session_and_expected_by_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("properties:\n  - at_most: {tool: add, times: 1}\n")
    code, out, _ = _fuzz(capsys, "--agent", "openai_loop:fixed", "--examples", "60",
                         "--properties", str(rules), "--faults", "none",
                         "--regressions", str(tmp_path / "out"))  # fmt: skip
    assert code == 1, out
    assert "PROPERTY BROKEN (seed 0), shrunk case:" in out
    broken = r'property at_most: \{"tool": "add", "times": 1\} \(\S*rules.yaml:2\) does not hold'
    assert re.search(broken + ": add was called 2 times, at most 1 allowed", out), out
    path = _written(out)
    document = yaml.safe_load(path.read_text())
    assert document["expect"] == {"properties": [{"at_most": {"tool": "add", "times": 1}}]}
    assert [len(t.get("tool_calls", [])) for t in document["model"]] in ([2, 0], [1, 1, 0])
    assert not any("wire" in t for t in document["model"])  # --faults none
    assert not replay(path, "openai_loop:fixed", pythonpath=(str(AGENTS),), show=False).passed


@pytest.mark.slow
def test_an_agent_past_its_time_is_a_timeout_not_shrunk(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = _fuzz(capsys, "--agent", "openai_loop:slow_on_tools", "--examples", "20",
                         "--timeout", "1", "--regressions", str(tmp_path))  # fmt: skip
    assert code == 1, out
    assert "AGENT TIMED OUT (seed 0), shrunk case:" in out
    assert "- the agent did not finish within 1 s (--timeout)" in out
    assert "timed out 1" in out
    path = _written(out)
    assert "replay(" in path.read_text() and ", timeout=1).exit_status" in path.read_text()
    assert "# (the agent did not finish within 1 s: give it that long" in path.read_text()


@pytest.mark.slow
def test_ctrl_c_ends_the_campaign_and_the_agents_process(tmp_path: Path) -> None:
    """The agent runs in a process group of its own (so a timeout kills what it started),
    which the terminal's Ctrl-C does not reach: the campaign ends it."""
    marker = tmp_path / "pid"
    script = tmp_path / "hangs_after_discovery.py"
    script.write_text(
        "import os, sys, time, openai\n"
        "if os.environ['OPENAI_BASE_URL'].endswith('/s/discover/v1'):\n"
        "    openai.OpenAI(max_retries=0).chat.completions.create(\n"
        "        model='m', messages=[{'role': 'user', 'content': 'hi'}])\n"
        "    sys.exit(0)\n"
        f"open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(120)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "openprogram_sim.cli", "fuzz", "--agent",
         f"{sys.executable} {script}", "--examples", "3", "--no-write"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        for _ in range(300):
            if marker.exists() and marker.read_text():
                break
            time.sleep(0.05)
        agent = int(marker.read_text())
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, out + err
    assert err.rstrip().endswith("openprogram-sim fuzz: interrupted, no verdict")
    with pytest.raises(ProcessLookupError):
        os.kill(agent, 0)  # the agent's process is gone (reaped by the campaign)


# --------------------------------------------------------------------------- bad input


def test_a_command_that_cannot_start_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = _fuzz(capsys, "--agent", "no-such-agent-binary --flag", "--examples", "1")
    assert code == 2
    assert "--agent 'no-such-agent-binary --flag' cannot be started" in err
    assert "'no-such-agent-binary'" in err and "PATH" in err


def test_an_import_path_that_fails_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _fuzz(capsys, "--agent", "openai_loop:no_such_function")
    assert code == 2
    assert "--agent openai_loop:no_such_function: module 'openai_loop' has no attribute" in err
    code, _, err = _fuzz(capsys, "--agent", "no_such_module_xyz:run")
    assert code == 2
    assert "cannot import module 'no_such_module_xyz'" in err


def test_an_agent_that_never_sends_a_request_is_told_the_variables_it_was_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = _fuzz(capsys, "--agent", f"{sys.executable} -c pass", "--examples", "3")
    assert code == 2
    assert (
        "sent no request to the scripted model (it finished); it was given OPENAI_BASE_URL" in err
    )
    assert "OPENAI_BASE_URL, OPENAI_API_KEY, ANTHROPIC_BASE_URL" in err
    assert "AWS_ENDPOINT_URL_BEDROCK_RUNTIME" in err and "/s/discover/v1" in err


def test_flags_that_do_not_go_with_an_agent_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = _fuzz(capsys, "--agent", "openai_loop:fixed", "--registry", "x:y")
    assert (code, err.strip()) == (
        2,
        "openprogram-sim fuzz: --registry do not apply with --agent (an agent is fuzzed one "
        "session at a time)",
    )
    code, _, err = _fuzz(capsys, "--agent", "openai_loop:fixed", "--faults", "rate_limit,boom")
    assert code == 2 and "unknown fault boom; use some of rate_limit, stream_error, cut" in err
    code, _, err = _fuzz(capsys, "--faults", "cut", "--examples", "1")
    assert code == 2 and "--faults apply to fuzzing an agent (--agent" in err


def test_the_tools_are_read_from_each_apis_first_request() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    bodies = {
        "openai-chat": {"tools": [{"type": "function", "function": {"name": "s",
                                                                    "parameters": schema}}]},
        "openai-responses": {"tools": [{"type": "function", "name": "s", "parameters": schema}]},
        "anthropic": {"tools": [{"name": "s", "input_schema": schema}]},
        "gemini": {"tools": [{"functionDeclarations": [{"name": "s", "parameters": {
            "type": "OBJECT", "properties": {"q": {"type": "STRING"}}}}]}]},
        "bedrock": {"toolConfig": {"tools": [{"toolSpec": {"name": "s",
                                                           "inputSchema": {"json": schema}}}]}},
    }  # fmt: skip
    for api, body in bodies.items():
        (tool,) = declared_tools(api, body)
        assert (tool.name, tool.parameters) == ("s", schema), api


def test_a_command_agent_gets_the_session_urls_and_a_placeholder_key(tmp_path: Path) -> None:
    """What a command sees, read back from its environment."""
    seen = tmp_path / "env.txt"
    script = tmp_path / "show_env.py"
    script.write_text(
        f"import os, json\nopen({str(seen)!r}, 'w').write(json.dumps(dict(os.environ)))\n"
    )
    target = AgentTarget.load(f"{sys.executable} {script}")
    with WireServer([DONE]) as server:
        run = target.run(AgentEndpoints.of_session(server, "s1"), 20)
    assert run.outcome == "ok"
    env = json.loads(seen.read_text())
    root = f"{server.url}/s/s1"
    assert env["OPENAI_BASE_URL"] == f"{root}/v1"
    assert env["ANTHROPIC_BASE_URL"] == env["GOOGLE_GEMINI_BASE_URL"] == root
    assert env["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] == root
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        assert env[key] == PLACEHOLDER_KEY


def test_the_face_exports_exactly_its_all_and_its_classes_say_they_live_there() -> None:
    import types

    import openprogram_sim.fuzz.agent as face

    public = {n for n, v in vars(face).items()
              if not n.startswith("_") and not isinstance(v, types.ModuleType)}  # fmt: skip
    assert public == set(face.__all__)
    classes = [getattr(face, n) for n in face.__all__ if isinstance(getattr(face, n), type)]
    assert {c.__module__ for c in classes} == {"openprogram_sim.fuzz.agent"}


def test_an_agent_that_declares_no_tools_is_served_texts_and_faults_only() -> None:
    import openai

    def chat(endpoints: AgentEndpoints) -> str:
        with openai.OpenAI(base_url=endpoints.openai, api_key=endpoints.api_key,
                           max_retries=0) as client:  # fmt: skip
            reply = client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi."}]
            )
            return reply.choices[0].message.content or ""

    result = run_agent_campaign(chat, 6, faults=(), regressions=None)
    assert result.discovery.tools == ()
    assert result.failure is None
    # without tools or faults there are three scripts (the final texts): each ran once, and
    # Hypothesis stopped there, short of the six sessions asked for
    assert (result.stats.runs, sum(result.stats.calls.values())) == (3, 0)


def test_the_campaign_api_returns_the_shrunk_failure() -> None:
    target = AgentTarget.load("openai_loop:fixed_results", pythonpath=[str(AGENTS)])
    result = run_agent_campaign(target, 30, seed=2, regressions=None)
    assert result.failure is not None and result.failure.path is None
    assert result.failure.turns == [RATE_LIMIT, DONE]
    assert result.discovery.api == "openai-chat" and result.discovery.stream
    assert [t.name for t in result.discovery.tools] == ["search", "add"]


# --------------------------------------------------------------------------- real processes


def _serve(path: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "openprogram_sim.cli", "serve", str(path), "--port", "0", "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert process.stdout is not None
    for _ in range(3):
        match = re.search(r"listening on (http://\S+)", process.stdout.readline())
        if match:
            return process, match.group(1)
    process.kill()
    raise AssertionError(process.communicate())


def _replay_with_serve(path: Path, *fix: str) -> tuple[int, str]:
    """The file's header, done by hand: ``serve`` as a real process, the agent as a real
    process on its replay session, then Ctrl-C and serve's report."""
    process, url = _serve(path)
    try:
        root = f"{url}/s/replay"
        env = {**os.environ, "OPENAI_BASE_URL": f"{root}/v1", "OPENAI_API_KEY": PLACEHOLDER_KEY}
        flags = [f"--fix={f}" for f in fix]
        agent = subprocess.run([sys.executable, str(AGENT_SCRIPT), *flags], env=env,
                               capture_output=True, text=True, timeout=60)  # fmt: skip
        assert agent.returncode == 0, agent.stderr
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=30)
        return process.returncode, out
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("left_fixed", "check", "first_turn", "seed"),
    [("retry_after", "answered_once", TWO_CALLS, "9"), ("results", "retry_after", RATE_LIMIT, "0")],
    ids=["dropped-result", "retry-after-ignored"],
)  # (seeds that find the bug by the third session: a process per session is slow)
def test_the_command_form_finds_each_bug_and_serve_replays_it_against_the_real_agent(
    tmp_path: Path, left_fixed: str, check: str, first_turn: dict[str, Any], seed: str
) -> None:
    agent = f"{sys.executable} {AGENT_SCRIPT} --fix {left_fixed}"
    done = subprocess.run(
        [sys.executable, "-m", "openprogram_sim.cli", "fuzz", "--agent", agent, "--examples",
         "12", "--seed", seed, "--shrink-time", "90", "--regressions", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"fuzz: 12 sessions of command {agent!r}" in done.stdout
    assert f"client check {check} broken" in done.stdout
    path = _written(done.stdout)
    assert _model(path) == [first_turn, DONE]
    text = path.read_text()
    assert f"#     {agent}\n" in text and "openprogram-sim serve" in text
    status, report = _replay_with_serve(path, left_fixed)
    assert status == 1, report
    assert f"client check {check} broken by request #2" in report
    status, report = _replay_with_serve(path, "results", "retry_after")
    assert status == 0, report
    assert "PASS every scripted turn was served" in report
