"""Every statement of the seed's loop, pinned by the whole event sequence of a small run."""

from __future__ import annotations

from typing import Any

import pytest
from _support import OPENING, OPENING_IN_ROUNDS, compact, make_runtime, tool, tool_round_then_stop

from openprogram import ModelError, RunAbortedError

ADD = tool(
    "add",
    lambda a, b: a + b,
    {"a": {"type": "integer"}, "b": {"type": "integer"}},
    ["a", "b"],
)


def echo_tool(log: list[Any]) -> dict[str, Any]:
    def echo(text: str) -> str:
        log.append(text)
        return f"echo:{text}"

    return tool("echo", echo, {"text": {"type": "string"}}, ["text"])


def test_text_only_reply_finishes_and_is_the_result() -> None:
    """Seed: "tool_calls empty → ... the inner while exits → that text is the result"."""
    runtime, model, rec = make_runtime([{"text": "Hello there."}])
    assert runtime.exec("hi", tools=[ADD]) == "Hello there."
    assert compact(rec.trace, rounds=True) == [
        *OPENING_IN_ROUNDS,
        "message_end:assistant[]/stop@1",
        "turn_end@1",
        "agent_end:stop@1",
    ]
    assert model.calls == 1
    assert rec.trace[-1]["depth"] == 0


def test_tool_call_is_executed_and_result_fed_back_before_next_round() -> None:
    """Seed: "the framework executes it, feeds the result back into the history, and lets
    it pick again"."""
    runtime, model, rec = make_runtime(
        [{"tool_calls": [{"add": {"a": 2, "b": 3}}]}, {"text": "It is 5."}]
    )
    assert runtime.exec("2+3?", tools=[ADD]) == "It is 5."
    assert compact(rec.trace, rounds=True) == [
        *OPENING_IN_ROUNDS,
        *tool_round_then_stop("add"),
    ]
    end = next(e for e in rec.trace if e["type"] == "tool_execution_end")
    assert end["result"] == "5" and end["args"] == {"a": 2, "b": 3}
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "toolResult"]
    assert second[-1].text == "5" and second[-1].tool_call_id == end["tool_call_id"]


def test_parallel_picks_execute_sequentially_in_order() -> None:
    """Seed: "Parallel picks execute sequentially in order"."""
    log: list[str] = []
    runtime, model, rec = make_runtime(
        [
            {"tool_calls": [{"echo": {"text": t}} for t in "abc"]},
            {"text": "done"},
        ]
    )
    runtime.exec("go", tools=[echo_tool(log)])
    assert log == ["a", "b", "c"]
    assert (
        compact(rec.trace)[6:18]
        == [
            "tool_start:echo",
            "tool_end:echo:ok",
            "message_start:toolResult",
            "message_end:toolResult",
        ]
        * 3
    )
    results = [m for m in model.requests[1].messages if m.role == "toolResult"]
    calls = model.requests[1].messages[1].tool_calls
    assert [r.tool_call_id for r in results] == [c.id for c in calls]
    assert [r.text for r in results] == ["echo:a", "echo:b", "echo:c"]


def test_unknown_tool_becomes_error_result_and_loop_continues() -> None:
    """Seed: "tool not found → ... produces an is_error result"."""
    runtime, model, rec = make_runtime(
        [{"tool_calls": [{"subtract": {"a": 1}}]}, {"text": "Sorry."}]
    )
    assert runtime.exec("go", tools=[ADD]) == "Sorry."
    end = next(e for e in rec.trace if e["type"] == "tool_execution_end")
    assert end["is_error"] is True
    assert end["result"] == "Tool subtract not found (available: add)"
    assert compact(rec.trace)[-4:] == [
        "message_start:assistant",
        "message_end:assistant[]/stop",
        "turn_end",
        "agent_end:stop",
    ]
    assert model.requests[1].messages[-1].is_error is True


def test_invalid_arguments_become_error_result_listing_each_path() -> None:
    """Seed: "validate_tool_arguments fails → exception, produces an is_error result"."""
    runtime, _, rec = make_runtime(
        [{"tool_calls": [{"add": {"a": "two", "b": [1]}}]}, {"text": "retrying"}]
    )
    assert runtime.exec("go", tools=[ADD]) == "retrying"
    end = next(e for e in rec.trace if e["type"] == "tool_execution_end")
    assert end["is_error"] is True
    assert end["result"].startswith('Validation failed for tool "add":\n')
    assert "  - a: 'two' is not of type 'integer'" in end["result"]
    assert "  - b: [1] is not of type 'integer'" in end["result"]
    assert end["result"].endswith('Received arguments:\n{\n  "a": "two",\n  "b": [\n    1\n  ]\n}')


