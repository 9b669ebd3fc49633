"""OpenTelemetry GenAI spans: ``run --trace-out DIR --otel`` writes a run as OTLP JSON
through the OpenTelemetry SDK, and ``check`` reads OTLP JSON back (ours, or another
framework's instrumentation) with the standard library, with the scenario's verdict."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support import run_cli

HAVE_SDK = all(
    importlib.util.find_spec(name) is not None
    for name in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.common")
)
needs_sdk = pytest.mark.skipif(
    not HAVE_SDK, reason="needs the otel extra (opentelemetry-sdk, -exporter-otlp-proto-common)"
)

SCENARIO = """\
scenario: a research run
tools:
  search: {returns: "hit"}
  fetch: {returns: "page"}
  research:
    exec: {content: "look into {topic}", tools: [search]}
exec: {content: "Find it.", tools: [search, fetch, research]}
model:
  - tool_calls: [{search: {q: weather in Paris}}, {fetch: {url: "http://a"}}]
  - tool_calls: [{research: {topic: tides}}]
  - tool_calls: [{search: {q: tides}}]
  - text: "Tides found."
  - tool_calls: [{search: {q: weather in Lyon}}]
  - text: "Found."
expect:
  properties:
    - ends_with: {reason: stop}
    - at_most: {tool: search, times: 2}
"""
"""Round 2's research tool runs a nested exec (depth 1) that searches once."""

RULES = """\
properties:
  - ends_with: {reason: stop}
  - at_most: {tool: search, times: 2}
"""

HOLDING = """\
properties:
  - before: {first: fetch, then: research}
  - same_round: [search, fetch]
  - at_least: {tool: search, times: 3}
"""

TRAJECTORY = """\
mode: in_order
depth: all
calls:
  - [fetch, search]
  - research
  - search: {q: tides}
"""


def _spans_file(folder: Path) -> Path:
    (found,) = folder.glob("*.otlp.json")
    return found


# -- the round trip ------------------------------------------------------------------------


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    (tmp_path / "research.yaml").write_text(SCENARIO)
    (tmp_path / "rules.yaml").write_text(RULES)
    (tmp_path / "holding.yaml").write_text(HOLDING)
    (tmp_path / "trajectory.yaml").write_text(TRAJECTORY)
    return tmp_path


@needs_sdk
def test_a_run_exported_as_spans_is_checked_with_the_scenarios_verdict(exported: Path) -> None:
    ran = run_cli("run", "research.yaml", "--trace-out", "out", "--otel", cwd=exported)
    assert ran.returncode == 1
    assert "property 2 (at_most) does not hold" in ran.stdout
    assert "search was called 3 times, at most 2 allowed" in ran.stdout
    assert "openprogram-sim: 2 trace file(s) written to out\n" in ran.stderr
    spans = _spans_file(exported / "out").relative_to(exported)
    assert spans.name == "research--a-research-run.otlp.json"
    checked = run_cli(
        "check", str(spans), "--properties", "rules.yaml", "--trajectory", "trajectory.yaml",
        cwd=exported,
    )  # fmt: skip
    (scope,) = json.loads((exported / spans).read_text())["resourceSpans"][0]["scopeSpans"]
    searches = [s for s in scope["spans"] if s["name"] == "execute_tool search"]
    ids = [s["spanId"] for s in sorted(searches, key=lambda s: int(s["startTimeUnixNano"]))]
    assert (checked.returncode, checked.stderr) == (1, "")
    assert checked.stdout == (
        f"FAIL  {spans}  (trajectory score 1.00)\n"
        '  - property 2 (at_most) does not hold: at_most: {"tool": "search", "times": 2}\n'
        "    at rules.yaml:3\n"
        "    search was called 3 times, at most 2 allowed: #3, #14, #25 (beyond the limit: "
        "#25)\n"
        '      #25  tool_execution_start   d0 r3 search({"q": "weather in Lyon"})\n'
        f"  in the spans: #3 is span {ids[0]}, #14 is span {ids[1]}, #25 is span {ids[2]}\n"
        "\n1 trace(s) checked against a trajectory and 2 properties: 0 held, 1 failed\n"
    )
    held = run_cli("check", str(spans), "--properties", "holding.yaml", cwd=exported)
    assert (held.returncode, held.stdout) == (
        0,
        f"PASS  {spans}\n\n1 trace(s) checked against 3 properties: 1 held, 0 failed\n",
    )
    # the JSON trace beside it gives the same verdicts
    trace = spans.with_name(spans.name.replace(".otlp.", ".trace."))
    for rules, code in (("rules.yaml", 1), ("holding.yaml", 0)):
        assert run_cli("check", str(trace), "--properties", rules, cwd=exported).returncode == code


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for item in span["attributes"]:
        ((_, value),) = item["value"].items()
        out[item["key"]] = value["values"] if isinstance(value, dict) else value
    return out


