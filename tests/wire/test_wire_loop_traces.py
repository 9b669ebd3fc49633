"""The key check of the wire simulator: a loop run through each real adapter, served by a
:class:`ScriptedWire` over ``httpx2.MockTransport``, produces the same trace as the same
turns played by :class:`ScriptedModel`.

Every scenario of the library (``scenarios/``) is run both ways, for all five APIs,
streaming and not. The library covers two-round tool loops, several picks in a round,
unknown tools, invalid arguments, tools that raise, nested exec, steering skips, follow-ups,
caps, tool_choice, stops (error, length), deferred loading and exec(choices=).

Normalizations (what legitimately differs between the two runs, and only that):

1. ``tool_call_id`` values are renamed by order of first appearance (``id1``, ``id2``...)
   in both traces before comparing. The scripted model numbers calls ``call_1``,
   ``call_2``...; real APIs name them (``call_wire3_0``, ``toolu_wire3_0``...), and the
   Gemini API sends no id at all, so its adapter makes one up. The renaming still checks
   that the same calls share the same id (start, end and tool-result message).
2. Error texts: the adapter reports the provider's message inside its own wording
   ("Anthropic stream error (api_error): <message>", "OpenAI API error: HTTP 500
   (server_error): <message>"). Each assistant ``error`` must *contain* the scripted text
   and is then replaced by it, also where that text travels on (a nested exec's error
   becomes the outer tool's ``result``). The error exec raises must contain the scripted
   one.
3. ``message_update`` events are not in either trace (TraceRecorder leaves them out by
   default): their number depends on how each wire chunks a reply.
4. The scripted side plays each turn as the wire can carry it (``wire.as_carried``). This
   changes one thing that reaches a trace: an error stop sent as one JSON body (the
   non-streaming endpoints) is an HTTP error status, which cannot also deliver the text
   and tool calls the turn had before failing, so the errored message is empty on both
   sides. (Usage counts the API has no field for also differ, but no trace shows usage.)
   Streaming runs deliver such an error inside the stream, after the content, and are
   compared with the turn as written.

5. An error stop's details (``error_reason``, ``error_status``, ``retryable``,
   ``retry_after``) are left out of the comparison: the scripted side reports what the turn
   says, an adapter what the wire's status and headers say (a 500 is a retryable ``server``
   error). ``tests/providers/test_error_details.py`` checks each adapter's mapping.

Turns a wire cannot express (``stop_reason: aborted``, ``fault: raise/hang``, arguments
that are not a JSON object on wires that carry an object, and stop values Responses and
Gemini have no word for) are checked separately: encoding them raises ``WireEncodeError``
with a reason from that known list, so no scenario is silently left out.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from wire_support import MODE_IDS, MODES, make_provider

from openprogram_sim.models import ScriptedModel, Turn, TurnToolCall
from openprogram_sim.play import arun_scenario, build_model
from openprogram_sim.scenario import Scenario, discover, load_scenario
from openprogram_sim.wire import ScriptedWire, WireEncodeError, as_carried, encode

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"
SCENARIOS = {str(p.relative_to(LIBRARY)): load_scenario(p) for p in discover([LIBRARY])}

# The runs the brief names, each by a scenario file of the library.
NAMED = {
    "two-round tool loop": "basics/pick_again_on_results.yaml",
    "several picks in a round": "basics/several_picks_in_order.yaml",
    "unknown tool": "tools_errors/unknown_tool.yaml",
    "invalid arguments": "tools_errors/invalid_arguments.yaml",
    "a tool that raises": "tools_errors/tool_raises.yaml",
    "nested exec": "nested/nested_inherits_tools.yaml",
    "steering skip": "steering/after_tool_skips_remaining.yaml",
}

KNOWN_UNENCODABLE = (
    "a mid-stream abort sees what each API's chunking streamed first",
    "stop_reason 'aborted' cannot be encoded",
    "fault 'raise' is a scripted-provider behaviour",
    "fault 'hang' is a scripted-provider behaviour",
    "carries tool-call arguments as a JSON object",
    "has no tool-use stop value",
)


def _turns(scenario: Scenario) -> list[Turn]:
    return build_model(scenario).turns


def _unencodable(scenario: Scenario, api: str, stream: bool) -> str | None:
    if scenario.abort is not None and scenario.abort.during_turn is not None:
        # the abort fires after a reply's first streamed piece, and each API (streamed or
        # not) delivers a different first piece: the partial text cannot be compared
        return "a mid-stream abort sees what each API's chunking streamed first"
    for turn in _turns(scenario):
        try:
            encode(api, turn, stream=stream)
        except WireEncodeError as exc:
            return str(exc)
    return None


CASES = [
    pytest.param(name, api, stream, id=f"{name}-{mode}")
    for name, scenario in SCENARIOS.items()
    for (api, stream), mode in zip(MODES, MODE_IDS, strict=True)
    if _unencodable(scenario, api, stream) is None
]
SKIPPED = [
    pytest.param(name, api, stream, id=f"{name}-{mode}")
    for name, scenario in SCENARIOS.items()
    for (api, stream), mode in zip(MODES, MODE_IDS, strict=True)
    if _unencodable(scenario, api, stream) is not None
]


_DETAILS = ("error_reason", "error_status", "retryable", "retry_after")


def normalize(
    trace: list[dict[str, Any]], scripted_errors: list[str] | None = None
) -> list[dict[str, Any]]:
    """``trace`` with the normalizations of the module docstring applied. With
    ``scripted_errors`` (the scripted run's error texts, in order), each of this trace's
    assistant error texts must contain its scripted twin and is replaced by it, wherever
    it appears (a nested exec's error also becomes the outer tool's result text)."""
    ids: dict[str, str] = {}
    swaps: list[tuple[str, str]] = []
    if scripted_errors is not None:
        mine = _scripted_errors(trace)
        assert len(mine) == len(scripted_errors), (mine, scripted_errors)
        for have, want in zip(mine, scripted_errors, strict=True):
            assert want in have, (
                f"the adapter's error text {have!r} does not carry the scripted one {want!r}"
            )
            swaps.append((have, want))
    out = []
    for entry in trace:
        entry = {k: v for k, v in entry.items() if k not in _DETAILS}
        if "tool_call_id" in entry:
            entry["tool_call_id"] = ids.setdefault(entry["tool_call_id"], f"id{len(ids) + 1}")
        for key in ("error", "result", "text"):
            for have, want in swaps:
                if isinstance(entry.get(key), str):
                    entry[key] = entry[key].replace(have, want)
        out.append(entry)
    return out


def _scripted_errors(trace: list[dict[str, Any]]) -> list[str]:
    return [
        e["error"]
        for e in trace
        if e["type"] == "message_end" and e.get("role") == "assistant" and e.get("error")
    ]


async def _both(
    scenario: Scenario, api: str, stream: bool, wire_turns: list[Turn] | None = None
) -> tuple[Any, Any, Any, Any]:
    # Normalization 4: the scripted model plays each turn as the wire carries it.
    model = ScriptedModel([as_carried(api, t, stream=stream) for t in _turns(scenario)])
    scripted = await arun_scenario(scenario, model)
    wire = ScriptedWire(wire_turns if wire_turns is not None else _turns(scenario))
    provider = make_provider(api, wire, stream=stream)
    try:
        adapter = await arun_scenario(scenario, provider)
    finally:
        await provider.client.aclose()
    return scripted, model, adapter, wire


def _compare(
    scenario: Scenario, api: str, stream: bool, wire_turns: list[Turn] | None = None
) -> None:
    scripted, model, adapter, wire = asyncio.run(_both(scenario, api, stream, wire_turns))
    assert wire.errors == [], wire.errors
    assert [r.api for r in wire.requests] == [api] * model.calls
    assert all(r.stream is stream for r in wire.requests)
    assert len(wire.unconsumed) == len(model.unconsumed)

    want = normalize(scripted.trace)
    got = normalize(adapter.trace, _scripted_errors(scripted.trace))
    for i, (w, g) in enumerate(zip(want, got, strict=False)):
        assert g == w, f"trace entry #{i} differs:\n  scripted: {w}\n  {api}:  {g}"
    assert len(got) == len(want), f"trace lengths differ: scripted {len(want)}, {api} {len(got)}"

    assert adapter.result == scripted.result
    assert type(adapter.error) is type(scripted.error)
    if scripted.error is not None:
        assert str(scripted.error) in str(adapter.error)


@pytest.mark.parametrize(("scenario_name", "api", "stream"), CASES)
def test_adapter_trace_equals_scripted_trace(scenario_name: str, api: str, stream: bool) -> None:
    _compare(SCENARIOS[scenario_name], api, stream)


@pytest.mark.parametrize(("scenario_name", "api", "stream"), SKIPPED)
def test_runs_left_out_are_the_unencodable_ones(scenario_name: str, api: str, stream: bool) -> None:
    reason = _unencodable(SCENARIOS[scenario_name], api, stream)
    assert reason is not None
    assert any(known in reason for known in KNOWN_UNENCODABLE), reason


def test_the_named_runs_are_compared_on_every_wire() -> None:
    compared = {(c.values[0], c.values[1], c.values[2]) for c in CASES}
    for label, name in NAMED.items():
        assert name in SCENARIOS, f"{label}: {name} is not in the library"
        for api, stream in MODES:
            assert (name, api, stream) in compared, f"{label} is not run on {api} {stream}"


def test_the_normalization_keeps_id_identity() -> None:
    # Renaming ids must not hide a mix-up: two calls sharing an id stay distinguishable.
    trace = [
        {"type": "tool_execution_start", "tool_call_id": "a"},
        {"type": "tool_execution_start", "tool_call_id": "b"},
        {"type": "tool_execution_end", "tool_call_id": "a"},
    ]
    swapped = [dict(trace[0]), dict(trace[1]), {"type": "tool_execution_end", "tool_call_id": "b"}]
    assert normalize(trace) != normalize(swapped)


@pytest.mark.parametrize("change", ["text", "arguments", "order"])
def test_a_different_wire_script_is_caught(change: str) -> None:
    # Negative control: the comparison is not vacuous.
    scenario = SCENARIOS[NAMED["several picks in a round"]]
    turns = [Turn.coerce(t) for t in _turns(scenario)]
    first, last = turns[0], turns[-1]
    if change == "text":
        turns[-1] = Turn(text=(last.text or "") + "!")
    elif change == "arguments":
        calls = [TurnToolCall(c.name, {"q": "other"}) for c in first.tool_calls]
        turns[0] = Turn(tool_calls=calls)
    else:
        turns[0] = Turn(tool_calls=list(reversed(first.tool_calls)))
    with pytest.raises(AssertionError):
        _compare(scenario, "anthropic", True, turns)
