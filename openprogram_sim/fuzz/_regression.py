"""Writing a shrunk failing case as a scenario file whose ``expect:`` comes from the rules.

A regression file must fail against the loop that broke an invariant and pass against a
correct one, so nothing in it is copied from the failing run: the script, the steering
entries and every expectation are worked out from the scenario alone by
:func:`openprogram_sim.fuzz._rules.predict`, which applies the seed's rules to the
scenario's own script and settings (see that module for the rules). From the prediction:

- ``model``: the turns a correct loop plays, in call order (a call past the end of the
  generated script is written as a ``fault: raise`` turn, the crash the scripted model's
  exhaustion is); a loop that calls the model more often fails on the missing turn, one
  that calls it less often on the turns left over;
- ``steering``: only the entries whose point a correct run reaches;
- ``raises``/``result``: exec raises ``ModelError``/``RunAbortedError`` exactly when the
  outer run ends on an ``error``/``aborted`` stop, else returns the last reply's text;
- ``model_calls``: every depth, under each run's cap ``max(1, min(50, max_iterations))``
  (50 when not given);
- ``requests``: each model call's depth, round, and the size and last entry of the history
  it is sent (results fed back, one per call, in call order);
- ``events`` (``ordered``): each reply, then one ``tool_execution_end`` and one toolResult
  ``message_end`` per call of every reply that is not an ``error``/``aborted`` stop, in
  call order with ids paired, skipped ones (``skipped: true`` and the seed's text) only
  after a steering point; each ``turn_end`` with its result count, steering and follow-up
  messages where they are delivered, nested runs inside their tool call, and every
  ``agent_end`` with the reason the rules give (stop, error, aborted or cap);
- ``counts``: how many events of each type.

What the rules cannot decide is left out, never filled in from the run: a scenario with
such a part (see :class:`~openprogram_sim.fuzz._rules.UnpredictableScenario`) gets no file.

Campaigns over the user's own tools break the *tool contract* rather than the seed's
rules, and the rules do not decide a run of the user's code; their files
(:func:`contract_document`) replay the one call that broke the contract and expect what the
contract says of any tool, never what the tool returned.
"""

from __future__ import annotations

import copy
import hashlib
import re
from pathlib import Path
from typing import Any

import yaml

from openprogram_sim.fuzz._rules import predict
from openprogram_sim.scenario import Scenario
from openprogram_sim.scenario._runner import _GRACE_SECONDS

__all__ = [
    "NOT_JSON",
    "contract_document",
    "derive_expect",
    "fixed_variant",
    "regression_document",
    "regression_text",
    "write_document",
    "write_regression",
]

_COUNT_ORDER = (
    "agent_start",
    "turn_start",
    "message_start",
    "message_end",
    "tool_execution_start",
    "tool_execution_end",
    "turn_end",
    "agent_end",
)


def derive_expect(scenario: Scenario) -> dict[str, Any]:
    """The ``expect:`` a correct loop meets on ``scenario``, from the seed's rules alone
    (raises :class:`~openprogram_sim.fuzz.UnpredictableScenario` when they do not decide
    the run). It describes the run; :func:`regression_document` also trims the script to
    the turns played, so that the file passes as a whole."""
    p = predict(scenario)
    expect: dict[str, Any] = {"raises": {"type": p.raises} if p.raises else False}
    if p.result is not None:
        expect["result"] = p.result
    expect["model_calls"] = p.model_calls
    expect["requests"] = p.requests
    expect["events"] = p.events
    expect["counts"] = {k: p.counts[k] for k in _COUNT_ORDER}
    return expect


def _title(violation: str, limit: int = 72) -> str:
    text = re.sub(r"^#\d+ ", "", violation).split(" (")[0]
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks, the way a person writes them."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value and value.strip() == value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


class _Line(dict[str, Any]):
    """A mapping written on one line (an expected event, a request)."""


def _line(dumper: yaml.SafeDumper, value: _Line) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", value, flow_style=True)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(_Line, _line)


def regression_document(
    scenario: Scenario, violations: list[str], *, seed: int | None = None
) -> dict[str, Any]:
    """The scenario file's content (a dict in the schema's key order): ``scenario`` with its
    script trimmed to the turns a correct loop plays, the steering entries it reaches, and
    :func:`derive_expect`."""
    prediction = predict(scenario)
    data = scenario.model_dump(exclude_defaults=True, exclude={"path", "expect"})
    data["scenario"] = f"fuzz regression: {_title(violations[0])}" if violations else "fuzz case"
    found = f" with seed {seed}" if seed is not None else ""
    data["description"] = (
        f"Found and shrunk by `openprogram-sim fuzz`{found}. Invariants violated:\n"
        + "\n".join(f"- {v}" for v in violations)
        + "\nThe expectations are the seed's rules applied to this script, not the failing "
        "run: a correct loop passes."
    )
    data["tags"] = ["regression", "fuzz"]
    data["model"] = prediction.script
    steering = [s for i, s in enumerate(data.get("steering", [])) if i in prediction.fired]
    data.pop("steering", None)
    if steering:
        data["steering"] = steering
    data["expect"] = derive_expect(Scenario.model_validate(data))
    order = ["scenario", "description", "tags", "system_prompt", "tools", "toolsets", "exec"]
    order += ["model", "steering", "follow_ups", "expect"]
    return {k: data[k] for k in order if k in data}