@needs_sdk
def test_the_spans_follow_the_genai_conventions_and_nest_as_the_run(exported: Path) -> None:
    run_cli("run", "research.yaml", "--trace-out", "out", "--otel", cwd=exported)
    data = json.loads(_spans_file(exported / "out").read_text())
    (resource,) = data["resourceSpans"]
    assert resource["resource"]["attributes"] == [
        {"key": "service.name", "value": {"stringValue": "openprogram-sim"}}
    ]
    (scope,) = resource["scopeSpans"]
    spans = sorted(scope["spans"], key=lambda s: int(s["startTimeUnixNano"]))
    by_id = {s["spanId"]: s for s in spans}

    def line(span: dict[str, Any]) -> str:
        depth, parent = 0, span.get("parentSpanId")
        while parent:
            depth, parent = depth + 1, by_id[parent].get("parentSpanId")
        return f"{'  ' * depth}{span['name']} kind={span['kind']}"

    assert [line(s) for s in spans] == [
        "invoke_agent a research run kind=1",
        "  chat scripted kind=3",
        "    execute_tool search kind=1",
        "    execute_tool fetch kind=1",
        "  chat scripted kind=3",
        "    execute_tool research kind=1",
        "      invoke_agent research kind=1",
        "        chat scripted kind=3",
        "          execute_tool search kind=1",
        "        chat scripted kind=3",
        "  chat scripted kind=3",
        "    execute_tool search kind=1",
        "  chat scripted kind=3",
    ]
    assert {len(s["traceId"]) for s in spans} == {32} and {len(s["spanId"]) for s in spans} == {16}
    assert len({s["traceId"] for s in spans}) == 1
    agent, chat, search = spans[0], spans[1], spans[2]
    assert _attrs(agent) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "a research run",
        "gen_ai.provider.name": "openprogram_sim.scripted",
        "gen_ai.request.model": "scripted",
        "openprogram.end_reason": "stop",
    }
    assert _attrs(chat) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openprogram_sim.scripted",
        "gen_ai.request.model": "scripted",
        "gen_ai.response.finish_reasons": [{"stringValue": "tool_call"}],
        "gen_ai.output.messages": json.dumps([{
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "call_1", "name": "search",
                 "arguments": {"q": "weather in Paris"}},
                {"type": "tool_call", "id": "call_2", "name": "fetch",
                 "arguments": {"url": "http://a"}},
            ],
            "finish_reason": "tool_call",
        }]),
    }  # fmt: skip
    assert _attrs(search) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": '{"q": "weather in Paris"}',
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.result": "hit",
    }
    assert search["status"] == {}


