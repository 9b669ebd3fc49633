"""The scripts a campaign serves an agent, drawn by Hypothesis from the tools it declares.

A script is a list of model turns (scenario ``model:`` entries, ``wire:`` keys included):
up to :data:`MAX_ROUNDS` rounds of tool calls (one to :data:`MAX_CALLS` calls each, to
the agent's tools with arguments drawn from their schemas, with invalid arguments, or to a
tool that does not exist), then a final text. Before any of these turns up to two faults
may come, each a turn the agent must retry past: an HTTP 429 with ``retry-after``
(``rate_limit``), an error event inside a 200 stream after some text (``stream_error``;
an HTTP 500 for an agent that does not stream), a stream cut before its end (``cut``). A
turn may also be re-chunked: each streamed event its own write (``wire: {interval}``), so
the agent assembles deltas that arrive apart.

Every choice shrinks toward the plain case (no round, no fault, valid arguments, the first
tool), so a failing script shrinks to the few turns that matter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from openprogram_sim.fuzz._schemas import UnsupportedSchema, invalid_arguments, valid_arguments
from openprogram_sim.fuzz.agent._tools import DeclaredTool

__all__ = [
    "FAULT_KINDS",
    "MAX_CALLS",
    "MAX_ROUNDS",
    "RETRY_AFTER",
    "fault_kind",
    "script_strategy",
]

FAULT_KINDS = ("rate_limit", "stream_error", "cut")
"""The faults a script may serve (``--faults``)."""

MAX_ROUNDS = 4
MAX_CALLS = 3
RETRY_AFTER = (0.05, 0.1, 0.2)
"""The ``retry-after`` seconds a 429 asks for (short: an agent that honours them waits)."""

_UNKNOWN = ("no_such_tool", "lookup_v2")
_TEXTS = ("Done.", "Here is what I found: three results.", "Fertig — 完成 ✓")
_CUT_TEXT = "This reply is long enough to stream in several pieces before the cut. " * 2
_KINDS = ("valid",) * 6 + ("invalid",) * 2 + ("unknown",)
"""A call's kind: two in three valid, two in nine invalid, one in nine to an unknown tool."""


def _arguments(tool: DeclaredTool, valid: bool, text_ok: bool) -> st.SearchStrategy[Any]:
    try:
        if valid:
            return valid_arguments(tool.parameters or {"type": "object"})
        drawn = invalid_arguments(tool.parameters or {"type": "object"})
    except UnsupportedSchema:
        return st.just({})  # a schema the strategies cannot draw from: plain calls only
    # arguments as text (not JSON) go verbatim only on wires that carry text
    return drawn if text_ok else drawn.filter(lambda a: isinstance(a, dict))


def _calls(tools: Sequence[DeclaredTool], text_ok: bool) -> st.SearchStrategy[dict[str, Any]]:
    valid = [_arguments(t, True, text_ok) for t in tools]
    invalid = [_arguments(t, False, text_ok) for t in tools]

    @st.composite
    def call(draw: st.DrawFn) -> dict[str, Any]:
        kind = draw(st.sampled_from(_KINDS)) if tools else "unknown"
        if kind == "unknown":
            return {"name": draw(st.sampled_from(_UNKNOWN)), "arguments": {}}
        i = draw(st.integers(0, len(tools) - 1))
        args = draw(valid[i] if kind == "valid" else invalid[i])
        return {"name": tools[i].name, "arguments": args}

    return call()


def _fault(kinds: Sequence[str], stream: bool) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def fault(draw: st.DrawFn) -> dict[str, Any]:
        kind = draw(st.sampled_from(list(kinds)))
        if kind == "rate_limit":
            wait = draw(st.sampled_from(RETRY_AFTER))
            return {"stop_reason": "error", "error": "rate limited", "error_reason": "rate_limit",
                    "retry_after": wait}  # fmt: skip
        if kind == "stream_error" and stream:
            return {"text": "Let me", "stop_reason": "error", "error": "stream interrupted",
                    "wire": {"error_mode": "stream"}}  # fmt: skip
        if kind == "stream_error":  # a JSON body has no stream: the server's error instead
            return {"stop_reason": "error", "error": "server error",
                    "wire": {"error_mode": "http", "status": 500}}  # fmt: skip
        # a cut before the end: after the headers, or (streaming) within the first events
        cut = draw(st.integers(0, 2)) if stream else 0
        return {"text": _CUT_TEXT, "wire": {"cut_after": cut}}

    return fault()


def _rechunked(
    turn: st.SearchStrategy[dict[str, Any]], stream: bool
) -> st.SearchStrategy[dict[str, Any]]:
    if not stream:
        return turn  # one JSON body: nothing to re-chunk

    @st.composite
    def maybe(draw: st.DrawFn) -> dict[str, Any]:
        value = draw(turn)
        if draw(st.integers(0, 3)) == 3:  # one in four: each event its own write
            value = {**value, "wire": {"interval": 0.001}}
        return value

    return maybe()


def script_strategy(
    tools: Sequence[DeclaredTool],
    *,
    faults: Sequence[str] = FAULT_KINDS,
    stream: bool = True,
    text_args: bool = True,
    max_rounds: int = MAX_ROUNDS,
    max_calls: int = MAX_CALLS,
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Scripts over ``tools``: rounds of calls, then a text, faults before any turn.
    ``stream``: the agent streams (a cut may come mid-stream); ``text_args``: its wire
    carries arguments as text (OpenAI, streaming Anthropic and Bedrock), so invalid
    arguments may be text that is not JSON."""
    unknown = sorted(set(faults) - set(FAULT_KINDS))
    if unknown:
        raise ValueError(f"unknown fault(s) {', '.join(unknown)}; use {', '.join(FAULT_KINDS)}")
    calls = _calls(tools, text_args)
    call_turn = st.builds(lambda cs: {"tool_calls": cs},
                          st.lists(calls, min_size=1, max_size=max_calls))  # fmt: skip
    text_turn = st.builds(lambda t: {"text": t}, st.sampled_from(_TEXTS))
    before = st.lists(_fault(faults, stream), max_size=2) if faults else st.just([])
    rounds = st.lists(
        st.tuples(before, _rechunked(call_turn, stream)), max_size=max_rounds if tools else 0
    )  # no tools: texts and faults only

    @st.composite
    def script(draw: st.DrawFn) -> list[dict[str, Any]]:
        turns: list[dict[str, Any]] = []
        for extra, turn in draw(rounds):
            turns += [*extra, turn]
        turns += [*draw(before), draw(_rechunked(text_turn, stream))]
        return turns

    return script()


def fault_kind(turn: dict[str, Any]) -> str | None:
    """Which fault of :data:`FAULT_KINDS` a scripted turn is (None: not one)."""
    if turn.get("error_reason") == "rate_limit":
        return "rate_limit"
    wire = turn.get("wire") or {}
    if turn.get("stop_reason") == "error":
        return "stream_error"
    if "cut_after" in wire:
        return "cut"
    return None