def regression_text(document: dict[str, Any]) -> str:
    """The document as the YAML a person would write: one line per expected event and per
    request."""
    expect = dict(document.get("expect") or {})
    expect["events"] = [{k: _Line(v) for k, v in e.items()} for e in expect.get("events", [])]
    expect["requests"] = [_Line(r) for r in expect.get("requests", [])]
    return yaml.dump(
        {**document, "expect": {k: v for k, v in expect.items() if v != []}},
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=None,
        width=200,
    )


def write_regression(
    directory: str | Path,
    scenario: Scenario,
    violations: list[str],
    *,
    seed: int | None = None,
) -> Path:
    """Write the regression file under ``directory`` (created if needed); returns its path.
    The name carries a digest of the content, so the same case is written once."""
    return write_document(directory, regression_document(scenario, violations, seed=seed))


# --------------------------------------------------------------------------- tool contract

NOT_JSON = (
    r"(?(DEFINE)(?<v>(?&o)|(?&a)|(?&s)|(?&n)|true|false|null|NaN|-?Infinity)"
    r"(?<o>\{\s*+(?:(?&s)\s*+:\s*+(?&v)\s*+(?:,\s*+(?&s)\s*+:\s*+(?&v)\s*+)*+)?+\})"
    r"(?<a>\[\s*+(?:(?&v)\s*+(?:,\s*+(?&v)\s*+)*+)?+\])"
    r'(?<s>"(?:[^"\\\x00-\x1f]++|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*+")'
    r"(?<n>-?+(?:0|[1-9]\d*+)(?:\.\d++)?+(?:[eE][+-]?+\d++)?+))"
    r"\A(?!\s*+(?&v)\s*+\Z)"
)
"""A ``$regex`` that matches text which is not one JSON value (the JSON grammar, by the
``regex`` engine's recursion; ``NaN``/``Infinity`` count as JSON, as Python writes them).
The scenario format has no key for "this result is JSON" (the trace keeps a result as the
text the model was sent), so a regression file for a result JSON cannot encode says: this
call's successful result is not text that fails this pattern."""

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
        " The $regex matches text that is not one JSON value (the JSON grammar); text is not "
        "JSON, so a fix that makes this call return text rather than data fails it too."
    ),
    "blocked": (
        " The call blocked the event loop, so `timeout:` alone cannot stop it: "
        "`openprogram-sim run` and the pytest plugin interrupt a tool still blocking it "
        f"{_GRACE_SECONDS:g} s after `timeout:` (SIGALRM) and fail the run as timed out, "
        "naming the tool (on POSIX, on the main thread, with SIGALRM not otherwise in use; "
        "elsewhere the run waits for the tool: see openprogram's docs/limits.md)."
    ),
}


def _note(breach: Any) -> str:
    return "blocked" if breach.kind == "hangs" and breach.blocked else breach.kind


def _call_entry(name: str, arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, str):
        return {"name": name, "arguments": arguments}
    return {name: arguments}


def contract_document(
    target: Any,
    breach: Any,
    violations: list[str],
    *,
    nested_runs: int,
    limit: float,
    seed: int | None = None,
) -> dict[str, Any]:
    """A scenario file that replays the one call that broke the tool contract (``breach``,
    a :class:`~openprogram_sim.fuzz._contract.Breach` with its call), at depth 0, naming the
    user's tools by import path (``target``, a ``ToolTarget``). The script is that call,
    one text reply per nested run the tool makes (``nested_runs``), and a final answer.

    Its expectations are the contract, not the failing run: exec returns the final answer
    and raises nothing, the call gets a result and the run stops (``escapes``); plus, for
    ``not_json``, the call's successful result is JSON text (:data:`NOT_JSON`), and for
    ``hangs``, the run's ``timeout:`` is the campaign's limit (a call that blocks the event
    loop is interrupted by ``run_scenario``'s SIGALRM deadline, which the description says)."""
    call = breach.call
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
    data["model"] = [{"tool_calls": [_call_entry(name, call.args)]}, *nested, {"text": "Done."}]
    end = {"depth": 0, "tool_call_id": "call_1", "tool_name": name}
    expect: dict[str, Any] = {
        "raises": False,
        "result": "Done.",
        "events": [{"tool_execution_end": end}, {"agent_end": {"depth": 0, "reason": "stop"}}],
    }
    if breach.kind == "not_json":
        result = {"$regex": NOT_JSON}
        expect["not_events"] = [
            {"tool_execution_end": {"tool_call_id": "call_1", "is_error": False, "result": result}}
        ]
    data["expect"] = expect
    return data


def fixed_variant(document: dict[str, Any], target: Any, tool: str) -> dict[str, Any] | None:
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


def write_document(directory: str | Path, document: dict[str, Any]) -> Path:
    """Write a regression ``document`` as YAML under ``directory``; returns its path (named by
    a digest of the content)."""
    text = regression_text(document)
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fuzz_{digest}.yaml"
    path.write_text(text, encoding="utf-8")
    return path