@needs_sdk
def test_errors_carry_an_error_status_and_type(tmp_path: Path) -> None:
    (tmp_path / "flaky.yaml").write_text(
        "scenario: a tool that raises, then an error stop\n"
        'tools:\n  flaky: {raises: "disk full"}\n'
        "exec: {content: go, tools: [flaky]}\n"
        "model:\n  - tool_calls: [{flaky: {}}]\n"
        '  - {stop_reason: error, error: "upstream 500"}\n'
        "expect: {raises: true}\n"
    )
    assert run_cli("run", "flaky.yaml", "--trace-out", ".", "--otel", cwd=tmp_path).returncode == 0
    (scope,) = json.loads(_spans_file(tmp_path).read_text())["resourceSpans"][0]["scopeSpans"]
    by_name = {s["name"]: s for s in scope["spans"]}
    tool = by_name["execute_tool flaky"]
    assert tool["status"] == {"code": 2, "message": "disk full"}
    assert _attrs(tool)["error.type"] == "raised"
    agent = by_name["invoke_agent a tool that raises, then an error stop"]
    assert agent["status"] == {"code": 2}
    assert (_attrs(agent)["error.type"], _attrs(agent)["openprogram.end_reason"]) == (
        "_OTHER",
        "error",
    )
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "- ends_with: {reason: error}\n- at_least: {tool: flaky, is_error: true, times: 1}\n"
    )
    name = _spans_file(tmp_path).name
    checked = run_cli("check", name, "--properties", "rules.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout


DATA = Path(__file__).parent / "data"


@needs_sdk
def test_a_cassette_replay_names_the_adapters_provider_and_model(tmp_path: Path) -> None:
    (tmp_path / "cassettes").mkdir()
    (tmp_path / "weather.yaml").write_text((DATA / "weather_replay.yaml").read_text("utf-8"))
    (tmp_path / "cassettes" / "weather.yaml").write_text(
        (DATA / "weather_cassette.yaml").read_text("utf-8")
    )
    ran = run_cli("run", "weather.yaml", "--trace-out", "out", "--otel", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (scope,) = json.loads(_spans_file(tmp_path / "out").read_text())["resourceSpans"][0][
        "scopeSpans"
    ]
    chats = [s for s in scope["spans"] if _attrs(s)["gen_ai.operation.name"] == "chat"]
    assert [s["name"] for s in chats] == ["chat gpt-4o-mini", "chat gpt-4o-mini"]
    assert {
        (_attrs(s)["gen_ai.provider.name"], _attrs(s)["gen_ai.request.model"]) for s in chats
    } == {("openai", "gpt-4o-mini")}


@pytest.mark.slow
def test_without_the_extra_otel_says_which_to_install_and_check_still_reads_spans(
    tmp_path: Path,
) -> None:
    (tmp_path / "one.yaml").write_text(
        "scenario: one\nexec: {content: hi}\nmodel:\n  - text: hello\n"
    )
    (tmp_path / "rules.yaml").write_text("- ends_with: {reason: stop}\n")
    (tmp_path / "spans.json").write_text(json.dumps(_foreign()))
    blocked = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from openprogram_sim.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", blocked, *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    refused = cli("run", "one.yaml", "--trace-out", "out", "--otel")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        "openprogram-sim: --otel writes spans through the OpenTelemetry SDK, which is not "
        "installed (no module 'opentelemetry.exporter'); install the otel extra: pip install "
        "'openprogram-sim[otel]'\n"
    )
    assert not (tmp_path / "out").exists()  # refused before any run
    assert cli("run", "one.yaml", "--trace-out", "out").returncode == 0  # JSON needs no extra
    checked = cli("check", "spans.json", "--properties", "rules.yaml")
    assert (checked.returncode, checked.stderr) == (0, "")
    assert checked.stdout.startswith("PASS  spans.json\n")


# -- spans another framework wrote ---------------------------------------------------------


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": value}


def _span(
    span_id: str, parent: str, name: str, start: int, attrs: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    return {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 3 if name.startswith("chat") else 1,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + start * 1_000_000),
        "endTimeUnixNano": str(1_700_000_000_000_000_000 + start * 1_000_000 + 500_000),
        "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items()],
        **extra,
    }


def _chat(span_id: str, start: int, finish: str, calls: list[str]) -> dict[str, Any]:
    parts = [{"type": "tool_call", "id": c, "name": "?", "arguments": {}} for c in calls]
    return _span(span_id, "a1", "chat gpt-4.1", start, {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4.1",
        "gen_ai.response.finish_reasons": [finish],
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
    })  # fmt: skip


def _tool(span_id: str, start: int, name: str, call: str, args: str, result: str) -> dict[str, Any]:
    return _span(span_id, "a1", f"execute_tool {name}", start, {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": args,
        "gen_ai.tool.call.result": result,
    })  # fmt: skip


def _foreign() -> dict[str, Any]:
    """A support agent's run as openai-agents' OpenTelemetry instrumentation exports it: a
    workflow span of its own, the agent span, then chat and execute_tool spans side by side
    under the agent (tools are not children of the chat that asked for them), an HTTP
    span under each chat, attributes we do not read, and an error on the refund."""
    http = {"http.request.method": "POST", "server.address": "api.openai.com"}
    refund = _tool("t3", 31, "refund", "call_c", '{"order": 7}', "refund service down")
    refund["status"] = {"code": 2, "message": "refund service down"}
    spans = [
        _span("w0", "", "Agent workflow", 0, {"openai_agents.workflow": "support"}),
        _span(
            "a1",
            "w0",
            "invoke_agent Support",
            1,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "Support",
                "gen_ai.provider.name": "openai",
            },
        ),
        _chat("c1", 10, "tool_calls", ["call_a", "call_b"]),
        _span("h1", "c1", "POST", 11, http),
        # the second call of round 1 starts first: its round comes from the chat's call ids
        _tool("t2", 20, "ask_user", "call_b", '{"q": "Refund 30 EUR?"}', "no, keep it"),
        _tool("t1", 21, "lookup_order", "call_a", '{"order": 7}', "order 7: paid"),
        _chat("c2", 30, "tool_calls", ["call_c"]),
        _span("h2", "c2", "POST", 30, http),
        refund,
        _chat("c3", 40, "stop", []),
        _span("x1", "a1", "guardrail", 41, {"custom": True}),
    ]
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": _value("shop")}]},
                "scopeSpans": [
                    {"scope": {"name": "openinference.instrumentation"}, "spans": spans[:4]},
                    {"scope": {"name": "opentelemetry.instrumentation.openai_agents"},
                     "spans": spans[4:]},
                ],
            }
        ]
    }  # fmt: skip


