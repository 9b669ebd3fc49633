"""A served session's trace: built from what real clients sent (the official ``openai``,
``anthropic`` and ``google-genai`` SDKs, pydantic-ai) and what the server served, in our
own loop's event shapes, and checked with the scenario's ``expect.trajectory`` and
``expect.properties`` at the session's end (``DELETE /s/NAME``), passing and failing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx2
import pytest

from openprogram_sim.play import serve_scenario
from openprogram_sim.wire import WireServer

SEARCH_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
CHAT_TOOLS = [{"type": "function", "function": {"name": "search", "parameters": SEARCH_SCHEMA}}]
RESPONSES_TOOLS = [{"type": "function", "name": "search", "parameters": SEARCH_SCHEMA}]

TWO_SEARCHES = """\
scenario: two searches in one round, then the answer
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
    returns: "3 results"
exec: {content: "Find a and b."}
model:
  - tool_calls: [{search: {q: a}}, {search: {q: b}}]
  - text: "Found both."
expect:
"""

PASSING = (
    TWO_SEARCHES
    + """\
  trajectory:
    mode: exact
    calls: [[{search: {q: a}}, {search: {q: b}}]]
  properties:
    - at_most: {tool: search, times: 2}
    - ends_with: {reason: stop}
"""
)

FAILING = (
    TWO_SEARCHES
    + """\
  trajectory:
    mode: exact
    calls: [search]
  properties:
    - at_most: {tool: search, times: 1}
"""
)


def scenario(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "served.yaml"
    path.write_text(text)
    return path


def end(server: WireServer, session: str) -> dict[str, Any]:
    """``DELETE /s/NAME``: the session's report."""
    response = httpx2.delete(f"{server.url}/s/{session}")
    assert response.status_code == 200
    return dict(response.json())


def openai_chat_loop(openai: ModuleType, url: str, *, drop_second: bool = False) -> str:
    """A small agent on the plain ``openai`` SDK: it runs every call, returns its result,
    and asks again until the model answers with text (``drop_second``: a planted bug,
    the second result of a round is never sent)."""
    client = openai.OpenAI(base_url=url, api_key="sk-test-0123456789", max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find a and b."}]
    with client:
        while True:
            reply = (
                client.chat.completions.create(
                    model="gpt-4o-mini", messages=messages, tools=CHAT_TOOLS
                )
                .choices[0]
                .message
            )
            messages.append(reply.model_dump(exclude_none=True))
            if not reply.tool_calls:
                return str(reply.content)
            calls = reply.tool_calls[:1] if drop_second else reply.tool_calls
            for call in calls:
                q = json.loads(call.function.arguments)["q"]
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": f"results for {q}"}
                )