def test_lenient_coercion_passes_coerced_arguments_to_the_tool() -> None:
    seen: list[tuple[Any, Any]] = []

    def add(a: int, b: int) -> int:
        seen.append((a, b))
        return a + b

    entry = tool("add", add, {"a": {"type": "integer"}, "b": {"type": "integer"}}, ["a", "b"])
    runtime, _, rec = make_runtime([{"tool_calls": [{"add": {"a": "2", "b": 3.0}}]}, "ok"])
    runtime.exec("go", tools=[entry])
    assert seen == [(2, 3)]
    start = next(e for e in rec.trace if e["type"] == "tool_execution_start")
    assert start["args"] == {"a": "2", "b": 3.0}  # events carry the raw arguments


@pytest.mark.parametrize(
    ("raw", "kind"), [('["not", "an", "object"]', "list"), ("{not json", "str"), ("42", "int")]
)
def test_arguments_that_are_not_a_json_object_become_error_result(raw: str, kind: str) -> None:
    runtime, _, rec = make_runtime(
        [{"tool_calls": [{"name": "add", "arguments": raw}]}, {"text": "ok"}]
    )
    assert runtime.exec("go", tools=[ADD]) == "ok"
    end = next(e for e in rec.trace if e["type"] == "tool_execution_end")
    assert end["is_error"] is True
    assert end["result"].startswith(
        f'Validation failed for tool "add": arguments must be a JSON object, got {kind}.'
    )


def test_tool_that_raises_becomes_error_result_with_exception_text() -> None:
    """Seed: "tool.execute(...) raises → caught; the exception text becomes an is_error
    result"; neither breaks the loop."""

    def flaky() -> str:
        raise OSError("disk full")

    runtime, _, rec = make_runtime(
        [{"tool_calls": [{"flaky": {}}, {"add": {"a": 1, "b": 1}}]}, {"text": "noted"}]
    )
    assert runtime.exec("go", tools=[tool("flaky", flaky), ADD]) == "noted"
    ends = [e for e in rec.trace if e["type"] == "tool_execution_end"]
    assert [(e["tool_name"], e["is_error"], e["result"]) for e in ends] == [
        ("flaky", True, "disk full"),
        ("add", False, "2"),
    ]


def test_error_stop_ends_the_run_at_once_without_running_tools() -> None:
    """Seed: "stop_reason in ("error", "aborted") → end the stream immediately"."""
    calls: list[str] = []
    runtime, model, rec = make_runtime(
        [
            {
                "tool_calls": [{"echo": {"text": "x"}}],
                "stop_reason": "error",
                "error": "overloaded",
            },
            {"text": "never"},
        ]
    )
    with pytest.raises(ModelError, match="overloaded") as info:
        runtime.exec("go", tools=[echo_tool(calls)])
    assert calls == []
    assert info.value.message is not None and info.value.message.stop_reason == "error"
    assert compact(rec.trace) == [
        *OPENING,
        "message_end:assistant[echo]/error",
        "turn_end",
        "agent_end:error",
    ]
    assert model.calls == 1 and len(model.unconsumed) == 1


def test_aborted_stop_ends_the_run_and_raises_cancellation() -> None:
    runtime, _, rec = make_runtime([{"text": "partial", "stop_reason": "aborted"}])
    with pytest.raises(RunAbortedError):
        runtime.exec("go", tools=[ADD])
    assert compact(rec.trace)[-3:] == [
        "message_end:assistant[]/aborted",
        "turn_end",
        "agent_end:aborted",
    ]
    assert runtime.last_run is not None and runtime.last_run.reason == "aborted"


def test_length_stop_with_tool_calls_still_runs_them() -> None:
    """The loop branches on ToolCall blocks, not on stop_reason (only error/aborted end)."""
    runtime, _, rec = make_runtime(
        [{"tool_calls": [{"add": {"a": 1, "b": 2}}], "stop_reason": "length"}, "three"]
    )
    assert runtime.exec("go", tools=[ADD]) == "three"
    assert "tool_end:add:ok" in compact(rec.trace)


LOOPING = [{"tool_calls": [{"add": {"a": 1, "b": 1}}]}] * 60