FOREIGN_RULES = """\
- before: {first: lookup_order, then: refund}
- same_round: [lookup_order, ask_user]
- never: {tool: refund, after: {tool: ask_user, result: {$contains: "no"}}}
- at_least: {tool: refund, is_error: true, times: 1}
- ends_with: {reason: stop}
"""


def test_spans_from_another_frameworks_instrumentation_are_checked(tmp_path: Path) -> None:
    (tmp_path / "prod.json").write_text(json.dumps(_foreign(), indent=1))
    (tmp_path / "rules.yaml").write_text(FOREIGN_RULES)
    (tmp_path / "trajectory.yaml").write_text(
        "mode: exact\ncalls:\n  - [lookup_order, ask_user]\n  - refund: {order: 7}\n"
    )
    checked = run_cli(
        "check", "prod.json", "--properties", "rules.yaml", "--trajectory", "trajectory.yaml",
        cwd=tmp_path,
    )  # fmt: skip
    assert (checked.returncode, checked.stderr) == (1, "")
    assert checked.stdout == (
        "FAIL  prod.json  (trajectory score 1.00)\n"
        '  - property 3 (never) does not hold: never: {"tool": "refund", "after": '
        '{"tool": "ask_user", "result": {"$contains": "no"}}}\n'
        "    at rules.yaml:3\n"
        '    refund was called at #10 after ask_user returned "no, keep it" at #4\n'
        '      #4   tool_execution_end     d0 r1 ask_user({"q": "Refund 30 EUR?"}) -> ok: '
        '"no, keep it"\n'
        '      #10  tool_execution_start   d0 r2 refund({"order": 7})\n'
        "  in the spans: #4 is span t2, #10 is span t3\n"
        "\n1 trace(s) checked against a trajectory and 5 properties: 0 held, 1 failed\n"
    )


