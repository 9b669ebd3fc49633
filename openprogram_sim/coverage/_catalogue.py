"""The catalogue: every behaviour of the loop a scenario suite can pin down, with a stable id,
the sentence of the seed (``docs/loop-spec.md``) or of DESIGN it comes from, what counts as
exercising it and what counts as asserting it.

The catalogue is fixed: ids are never renamed or reused (a behaviour that goes away keeps its
id, retired), so ``--coverage-require`` lists and JSON consumers stay valid. Its order is the
order of the table, grouped as the seed reads: picking, tool errors, the menu, ``tool_choice``,
stops, the cap, steering and follow-ups, nesting, deferred tools, ``choices=``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from openprogram_sim.errors import SimError

__all__ = [
    "CATALOGUE",
    "Behaviour",
    "UnknownBehaviourError",
    "behaviour",
    "catalogue_markdown",
    "parse_ids",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Behaviour:
    """One behaviour of the loop."""

    id: str
    """Stable identifier (``--coverage-require``, the JSON, the report's matrix)."""
    group: str
    """Where it sits in the seed: basics, tool errors, menu, tool_choice, stops, cap, ..."""
    title: str
    """What happens, in a line."""
    source: str
    """``Seed`` (docs/loop-spec.md quotes the seed whole) or ``DESIGN``."""
    quote: str
    """The sentence it comes from, verbatim."""
    exercised: str
    """What a run must contain for the behaviour to count as exercised."""
    asserted: str
    """Which expectations of the scenario's ``expect:`` count as asserting it (see the
    module :mod:`openprogram_sim.coverage` for the general rule)."""


class UnknownBehaviourError(SimError, ValueError):
    """A behaviour id that is not in the catalogue (the message suggests the closest)."""


def _b(**fields: str) -> Behaviour:
    return Behaviour(**fields)


_NEXT_REQUEST = (
    "the next request of that run selected and its messages, last_message or message_count named"
)

CATALOGUE: tuple[Behaviour, ...] = (
    # ------------------------------------------------------------------ basics
    _b(
        id="text_finish",
        group="basics",
        title="a text-only reply finishes the run; its text is the result",
        source="Seed",
        quote='If the message is text only, with no ToolCall, it picked "finish" — the text is '
        "returned as the final reply.",
        exercised="a run (any depth) ends with agent_end reason stop after a reply with no tool "
        "calls",
        asserted="an expected agent_end on that run naming reason, an expected message_end on "
        "the final reply naming text, stop_reason or tool_calls, or expect.result when the "
        "run is the scenario's own exec (not choices:, not call:)",
    ),
    _b(
        id="tool_round",
        group="basics",
        title="tool calls run, their results go back, the model picks again",
        source="Seed",
        quote="If the message content contains a ToolCall, it picked a function — the framework "
        "executes it, feeds the result back into the history, and lets it pick again.",
        exercised="a reply with tool calls, at least one of which ran, followed by another "
        "model call in the same run",
        asserted="an expected tool_execution_end on a call that ran naming result or is_error, "
        f"{_NEXT_REQUEST}, or expect.model_calls",
    ),
    _b(
        id="several_calls_one_round",
        group="basics",
        title="several calls in one reply run one by one, in order",
        source="Seed",
        quote="Parallel picks execute sequentially in order.",
        exercised="a reply with two or more tool calls of which at least two ran",
        asserted="an expected message_end on that reply naming tool_calls, or expected tool "
        "events matched to two different calls of the batch naming tool_call_id, tool_name, "
        "args or result",
    ),
    # ------------------------------------------------------------------ tool errors
    _b(
        id="unknown_tool",
        group="tool errors",
        title="a call to a tool not offered gets an is_error result",
        source="Seed",
        quote="tool not found → ValueError, produces an is_error result",
        exercised="a tool_execution_end with is_error for a name not in the tools its request "
        "offered (and not a deferred tool)",
        asserted="an expected tool_execution_end on that call naming is_error or result",
    ),
    _b(
        id="invalid_arguments",
        group="tool errors",
        title="arguments that fail the tool's schema get an is_error result",
        source="Seed",
        quote="validate_tool_arguments fails → exception, produces an is_error result",
        exercised="a tool_execution_end with is_error for an offered tool whose arguments fail "
        "its JSON schema (checked with the tool layer's validate_tool_arguments)",
        asserted="an expected tool_execution_end on that call naming is_error or result",
    ),
    _b(
        id="tool_raised",
        group="tool errors",
        title="a tool that raises gets an is_error result with the exception text",
        source="Seed",
        quote="tool.execute(...) raises → caught; the exception text becomes an is_error result",
        exercised="a tool_execution_end with is_error and `error_kind: raised`: an offered tool "
        "with valid arguments whose body raised (raises:, a nested exec that raised, or the "
        "user's code)",
        asserted="an expected tool_execution_end on that call naming is_error or result",
    ),
    _b(
        id="error_result_returned",
        group="tool errors",
        title="an error result goes back to the model and the loop goes on",
        source="Seed",
        quote="Neither validation nor execution exceptions break the loop — they become an "
        'is_error=True tool result fed back to the model, so it can see "wrong function / '
        'wrong arguments" and correct itself.',
        exercised="an is_error result (not a skip) followed by another model call in the same run",
        asserted=f"{_NEXT_REQUEST}, an expected message_end on the next reply naming text or "
        "tool_calls, or expect.model_calls",
    ),
    # ------------------------------------------------------------------ menu
    _b(
        id="full_toolset_default",
        group="menu",
        title="no tools= and no toolset=: the full registry toolset is offered",
        source="Seed",
        quote="With neither tools= nor toolset= passed, exec resolves the FULL registry toolset, "
        "so any function can search, run code, and edit files without opting in.",
        exercised="an exec given neither tools: nor toolset: (the scenario's exec, or a nested "
        "exec with no tools= list to inherit) offers tools",
        asserted="an expected request of that exec naming tools",
    ),
    _b(
        id="tools_opt_out",
        group="menu",
        title='tools=[] or toolset="none": a pure reasoning call, no tools offered',
        source="Seed",
        quote='A call that genuinely wants no tools opts out explicitly with toolset="none" (or '
        "tools=[]) — only then is it a pure reasoning call where the model can only emit text.",
        exercised="the outer exec offers no tools (tools: [] or toolset: none)",
        asserted="an expected request at depth 0 naming tools",
    ),
    _b(
        id="tool_policy_trim",
        group="menu",
        title="tools_source, tools_allow and tools_deny trim the menu",
        source="Seed",
        quote="To trim the tool menu, exec also takes the policy parameters tools_source, "
        "tools_allow, and tools_deny.",
        exercised="an exec given tools_source, tools_allow or tools_deny makes a model call",
        asserted="an expected request of that exec naming tools",
    ),
    # ------------------------------------------------------------------ tool_choice
    _b(
        id="tool_choice_auto",
        group="tool_choice",
        title='tool_choice "auto" is sent to the provider',
        source="Seed",
        quote='"auto" (default: the model decides)',
        exercised="a request sent with tool_choice auto",
        asserted="an expected request selecting it naming tool_choice",
    ),
    _b(
        id="tool_choice_required",
        group="tool_choice",
        title='tool_choice "required" is sent to the provider',
        source="Seed",
        quote='"required" (must pick a function)',
        exercised="a request sent with tool_choice required",
        asserted="an expected request selecting it naming tool_choice",
    ),
    _b(
        id="tool_choice_none",
        group="tool_choice",
        title='tool_choice "none" is sent to the provider',
        source="Seed",
        quote='"none" (text only)',
        exercised="a request sent with tool_choice none",
        asserted="an expected request selecting it naming tool_choice",
    ),
    _b(
        id="tool_choice_forced",
        group="tool_choice",
        title="a forced function choice is sent to the provider",
        source="Seed",
        quote='{"type": "function", "name": "X"} to force one function',
        exercised="a request sent with tool_choice {type: function, name: X}",
        asserted="an expected request selecting it naming tool_choice",
    ),
    _b(
        id="parallel_tool_calls_false",
        group="tool_choice",
        title="parallel_tool_calls=False is sent to the provider",
        source="Seed",
        quote="parallel_tool_calls=False forbids several picks in one round where the provider "
        "supports the knob.",
        exercised="a request sent with parallel_tool_calls false",
        asserted="an expected request selecting it naming parallel_tool_calls",
    ),
    # ------------------------------------------------------------------ stops
    _b(
        id="error_stop",
        group="stops",
        title="stop_reason error ends the run at once",
        source="Seed",
        quote='message.stop_reason in ("error", "aborted") → end the stream immediately, no '
        "more looping.",
        exercised="a reply with stop_reason error",
        asserted="an expected message_end on that reply naming stop_reason, error or "
        "error_reason, an expected agent_end on its run naming reason, or expect.raises when "
        "it is the outer run",
    ),
    _b(
        id="aborted_stop",
        group="stops",
        title="stop_reason aborted ends the run at once",
        source="Seed",
        quote='message.stop_reason in ("error", "aborted") → end the stream immediately, no '
        "more looping.",
        exercised="a reply with stop_reason aborted",
        asserted="an expected message_end on that reply naming stop_reason, an expected "
        "agent_end on its run naming reason, or expect.raises when it is the outer run",
    ),
    _b(
        id="run_aborted",
        group="stops",
        title="an abort between model calls ends the run; exec raises",
        source="DESIGN",
        quote="A run that ends on `stop_reason` error raises an error that carries the "
        "provider's message; one that ends aborted raises a cancellation error.",
        exercised="a run ends with agent_end reason aborted while no reply of it has stop_reason "
        "aborted (an abort after a tool call or between rounds)",
        asserted="an expected agent_end on that run naming reason, an expected "
        "tool_execution_end on a call the abort left unrun naming skipped or result, or "
        "expect.raises when it is the outer run",
    ),
    _b(
        id="length_stop",
        group="stops",
        title="stop_reason length: the loop still branches on the tool calls",
        source="Seed",
        quote="The framework never decides for the model; it only parses the output and "
        "branches on it.",
        exercised="a reply with stop_reason length",
        asserted="an expected message_end on that reply naming stop_reason",
    ),
    # ------------------------------------------------------------------ cap
    _b(
        id="cap_hit",
        group="cap",
        title="the round cap ends the run as a normal finish",
        source="Seed",
        quote="max_iterations caps the loop's rounds",
        exercised="a run ends with agent_end reason cap",
        asserted="an expected agent_end on that run naming reason, expect.model_calls, "
        "expect.counts of turn_start or turn_end, or expect.result when it is the outer run",
    ),
    _b(
        id="cap_floor_at_one",
        group="cap",
        title="max_iterations below 1 still runs one round",
        source="Seed",
        quote="the effective cap is min(50, max_iterations), floored at 1",
        exercised="an exec given max_iterations of 0 or less makes a model call",
        asserted="an expected agent_end on that run naming reason or round, expect.model_calls, "
        "or expect.counts of turn_start or turn_end",
    ),
    _b(
        id="hard_cap_50",
        group="cap",
        title="no run makes more than 50 model calls",
        source="Seed",
        quote="hard cap MAX_INNER_ITERATIONS against idle spinning; treated as a normal finish, "
        "returns what exists",
        exercised="a run ends with reason cap after 50 model calls",
        asserted="an expected agent_end on that run naming reason or round, expect.model_calls, "
        "or expect.counts of turn_start or turn_end",
    ),
    # ------------------------------------------------------------------ steering, follow-ups
    _b(
        id="steering_skip",
        group="steering",
        title="steering mid-batch skips the remaining calls",
        source="Seed",
        quote="If get_steering_messages returns user-queued messages mid-way, the remaining "
        'unexecuted ToolCalls are marked by _skip_tool_call as "Skipped due to queued user '
        'message" and the user messages take priority.',
        exercised="a skipped tool_execution_end in a run that goes on to another round",
        asserted="an expected tool_execution_end on a skipped call naming skipped or result",
    ),
    _b(
        id="steering_after_text",
        group="steering",
        title="steering queued after a text reply keeps the loop alive",
        source="Seed",
        quote="One continuation condition is easy to miss: the inner while also runs on "
        "pending_messages, so queued user (steering) messages keep the loop alive even after a "
        "pure-text reply.",
        exercised="a round of the outer run that follows a text-only reply opens with one of "
        "the scenario's steering messages",
        asserted="an expected message_end on the steering message naming text, "
        "the request of that round selected and its messages, last_message or message_count "
        "named, or expect.model_calls",
    ),
    _b(
        id="steering_after_round",
        group="steering",
        title="steering queued as a tool round ends enters the next round, nothing skipped",
        source="Seed",
        quote="_run_loop has an inner while has_more_tool_calls or pending_messages",
        exercised="a round of the outer run that follows a tool round in which nothing was "
        "skipped opens with one of the scenario's steering messages",
        asserted="an expected message_end on the steering message naming text, "
        "the request of that round selected and its messages, last_message or message_count "
        "named, or expect.model_calls",
    ),
    _b(
        id="follow_up_pass",
        group="follow-ups",
        title="a follow-up message starts another pass",
        source="Seed",
        quote="After the inner loop exits, get_follow_up_messages may supply follow-up messages "
        "which become pending_messages for another round",
        exercised="a round of the outer run opens with one of the scenario's follow-up messages",
        asserted="an expected message_end on the follow-up naming text, "
        "the request of that round selected and its messages, last_message or message_count "
        "named, or expect.model_calls",
    ),
    # ------------------------------------------------------------------ nesting
    _b(
        id="nested_exec",
        group="nested",
        title="a tool body that calls exec opens a loop one level deeper",
        source="Seed",
        quote="if that function body calls runtime.exec again, another layer of the same "
        "picking loop opens.",
        exercised="any event at depth 1 or more",
        asserted="an expected event matched to an event at depth 1 or more naming depth, or an "
        "expected request selecting a nested request by depth",
    ),
    _b(
        id="nested_inherits_tools",
        group="nested",
        title="a nested exec without tools= inherits the outer tools= list",
        source="Seed",
        quote="A nested exec inside a tool body inherits the outer call's tools= list (via the "
        "_current_tools contextvar).",
        exercised="a nested exec given neither tools nor toolset (a scenario tool's exec:) "
        "under an exec that gave a tools list",
        asserted="an expected request of the nested exec naming tools",
    ),
    _b(
        id="nested_opt_out",
        group="nested",
        title='a nested exec with tools=[] or toolset="none" offers nothing',
        source="Seed",
        quote='A call that genuinely wants no tools opts out explicitly with toolset="none" (or '
        "tools=[])",
        exercised="a nested exec offers no tools (its exec: gives tools: [] or toolset: none)",
        asserted="an expected request of the nested exec naming tools",
    ),
    # ------------------------------------------------------------------ deferred, choices
    _b(
        id="deferred_tool_loaded",
        group="deferred",
        title="a deferred tool is loaded by tool_search and then called",
        source="Seed",
        quote="calling-unification.md covers the design of the whole function-calling framework "
        "— the @function / @agentic_function decorators, the shared registry, 6-layer gating, "
        "deferred loading, etc.",
        exercised="after a tool_search call that succeeded, a call that succeeds to a tool its "
        "request did not offer",
        asserted="an expected tool_execution_end on that call or on the tool_search call naming "
        "is_error or result, or an expected request of that run after the load naming tools",
    ),
    _b(
        id="choices_pick",
        group="choices",
        title="exec(choices=...) ends with one pick, which is the result",
        source="Seed",
        quote="For a forced, structured decision ending (rather than per-round control), "
        "exec(choices=...) remains the richer tool",
        exercised="the scenario's exec with choices: returns",
        asserted="expect.result",
    ),
    _b(
        id="choices_reask",
        group="choices",
        title="a malformed pick is re-asked once",
        source="Seed",
        quote="For a forced, structured decision ending (rather than per-round control), "
        "exec(choices=...) remains the richer tool — see next-step decision.",
        exercised="the outer run of an exec with choices: has a round opened by a message that "
        "is neither the prompt nor a steering or follow-up message (the re-ask)",
        asserted="an expected message_end on the re-ask naming text, the request of that round "
        "selected and its messages, last_message or message_count named, or expect.raises",
    ),
)
"""Every behaviour, in table order."""

_BY_ID = {b.id: b for b in CATALOGUE}


def behaviour(id: str) -> Behaviour:
    """The behaviour with this id; :class:`UnknownBehaviourError` names the closest ids."""
    try:
        return _BY_ID[id]
    except KeyError:
        raise UnknownBehaviourError(_unknown(id)) from None


def _unknown(id: str) -> str:
    close = difflib.get_close_matches(id, list(_BY_ID), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return (
        f"unknown behaviour id {id!r}{hint} (the catalogue: `openprogram-sim run --coverage` "
        f"lists all {len(CATALOGUE)}, docs/coverage.md explains each)"
    )


def parse_ids(values: Iterable[str]) -> list[str]:
    """Ids from ``--coverage-require`` values (each may hold several, comma-separated), in
    the order given, without repeats; raises :class:`UnknownBehaviourError` on the first id
    the catalogue lacks."""
    out: list[str] = []
    for value in values:
        for part in value.split(","):
            name = part.strip()
            if name and name not in out:
                behaviour(name)
                out.append(name)
    return out


def catalogue_markdown() -> str:
    """The catalogue as docs/coverage.md shows it: a table of every id, then what exercises
    and what asserts each (a test keeps the file equal to this)."""
    lines = ["| id | behaviour | from |", "|---|---|---|"]
    for b in CATALOGUE:
        quote = b.quote.replace("|", "\\|")
        lines.append(f'| `{b.id}` | {b.title} | {b.source}: "{quote}" |')
    for b in CATALOGUE:
        lines += [
            "",
            f"### `{b.id}`",
            "",
            f"- exercised: {b.exercised}",
            f"- asserted: {b.asserted}",
        ]
    return "\n".join(lines) + "\n"
