"""openprogram's own adapters over real HTTP against the wire server (issue item 5): a
scenario's run through each adapter gives the same trace as the same scenario on the
scripted model, and what the adapter sent reads back (``read_request``) as the requests
the scripted model was handed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openprogram.providers import get_provider
from openprogram_sim.cli import main
from openprogram_sim.errors import WireEncodeError
from openprogram_sim.play import build_model, run_scenario, scenario_server
from openprogram_sim.scenario import Scenario, load_scenario
from openprogram_sim.wire import APIS, WireServer, encode

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"
NAMES = [
    "basics/pick_again_on_results.yaml",
    "basics/several_picks_in_order.yaml",
    "tools_errors/unknown_tool.yaml",
    "tools_errors/tool_raises.yaml",
    "nested/nested_inherits_tools.yaml",
    "steering/after_tool_skips_remaining.yaml",
    "tool_choice/forced_function.yaml",
    "tool_choice/parallel_tool_calls_false.yaml",
    "follow_ups/follow_up_starts_another_pass.yaml",
]
SCENARIOS = {name: load_scenario(LIBRARY / name) for name in NAMES}


def _encodable(scenario: Scenario, api: str, stream: bool) -> bool:
    try:
        for turn in build_model(scenario).turns:
            encode(api, turn, stream=stream)
    except WireEncodeError:
        return False
    return True


CASES = [
    pytest.param(name, api, stream, id=f"{name}-{api}-{'stream' if stream else 'json'}")
    for name in NAMES
    for api in APIS
    for stream in (True, False)
    if _encodable(SCENARIOS[name], api, stream)
]


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, WireServer]]:
    """One server per scenario for the whole module; each case is a session of its own."""
    running: dict[str, WireServer] = {}
    try:
        for name, scenario in SCENARIOS.items():
            running[name] = scenario_server(scenario).start()
        yield running
    finally:
        for server in running.values():
            server.stop()


def renamed_ids(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool-call ids by order of appearance: the scripted model numbers calls ``call_1``...,
    each API names them its own way (and Gemini's adapter makes one up). Identity is kept:
    the same call keeps the same name everywhere."""
    ids: dict[str, str] = {}
    out = []
    for entry in trace:
        entry = dict(entry)
        if "tool_call_id" in entry:
            entry["tool_call_id"] = ids.setdefault(entry["tool_call_id"], f"id{len(ids) + 1}")
        out.append(entry)
    return out


@pytest.mark.parametrize(("name", "api", "stream"), CASES)
def test_the_adapter_over_http_gives_the_scripted_trace(
    servers: dict[str, WireServer], name: str, api: str, stream: bool
) -> None:
    scenario, server = SCENARIOS[name], servers[name]
    session = f"{api}-{stream}"
    scripted = run_scenario(scenario)
    over_http = run_scenario(scenario, server.provider(api, stream=stream, session=session))
    assert renamed_ids(over_http.trace) == renamed_ids(scripted.trace)
    assert (over_http.result, over_http.error) == (scripted.result, scripted.error)
    server.assert_consumed(session)

    sent = server.session(session).request_fields()
    assert len(sent) == len(scripted.requests)
    for k, (got, want) in enumerate(zip(sent, scripted.requests, strict=True), start=1):
        assert got == carried(api, want, got), f"request {k}"


def carried(api: str, want: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    """``want`` (what the loop handed the scripted model) as HTTP carries it, by the
    rules in ``read_request``'s documentation."""
    out = {**want, "call": got["call"], "depth": 0, "round": got["call"]}
    if not want["tools"]:
        out["tool_choice"] = "auto"  # no tools: no tool-choice field is sent
    if api in ("gemini", "bedrock") or (api == "anthropic" and want["parallel_tool_calls"]):
        out["parallel_tool_calls"] = None  # no such field (Anthropic sends only False)
    if api == "bedrock" and want["tool_choice"] == "none":
        out["tools"], out["tool_choice"] = [], "auto"
    messages = [dict(m) for m in want["messages"]]
    for m in messages:
        if api.startswith("openai") and m["role"] == "toolResult":
            m.pop("is_error")  # OpenAI's tool messages carry no error flag
    out["messages"] = messages
    out["last_message"] = messages[-1] if messages else None
    return out


def test_openprogram_sim_run_points_an_adapter_at_the_server(
    servers: dict[str, WireServer], capsys: pytest.CaptureFixture[str]
) -> None:
    name = "basics/pick_again_on_results.yaml"
    server = servers[name]
    url = server.adapter_url("anthropic", session="cli")
    code = main(["run", str(LIBRARY / name), "--model", "anthropic:claude-x", "--base-url", url])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "PASS" in out
    server.assert_consumed("cli")
    assert server.check("cli").passed  # its expect.requests hold for what the adapter sent


def test_run_refuses_a_base_url_without_a_model(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", str(LIBRARY / NAMES[0]), "--base-url", "http://127.0.0.1:9"])
    assert code == 2
    assert "--base-url needs --model" in capsys.readouterr().err


@pytest.mark.parametrize("api", ["anthropic", "gemini"])
@pytest.mark.parametrize("form", ["sdk", "versioned", "env"])
def test_the_sdks_base_url_reaches_the_server_as_the_versioned_one_does(
    servers: dict[str, WireServer], api: str, form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "basics/pick_again_on_results.yaml"
    scenario, server = SCENARIOS[name], servers[name]
    session = f"base-url-{api}-{form}"
    sdk_url = server.base_url(api, session)  # the root: what the official SDK takes
    options: dict[str, Any] = {"api_key": "k"}
    variable, model = {
        "anthropic": ("ANTHROPIC_BASE_URL", "anthropic:claude-x"),
        "gemini": ("GOOGLE_GEMINI_BASE_URL", "gemini:gemini-x"),
    }[api]
    if form == "env":  # as the SDK reads it, when no base_url= is given
        monkeypatch.setenv(variable, sdk_url)
    else:
        options["base_url"] = sdk_url if form == "sdk" else server.adapter_url(api, session)
    over_http = run_scenario(scenario, get_provider(model, **options))
    assert over_http.error is None, over_http.error
    assert renamed_ids(over_http.trace) == renamed_ids(run_scenario(scenario).trace)
    server.assert_consumed(session)