def test_spans_without_an_agent_span_one_trace_a_line(tmp_path: Path) -> None:
    """OTLP JSON Lines (the collector's file exporter), two traces, model and tool spans with
    no agent above them and no call ids: each trace is an exec, a tool's round the last chat
    that started before it."""

    def trace(trace_id: str, tools: list[str]) -> dict[str, Any]:
        spans = [_chat("c1", 1, "tool_calls", []), _chat("c2", 9, "stop", [])]
        spans += [_tool(f"t{i}", 2 + i, t, "", "{}", "ok") for i, t in enumerate(tools)]
        for span in spans:
            span.update(traceId=trace_id, parentSpanId="")
            kept = [a for a in span["attributes"] if a["key"] != "gen_ai.tool.call.id"]
            span["attributes"] = kept
        return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}

    lines = [trace("aa" * 16, ["search", "fetch"]), trace("bb" * 16, ["search", "search"])]
    (tmp_path / "spans.jsonl").write_text("".join(json.dumps(t) + "\n" for t in lines))
    (tmp_path / "rules.yaml").write_text(
        "- same_round: [search, fetch]\n- no_repeat: {tool: search, args: any}\n"
    )
    checked = run_cli("check", "spans.jsonl", "--properties", "rules.yaml", cwd=tmp_path)
    assert checked.returncode == 1
    assert checked.stdout.splitlines()[0] == f"PASS  spans.jsonl: trace {'aa' * 16} (spans)"
    assert checked.stdout.splitlines()[1] == f"FAIL  spans.jsonl: trace {'bb' * 16} (spans)"
    assert "same_round" in checked.stdout and "no_repeat" in checked.stdout
    assert checked.stdout.endswith("2 trace(s) checked against 2 properties: 1 held, 1 failed\n")


def _broken(change: str) -> dict[str, Any]:
    data = _foreign()
    spans = data["resourceSpans"][0]["scopeSpans"][1]["spans"]
    if change == "spans":
        data["resourceSpans"][0]["scopeSpans"][1]["spans"] = {"t2": spans[0]}
    elif change == "id":
        del spans[0]["spanId"]
    elif change == "attribute":
        spans[0]["attributes"][1] = {"value": {"stringValue": "ask_user"}}
    elif change == "time":
        spans[0]["startTimeUnixNano"] = "yesterday"
    elif change == "tool":
        spans[0]["name"] = "tool"
        spans[0]["attributes"] = spans[0]["attributes"][:1]
    elif change == "loop":
        spans[1]["parentSpanId"], spans[0]["parentSpanId"] = "t2", "t1"
    return data


WHERE = "prod.json: resourceSpans[0].scopeSpans[1].spans[0] (span t2 'execute_tool ask_user')"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("spans", "prod.json: resourceSpans[0].scopeSpans[1].spans is a list (got dict)"),
        ("id", "prod.json: resourceSpans[0].scopeSpans[1].spans[0] (span ? 'execute_tool "
               "ask_user'): a span has a spanId and a traceId (strings)"),
        ("attribute", f"{WHERE}.attributes[1] is a mapping with key and value"),
        ("time", f"{WHERE}: startTimeUnixNano is nanoseconds since the epoch (got 'yesterday')"),
        ("tool", "prod.json: resourceSpans[0].scopeSpans[1].spans[0] (span t2 'tool'): an "
                 "execute_tool span names its tool (gen_ai.tool.name, or a span name "
                 "'execute_tool NAME')"),
        ("loop", "prod.json: resourceSpans[0].scopeSpans[1].spans[1] (span t1 'execute_tool "
                 "lookup_order'): its parents form a loop"),
    ],
)  # fmt: skip
def test_a_span_of_the_wrong_shape_is_named(tmp_path: Path, change: str, message: str) -> None:
    (tmp_path / "prod.json").write_text(json.dumps(_broken(change)))
    (tmp_path / "rules.yaml").write_text("- ends_with: {reason: stop}\n")
    checked = run_cli("check", "prod.json", "--properties", "rules.yaml", cwd=tmp_path)
    assert (checked.returncode, checked.stdout) == (2, "")
    assert checked.stderr == f"openprogram-sim check: {message}\n"