def shape(trace: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each event as (type, round, the fields that say what happened)."""
    keys = ("role", "text", "tool_calls", "stop_reason", "tool_call_id", "tool_name",
            "args", "result", "is_error", "reason", "tool_results")  # fmt: skip
    return [(e["type"], e["round"], *(e[k] for k in keys if k in e)) for e in trace]


def test_an_openai_chat_sessions_trace_is_the_loops_trace_shape(
    openai: ModuleType, tmp_path: Path
) -> None:
    with serve_scenario(scenario(tmp_path, PASSING)) as server:
        assert openai_chat_loop(openai, server.base_url("openai", "chat")) == "Found both."
        trace = server.session("chat").trace().trace
        report = end(server, "chat")

    assert shape(trace) == [
        ("agent_start", 0),
        ("turn_start", 1),
        ("message_start", 1, "user", "Find a and b."),
        ("message_end", 1, "user", "Find a and b."),
        ("message_start", 1, "assistant", "", [], "stop"),
        ("message_end", 1, "assistant", "", ["search", "search"], "toolUse"),
        ("tool_execution_start", 1, "call_wire1_0", "search", {"q": "a"}),
        ("tool_execution_end", 1, "call_wire1_0", "search", {"q": "a"}, "results for a", None),
        ("message_start", 1, "toolResult", "results for a", "call_wire1_0", "search", None),
        ("message_end", 1, "toolResult", "results for a", "call_wire1_0", "search", None),
        ("tool_execution_start", 1, "call_wire1_1", "search", {"q": "b"}),
        ("tool_execution_end", 1, "call_wire1_1", "search", {"q": "b"}, "results for b", None),
        ("message_start", 1, "toolResult", "results for b", "call_wire1_1", "search", None),
        ("message_end", 1, "toolResult", "results for b", "call_wire1_1", "search", None),
        ("turn_end", 1, ["search", "search"], "toolUse", 2),
        ("turn_start", 2),
        ("message_start", 2, "assistant", "Found both.", [], "stop"),
        ("message_end", 2, "assistant", "Found both.", [], "stop"),
        ("turn_end", 2, [], "stop", 0),
        ("agent_end", 2, "stop"),
    ]
    assert (report["passed"], report["failures"], report["report"]) == (True, [], "")


def test_a_trajectory_and_a_property_that_do_not_hold_fail_the_session(
    openai: ModuleType, tmp_path: Path
) -> None:
    path = scenario(tmp_path, FAILING)
    with serve_scenario(path) as server:
        openai_chat_loop(openai, server.base_url("openai", "chat"))
        report = end(server, "chat")
        final = server.check()

    assert report["passed"] is False
    assert report["report"] == (
        "- trajectory (exact) did not match: score 0.67, min_score 1.0\n"
        f"  at {path}:11\n"
        "  score 0.67 (F1); precision 1/2 = 0.50, recall 1/1 = 1.00, F1 0.67\n"
        '  unexpected call: #10 search({"q": "b"}) d0 r1\n'
        "  calls made at depth 0, by round:\n"
        '    #6 search({"q": "a"}) d0 r1  <- expected call 1\n'
        '    #10 search({"q": "b"}) d0 r1\n'
        '- property 1 (at_most) does not hold: at_most: {"tool": "search", "times": 1}\n'
        f"  at {path}:15\n"
        "  search was called 2 times, at most 1 allowed: #6, #10 (beyond the limit: #10)\n"
        '    #10  tool_execution_start   d0 r1 search({"q": "b"})'
    )
    # the report at stop lists the same failures, the session named first
    assert [f.title for f in final.failures] == [
        "session 'chat': trajectory (exact) did not match: score 0.67, min_score 1.0",
        "session 'chat': property 1 (at_most) does not hold: at_most: "
        '{"tool": "search", "times": 1}',
    ]


def test_an_openai_responses_sessions_results_are_matched_by_call_id(
    openai: ModuleType, tmp_path: Path
) -> None:
    with serve_scenario(scenario(tmp_path, PASSING)) as server:
        client = openai.OpenAI(
            base_url=server.base_url("openai", "resp"), api_key="sk-test", max_retries=0
        )
        items: list[Any] = [{"role": "user", "content": "Find a and b."}]
        with client:
            first = client.responses.create(model="gpt-4o", input=items, tools=RESPONSES_TOOLS)
            calls = [o for o in first.output if o.type == "function_call"]
            items += [c.model_dump(exclude_none=True) for c in calls]
            items += [
                {"type": "function_call_output", "call_id": c.call_id, "output": f"r {c.arguments}"}
                for c in reversed(calls)  # results in another order than the calls
            ]
            second = client.responses.create(model="gpt-4o", input=items, tools=RESPONSES_TOOLS)
        assert second.output_text == "Found both."
        trace = server.session("resp").trace().trace
        report = end(server, "resp")

    ends = [(e["tool_call_id"], e["result"]) for e in trace if e["type"] == "tool_execution_end"]
    assert ends == [("call_wire1_0", 'r {"q": "a"}'), ("call_wire1_1", 'r {"q": "b"}')]
    assert report["passed"], report["report"]


ANTHROPIC = """\
scenario: a tool error passed back
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
    raises: "index offline"
exec: {content: "Find a."}
model:
  - tool_calls: [{search: {q: a}}]
  - text: "The index is offline."
expect:
  properties:
    - never: {tool: search, is_error: true}
"""


def test_an_anthropic_tool_error_is_in_the_trace_and_breaks_a_property(
    anthropic: ModuleType, tmp_path: Path
) -> None:
    path = scenario(tmp_path, ANTHROPIC)
    with serve_scenario(path) as server:
        client = anthropic.Anthropic(
            base_url=server.base_url("anthropic", "a"), api_key="sk-ant-test", max_retries=0
        )
        tools = [{"name": "search", "input_schema": SEARCH_SCHEMA}]
        messages: list[Any] = [{"role": "user", "content": "Find a."}]
        with client:
            first = client.messages.create(
                model="claude-sonnet-4-5", max_tokens=100, messages=messages, tools=tools
            )
            use = next(b for b in first.content if b.type == "tool_use")
            messages += [
                {"role": "assistant", "content": [b.model_dump() for b in first.content]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                              "content": "index offline", "is_error": True}]},
            ]  # fmt: skip
            client.messages.create(
                model="claude-sonnet-4-5", max_tokens=100, messages=messages, tools=tools
            )
        trace = server.session("a").trace().trace
        report = end(server, "a")

    (done,) = [e for e in trace if e["type"] == "tool_execution_end"]
    assert (done["tool_call_id"], done["result"], done["is_error"]) == (
        "toolu_wire1_0", "index offline", True,
    )  # fmt: skip
    assert report["report"] == (
        '- property 1 (never) does not hold: never: {"tool": "search", "is_error": true}\n'
        f"  at {path}:12\n"
        '  search was called: #6 search({"q": "a"}) d0 r1\n'
        '    #6   tool_execution_start   d0 r1 search({"q": "a"})'
    )


GEMINI = """\
scenario: google-genai runs the tool itself
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
    returns: "3 results"
exec: {content: "Find a."}
model:
  - tool_calls: [{search: {q: tides}}]
  - text: "Tides follow the moon."
expect:
  trajectory: {mode: exact, calls: [{search: {q: tides}}]}
  properties:
    - at_least: {tool: search, times: 1, result: "3 results for tides"}
"""


def test_google_genai_automatic_function_calling_passes_trace_and_invariants(
    genai: ModuleType, tmp_path: Path
) -> None:
    def search(q: str) -> str:
        """Search the web."""
        return f"3 results for {q}"

    with serve_scenario(scenario(tmp_path, GEMINI)) as server:
        options = genai.types.HttpOptions(base_url=server.base_url("gemini", "g"))
        client = genai.Client(api_key="gemini-test-key", http_options=options)
        reply = client.models.generate_content(
            model="gemini-2.5-flash", contents="Find a.",
            config=genai.types.GenerateContentConfig(tools=[search]),
        )  # fmt: skip
        assert reply.text == "Tides follow the moon."
        trace = server.session("g").trace().trace
        report = end(server, "g")

    # Gemini sends no call ids: the result is matched by name and order
    (done,) = [e for e in trace if e["type"] == "tool_execution_end"]
    assert (done["tool_call_id"], done["result"]) == ("#1.0", "3 results for tides")
    assert (report["passed"], report["report"]) == (True, "")


WEATHER = """\
scenario: pydantic-ai asks for the weather
tools:
  get_weather:
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    returns: "sunny"
exec: {content: "What's the weather in Paris?"}
model:
  - tool_calls: [{get_weather: {city: Paris}}]
  - text: "It is sunny in Paris."
expect:
  trajectory: {mode: exact, calls: [{get_weather: {city: %s}}]}
"""


@pytest.mark.parametrize("city", ["Paris", "Rome"])
def test_a_pydantic_ai_agent_sessions_trajectory(
    pydantic_ai: ModuleType, tmp_path: Path, city: str
) -> None:
    async def ask(url: str) -> str:
        async with httpx2.AsyncClient() as http:
            provider = pydantic_ai.providers.openai.OpenAIProvider(
                base_url=url, api_key="sk-test-0123456789", http_client=http
            )
            model = pydantic_ai.models.openai.OpenAIChatModel("gpt-4o-mini", provider=provider)
            agent = pydantic_ai.Agent(model)

            @agent.tool_plain
            def get_weather(city: str) -> str:
                """The current weather in a city."""
                return "sunny"

            return str((await agent.run("What's the weather in Paris?")).output)

    with serve_scenario(scenario(tmp_path, WEATHER % city)) as server:
        assert asyncio.run(ask(server.base_url("openai", "p"))) == "It is sunny in Paris."
        report = end(server, "p")

    if city == "Paris":  # pydantic-ai's own loop passes every client invariant too
        assert (report["passed"], report["report"]) == (True, ""), report["report"]
    else:
        assert [f["title"] for f in report["failures"]] == [
            "trajectory (exact) did not match: score 0.00, min_score 1.0"
        ]
        assert "Rome" in report["failures"][0]["detail"]


STATEFUL = """\
scenario: a Responses client that sends only previous_response_id and its new items
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
exec: {content: "Find a."}
model:
  - tool_calls: [{search: {q: a}}]
  - text: "Found a."
expect:
  requests:
    - {round: 1, message_count: 1}
    - round: 2
      message_count: 3
      last_message: {role: toolResult, tool_name: search, text: "3 results"}
  trajectory: {mode: exact, calls: [{search: {q: a}}]}
"""


def test_previous_response_id_is_read_as_the_whole_conversation(
    openai: ModuleType, tmp_path: Path
) -> None:
    with serve_scenario(scenario(tmp_path, STATEFUL)) as server:
        client = openai.OpenAI(
            base_url=server.base_url("openai", "state"), api_key="sk-test", max_retries=0
        )
        with client:
            first = client.responses.create(model="gpt-4o", input="Find a.", tools=RESPONSES_TOOLS)
            (call,) = [o for o in first.output if o.type == "function_call"]
            output = {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": "3 results",
            }
            second = client.responses.create(
                model="gpt-4o", previous_response_id=first.id, input=[output],
                tools=RESPONSES_TOOLS,
            )  # fmt: skip
        assert (first.id, second.output_text) == ("resp_wire1", "Found a.")
        sent = server.session("state").requests[1].body
        trace = server.session("state").trace().trace
        report = end(server, "state")

    assert sent["input"] == [output]  # what the client sent stays as it was
    ends = [(e["tool_name"], e["result"]) for e in trace if e["type"] == "tool_execution_end"]
    assert ends == [("search", "3 results")]
    assert (report["passed"], report["report"]) == (True, "")


def test_an_unknown_or_unstored_previous_response_gets_the_apis_own_error(
    openai: ModuleType, tmp_path: Path
) -> None:
    with serve_scenario(scenario(tmp_path, STATEFUL)) as server:
        client = openai.OpenAI(
            base_url=server.base_url("openai", "lost"), api_key="sk-test", max_retries=0
        )
        with client:
            first = client.responses.create(
                model="gpt-4o", input="Find a.", tools=RESPONSES_TOOLS, store=False
            )
            with pytest.raises(openai.BadRequestError) as caught:
                client.responses.create(
                    model="gpt-4o", previous_response_id=first.id, input="again"
                )
        report = end(server, "lost")

    error = caught.value
    assert (error.status_code, error.code, error.param) == (
        400, "previous_response_not_found", "previous_response_id",
    )  # fmt: skip
    message = (
        "Previous response with id 'resp_wire1' not found. (openprogram-sim: session 'lost' "
        "served no response with that id, or served it under store: false; a session keeps "
        "the responses it served, ids resp_wire1, resp_wire2, ... by request)"
    )
    assert error.body == {
        "message": message, "type": "invalid_request_error",
        "param": "previous_response_id", "code": "previous_response_not_found",
    }  # fmt: skip
    assert report["errors"] == [f"request #2 (openai-responses): {message}"]


def test_calls_without_ids_are_told_apart_across_rounds() -> None:
    from openprogram_sim.trace import trace_calls
    from openprogram_sim.wire._trace import Exchange, Served, ServedCall, build_trace

    def call(q: str) -> Served:
        return Served(status=200, calls=[ServedCall(None, "search", {"q": q})],
                      stop_reason="toolUse")  # fmt: skip

    ask = {"role": "user", "text": "Find."}
    picked = {"role": "assistant", "text": "", "tool_calls": [{"name": "search", "id": None}]}
    result = {"role": "toolResult", "text": "r", "tool_name": "search", "tool_call_id": None}
    built = build_trace([
        Exchange(index=1, arrived=0.0, messages=[ask], served=call("a")),
        Exchange(index=2, arrived=0.0, messages=[ask, picked], served=call("b")),  # no result
        Exchange(index=3, arrived=0.0, messages=[ask, picked, picked, result],
                 served=Served(status=200, text="done")),
    ])  # fmt: skip
    got = [(c.name, c.args, c.round, c.result) for c in trace_calls(built.trace)]
    assert got == [("search", {"q": "a"}, 1, None), ("search", {"q": "b"}, 2, "r")]
    assert [r.answered for r in built.rounds] == [{}, {0: 0}, {0: 1}]


def test_a_bedrock_tool_results_status_is_its_is_error(
    boto3: ModuleType, botocore: ModuleType, tmp_path: Path
) -> None:
    with serve_scenario(scenario(tmp_path, ANTHROPIC.replace("never:", "at_most:")
                                 .replace("is_error: true}", "times: 1}"))) as server:  # fmt: skip
        client = boto3.client(
            "bedrock-runtime", endpoint_url=server.base_url("bedrock", "b"),
            region_name="us-east-1", aws_access_key_id="test-access-key",
            aws_secret_access_key="test-secret-key",
            config=botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"}),
        )  # fmt: skip
        tools = {"tools": [{"toolSpec": {"name": "search",
                                         "inputSchema": {"json": SEARCH_SCHEMA}}}]}  # fmt: skip
        messages: list[Any] = [{"role": "user", "content": [{"text": "Find a."}]}]
        first = client.converse(modelId="m", messages=messages, toolConfig=tools)
        use = next(b["toolUse"] for b in first["output"]["message"]["content"] if "toolUse" in b)
        messages += [first["output"]["message"], {"role": "user", "content": [{"toolResult": {
            "toolUseId": use["toolUseId"], "content": [{"text": "index offline"}],
            "status": "error"}}]}]  # fmt: skip
        client.converse(modelId="m", messages=messages, toolConfig=tools)
        trace = server.session("b").trace().trace
        report = end(server, "b")

    (done,) = [e for e in trace if e["type"] == "tool_execution_end"]
    assert (done["tool_call_id"], done["result"], done["is_error"]) == (
        "tooluse_wire1_0", "index offline", True,
    )  # fmt: skip
    assert (report["passed"], report["report"]) == (True, "")


ERROR_THEN_TEXT = """\
scenario: an error served, the request again, then the answer
exec: {content: "Hi."}
model:
  - {stop_reason: error, error: "boom", error_reason: server}
  - text: "Hello."
expect:
  properties:
    - ends_with: {reason: stop}
"""


def test_an_error_served_and_the_retry_are_rounds_of_the_trace(tmp_path: Path) -> None:
    with serve_scenario(scenario(tmp_path, ERROR_THEN_TEXT)) as server:
        body = {"model": "m", "messages": [{"role": "user", "content": "Hi."}]}
        with httpx2.Client(base_url=server.url) as http:
            codes = [http.post("/s/e/v1/chat/completions", json=body).status_code
                     for _ in range(2)]  # fmt: skip
        built = server.session("e").trace()
        report = end(server, "e")

    assert codes == [500, 200]
    answers = [e for e in built.trace if e["type"] == "message_end" and e["role"] == "assistant"]
    assert [(e["round"], e["stop_reason"], e.get("error"), e.get("error_status"))
            for e in answers] == [(1, "error", "boom", 500), (2, "stop", None, None)]  # fmt: skip
    assert [r.retry_of for r in built.rounds] == [None, 1]
    assert (report["passed"], report["report"]) == (True, "")


def test_the_trace_over_http_for_clients_in_any_language(tmp_path: Path) -> None:
    with serve_scenario(scenario(tmp_path, ERROR_THEN_TEXT)) as server:
        body = {"model": "m", "messages": [{"role": "user", "content": "Hi."}]}
        with httpx2.Client(base_url=server.url) as http:
            http.post("/s/h/v1/chat/completions", json=body)
            live = http.get("/s/h/trace")
            http.delete("/s/h")
            gone = http.get("/s/h/trace")
        expected = server.app.ended.get("h")

    assert live.status_code == 200
    assert live.json()["session"] == "h"
    assert [e["type"] for e in live.json()["trace"]] == [
        "agent_start", "turn_start", "message_start", "message_end", "message_start",
        "message_end", "turn_end", "agent_end",
    ]  # fmt: skip
    assert expected is not None and gone.status_code == 404
    assert gone.json()["error"]["message"] == (
        "openprogram-sim: no live session 'h': a session's trace is kept while it is live "
        "(GET /s/h/trace before DELETE /s/h); GET /s/h gives the report of one that ended"
    )


def test_a_cycling_servers_default_session_is_no_single_run(
    openai: ModuleType, tmp_path: Path
) -> None:
    with serve_scenario(scenario(tmp_path, FAILING), cycle=True) as server:
        for _ in range(2):  # two runs of the script in the default session
            openai_chat_loop(openai, server.base_url("openai"))
        openai_chat_loop(openai, server.base_url("openai", "one"))
        failing = [f.title for f in server.check().failures]
    assert failing == [
        "session 'one': trajectory (exact) did not match: score 0.67, min_score 1.0",
        "session 'one': property 1 (at_most) does not hold: at_most: "
        '{"tool": "search", "times": 1}',
    ]
