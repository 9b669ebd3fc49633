"""Regression files for a campaign over the user's tools: the one call that broke the tool
contract, replayed alone.

Campaigns over the user's own tools break the *tool contract* rather than the seed's
rules, and the rules do not decide a run of the user's code; their files
(:func:`contract_document`) replay the one call that broke the contract and expect what the
contract says of any tool, never what the tool returned. :func:`fixed_variant` is the same
file with that tool stubbed by one that keeps the contract, which the file must pass.
"""

from __future__ import annotations

import copy
from typing import Any

from openprogram_sim.fuzz._generate import call_entry
from openprogram_sim.fuzz._results import Breach, FuzzFailure
from openprogram_sim.fuzz.tools._target import ToolTarget
from openprogram_sim.play import GRACE_SECONDS

__all__ = [
    "FIXED_RESULT",
    "NOT_JSON",
    "contract_document",
    "fixed_variant",
    "property_document",
]

NOT_JSON = {"$json": False}
"""The matcher of a result that is not one JSON value (``NaN``/``Infinity`` count as JSON, as
Python writes them). The trace keeps a result as the text the model was sent, so a
regression file for a result JSON cannot encode lists, under ``not_events``, this call's
successful result with this matcher, which a failure shows as written."""

_BROKE = {
    "not_json": "returns a value JSON cannot encode",
    "hangs": "does not return within the time limit",
    "escapes": "raises past exec",
    "error_lost": "raises, yet its result is no error",
}

FIXED_RESULT = {"fixed": True}
"""What a tool stubbed as "fixed" returns when a contract regression file is tried on it."""


_NOTES = {
    "not_json": (
        " `{$json: false}` matches a result that is not one JSON value; plain text is not "
        "JSON, so a fix that makes this call return text rather than data fails it too."
    ),
    "blocked": (
        " The call blocked the event loop, so `timeout:` alone cannot stop it: "
        "`openprogram-sim run` and the pytest plugin interrupt a tool still blocking it "
        f"{GRACE_SECONDS:g} s after `timeout:` (SIGALRM) and fail the run as timed out, "
        "naming the tool (on POSIX, on the main thread, with SIGALRM not otherwise in use; "
        "elsewhere the run waits for the tool: see openprogram's docs/limits.md)."
    ),
}


def _note(breach: Breach) -> str:
    return "blocked" if breach.kind == "hangs" and breach.blocked else breach.kind


def contract_document(
    target: ToolTarget,
    breach: Breach,
    violations: list[str],
    *,
    nested_runs: int,
    limit: float,
    seed: int | None = None,
) -> dict[str, Any]:
    """A scenario file that replays the one call that broke the tool contract (``breach``,
    with its call), at depth 0, naming the user's tools by import path (``target``). The
    script is that call, one text reply per nested run the tool makes (``nested_runs``), and
    a final answer.

    Its expectations are the contract, not the failing run: exec returns the final answer
    and raises nothing, the call gets a result and the run stops (``escapes``); plus, for
    ``not_json``, the call's successful result is JSON text (:data:`NOT_JSON`), and for
    ``hangs``, the run's ``timeout:`` is the campaign's limit (a call that blocks the event
    loop is interrupted by ``run_scenario``'s SIGALRM deadline, which the description says)."""
    call = breach.call
    assert call is not None, "a contract file replays a call"
    name = call.tool
    data: dict[str, Any] = {
        "scenario": f"fuzz regression: {name} {_BROKE[breach.kind]}",
        "description": (
            f"Found by `openprogram-sim fuzz` over {target.label}"
            + (f" with seed {seed}" if seed is not None else "")
            + f". The call that broke the tool contract ({breach.kind}), replayed alone:\n"
            + "\n".join(f"- {v}" for v in violations)
            + "\nThe expectations are the contract every tool keeps, not the failing run: a "
            "tool that keeps it passes." + _NOTES.get(_note(breach), "")
        ),
        "tags": ["regression", "fuzz", "contract"],
        **target.scenario_refs(),
    }
    gated = target.get(name).requires_env
    if gated:
        data["env"] = {v: target.env[v] for v in gated}
    if breach.kind == "hangs":
        data["timeout"] = limit
    data["exec"] = {"content": f"Call {name}.", "tools": [name]}
    nested = [{"text": f"Done (nested run {i + 1})."} for i in range(nested_runs)]
    data["model"] = [{"tool_calls": [call_entry(name, call.args)]}, *nested, {"text": "Done."}]
    end = {"depth": 0, "tool_call_id": "call_1", "tool_name": name}
    expect: dict[str, Any] = {
        "raises": False,
        "result": "Done.",
        "events": [{"tool_execution_end": end}, {"agent_end": {"depth": 0, "reason": "stop"}}],
    }
    if breach.kind == "not_json":
        result = dict(NOT_JSON)
        expect["not_events"] = [
            {"tool_execution_end": {"tool_call_id": "call_1", "is_error": False, "result": result}}
        ]
    data["expect"] = expect
    return data