def test_spans_without_a_genai_span_are_refused(tmp_path: Path) -> None:
    data = {"resourceSpans": [{"scopeSpans": [{"spans": [_span("h1", "", "GET /", 0, {})]}]}]}
    (tmp_path / "web.json").write_text(json.dumps(data))
    (tmp_path / "rules.yaml").write_text("- ends_with: {reason: stop}\n")
    checked = run_cli("check", "web.json", "--properties", "rules.yaml", cwd=tmp_path)
    assert (checked.returncode, checked.stdout) == (2, "")
    assert checked.stderr == (
        "openprogram-sim check: web.json: no GenAI span among its 1 span(s) "
        "(gen_ai.operation.name invoke_agent, chat or execute_tool); nothing to check\n"
    )


# -- every scenario of the library ---------------------------------------------------------

LIBRARY = sorted((Path(__file__).resolve().parents[2] / "scenarios").rglob("*.yaml"))


@needs_sdk
@pytest.mark.slow
def test_every_library_scenarios_spans_rebuild_its_calls_and_verdict() -> None:
    """Each scenario's run, written as spans and read back: the same tool calls (name,
    arguments, result, error, depth, round, exec), the same end reasons, and the same rules
    broken as on the run's own trace."""
    from openprogram_sim.play import run_scenario
    from openprogram_sim.report._otel_export import otlp_json
    from openprogram_sim.scenario import load_scenario
    from openprogram_sim.trace import check_properties, trace_calls
    from openprogram_sim.trace._otel import otlp_traces

    def calls(trace: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [
            (c.name, c.args, c.result, c.is_error, c.depth, c.round, c.exec)
            for c in trace_calls(trace)
        ]

    def ends(trace: list[dict[str, Any]]) -> list[tuple[int, str]]:
        return [(e["depth"], e["reason"]) for e in trace if e["type"] == "agent_end"]

    rules = [
        {"at_most": {"tool": {"$regex": "."}, "times": 1}},
        {"ends_with": {"reason": "stop"}},
        {"no_repeat": {"tool": {"$regex": "."}, "args": "same"}},
    ]
    assert len(LIBRARY) > 50
    for path in LIBRARY:
        outcome = run_scenario(load_scenario(path))
        spans = otlp_json(outcome.trace, title=outcome.scenario.scenario, model="scripted")
        ((_, back),) = otlp_traces(spans, str(path))
        assert calls(back) == calls(outcome.trace), path
        assert ends(back) == ends(outcome.trace), path
        broken = [{v.rule for v in check_properties(t, rules)} for t in (outcome.trace, back)]
        assert broken[0] == broken[1], path


def test_a_span_exported_twice_is_read_once(tmp_path: Path) -> None:
    """An exporter that retried a batch writes its spans again: the calls are not doubled."""
    line = json.dumps(_foreign())
    (tmp_path / "twice.jsonl").write_text(f"{line}\n{line}\n")
    (tmp_path / "rules.yaml").write_text("- at_most: {tool: refund, times: 1}\n")
    checked = run_cli("check", "twice.jsonl", "--properties", "rules.yaml", cwd=tmp_path)
    assert (checked.returncode, checked.stdout.splitlines()[0]) == (0, "PASS  twice.jsonl")