@pytest.mark.parametrize(
    ("asked", "rounds"), [(3, 3), (1, 1), (0, 1), (-5, 1), (100, 50), (None, 50)]
)
def test_cap_is_max_1_min_50_max_iterations(asked: int | None, rounds: int) -> None:
    """Seed: "the effective cap is min(50, max_iterations), floored at 1"; hitting it is a
    normal finish that returns what exists."""
    runtime, model, rec = make_runtime(LOOPING)
    result = runtime.exec("loop", tools=[ADD], max_iterations=asked)
    assert result == ""  # the last message holds only a tool call
    assert model.calls == rounds
    types = [e["type"] for e in rec.trace]
    assert types.count("turn_start") == types.count("turn_end") == rounds
    assert types.count("tool_execution_end") == rounds  # the last round's tools ran
    assert rec.trace[-1] == {"type": "agent_end", "depth": 0, "round": rounds, "reason": "cap"}
    assert runtime.last_run is not None and runtime.last_run.reason == "cap"


def test_cap_returns_the_last_message_text() -> None:
    runtime, _, _ = make_runtime(
        [{"text": "working on it", "tool_calls": [{"add": {"a": 1, "b": 1}}]}] * 2
    )
    assert runtime.exec("go", tools=[ADD], max_iterations=2) == "working on it"


def test_tool_choice_and_parallel_flag_reach_the_provider_every_round() -> None:
    runtime, model, _ = make_runtime([{"tool_calls": [{"add": {"a": 1, "b": 1}}]}] * 2 + ["x"])
    choice = {"type": "function", "name": "add"}
    runtime.exec("go", tools=[ADD], tool_choice=choice, parallel_tool_calls=False)
    assert [(r.round, r.tool_choice, r.parallel_tool_calls, r.tools) for r in model.requests] == [
        (1, choice, False, ["add"]),
        (2, choice, False, ["add"]),
        (3, choice, False, ["add"]),
    ]


def test_tool_choice_is_checked() -> None:
    runtime, _, _ = make_runtime([])
    with pytest.raises(ValueError, match=r"tool_choice='sometimes' is not valid; use 'auto'"):
        runtime.exec("go", tools=[ADD], tool_choice="sometimes")  # type: ignore[arg-type]


def test_tool_updates_become_update_events() -> None:
    def slow(on_update: Any) -> str:
        on_update("25%")
        on_update("100%")
        return "done"

    runtime, _, rec = make_runtime([{"tool_calls": [{"slow": {}}]}, "ok"])
    runtime.exec("go", tools=[tool("slow", slow)])
    updates = [e for e in rec.trace if e["type"] == "tool_execution_update"]
    assert [u["partial_result"] for u in updates] == ["25%", "100%"]
    assert compact(rec.trace)[6:9] == [
        "tool_start:slow",
        "tool_execution_update",
        "tool_execution_update",
    ]


def test_async_tools_and_rich_return_values() -> None:
    async def lookup(key: str) -> dict[str, Any]:
        return {"key": key, "n": 1}

    def nothing() -> None:
        return None

    runtime, _, rec = make_runtime(
        [{"tool_calls": [{"lookup": {"key": "k"}}, {"nothing": {}}]}, "ok"]
    )
    runtime.exec(
        "go",
        tools=[tool("lookup", lookup, {"key": {"type": "string"}}), tool("nothing", nothing)],
    )
    ends = [e["result"] for e in rec.trace if e["type"] == "tool_execution_end"]
    assert ends == ['{"key": "k", "n": 1}', ""]


def test_schema_defaults_reach_the_tool_but_never_the_model_arguments() -> None:
    """The raw arguments are history sent back to the provider and what events show; a
    schema default is filled into the tool's copy only."""
    seen: list[dict[str, Any]] = []

    def search(**kwargs: Any) -> str:
        seen.append(kwargs)
        return "ok"

    entry = tool(
        "search", search, {"q": {"type": "string"}, "limit": {"type": "integer", "default": 5}}
    )
    runtime, model, rec = make_runtime([{"tool_calls": [{"search": {"q": "a"}}]}, "done"])
    runtime.exec("go", tools=[entry])
    assert seen == [{"q": "a", "limit": 5}]
    start = next(e for e in rec.trace if e["type"] == "tool_execution_start")
    assert start["args"] == {"q": "a"}
    sent = model.requests[1].messages[1].tool_calls[0]
    assert sent.arguments == {"q": "a"}