def fixed_variant(document: dict[str, Any], target: ToolTarget, tool: str) -> dict[str, Any] | None:
    """``document`` with ``tool`` stubbed by a tool that keeps the contract (same schema;
    returns :data:`FIXED_RESULT` at once, or, for a tool that runs one nested exec, runs one
    that offers nothing), to check that the file passes on a fix; None when the file's
    script gives the tool more than one nested run (no stub plays that)."""
    nested = len(document["model"]) - 2
    info = target.get(tool)
    stub: dict[str, Any] = {"parameters": info.parameters}
    if nested == 0:
        stub["returns"] = FIXED_RESULT
    elif nested == 1:
        stub["exec"] = {"content": "fixed", "toolset": "none"}
    else:
        return None
    fixed = copy.deepcopy(document)
    fixed.setdefault("tools", {})[tool] = stub
    return fixed


def property_document(
    target: ToolTarget,
    failure: FuzzFailure,
    expect: dict[str, Any],
    *,
    seed: int | None = None,
) -> dict[str, Any]:
    """A scenario file for a run that broke the user's own properties (``fuzz --properties``):
    the shrunk scenario, naming the user's tools by import path, with ``expect`` (the rules
    it broke under ``properties:``, a missed ``trajectory:``) as its expectations.

    The script is made to play out as a file: the turns the run did not reach are dropped,
    and so are steering entries whose point it did not reach; a run that called the model
    past its script gets the scripted model's exhaustion as a ``fault: raise`` turn. Then
    ``raises:`` says how the scripted model ended the outer run (an error or aborted stop
    raises), which the loop decides from the script, not from your tools. Nothing of what
    your tools returned is expected, so a fix that keeps the rules passes."""
    data = {k: v for k, v in failure.scenario.items() if k not in ("scenario", "description")}
    trace = failure.trace
    model = list(data.get("model", []))
    if failure.model_calls < len(model):
        model = model[: failure.model_calls]
    elif failure.model_calls > len(model):
        model.append({"fault": "raise", "error": "the model had no scripted turn left"})
    data["model"] = model
    tools_ended = sum(1 for e in trace if e["type"] == "tool_execution_end")
    rounds = sum(1 for e in trace if e["type"] == "turn_end" and e["depth"] == 0)
    steering = [
        s
        for s in data.pop("steering", [])
        if (s.get("after_tool") or 0) <= tools_ended and (s.get("after_round") or 0) <= rounds
    ]
    if steering:
        data["steering"] = steering
    end: dict[str, Any] = next(
        (e for e in reversed(trace) if e["type"] == "agent_end" and e["depth"] == 0), {}
    )
    raised = {"error": "ModelError", "aborted": "RunAbortedError"}.get(str(end.get("reason")))
    broke = []
    if expect.get("properties"):
        names = [next(iter(r)) for r in expect["properties"]]
        broke.append(f"breaks your {', '.join(names)} rule{'s' if len(names) > 1 else ''}")
    if "trajectory" in expect:
        broke.append("misses the trajectory")
    head = {
        "scenario": f"fuzz regression: a run over {target.label} {' and '.join(broke)}",
        "description": (
            f"Found and shrunk by `openprogram-sim fuzz --properties` over {target.label}"
            + (f" with seed {seed}" if seed is not None else "")
            + ". Your properties that the run broke:\n"
            + "\n".join(f"- {v}" for v in failure.violations)
            + "\nThe expectations are those properties, not the failing run: once your tools "
            "keep them, the file passes."
        ),
        "tags": ["regression", "fuzz", "properties"],
    }
    expected: dict[str, Any] = {"raises": {"type": raised} if raised else False, **expect}
    return {**head, **data, "expect": expected}
