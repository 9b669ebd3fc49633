"""Writing a shrunk failing case as a scenario file that reproduces it.

The file is the generated scenario with the model script trimmed to the turns the run
asked for (a call past the script becomes an explicit ``fault: raise`` turn), and an
``expect:`` that encodes the invariants the loop must keep on that script, derived from
what the *model* said (which does not depend on the loop under test):

- every tool call of a reply that is not an error/aborted stop gets its
  ``tool_execution_end`` and toolResult ``message_end`` (by call id, in call order), and
  its round's ``turn_end`` counts them;
- one ``agent_end`` per run (``counts``), and ``agent_end`` closes the outer run;
- no skipped result in a scenario without steering (``not_events``);
- exec raises exactly when the outer run's last reply was an error/aborted stop.

A correct loop passes such a file; the loop that broke an invariant fails it, so
``openprogram-sim run`` on it is the reproduction.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import yaml

from openprogram_sim.scenario import Scenario

__all__ = ["derive_expect", "regression_document", "write_regression"]

EXHAUSTED_TURN = {"fault": "raise", "error": "the model had no scripted turn left"}


def _script(scenario: Scenario, calls: int) -> list[dict[str, Any]]:
    """The turns the run consumed, in call order (calls past the script made explicit)."""
    turns = [t.model_dump(exclude_defaults=True) for t in scenario.model]  # type: ignore[union-attr]
    consumed = turns[:calls]
    consumed += [dict(EXHAUSTED_TURN) for _ in range(calls - len(consumed))]
    return consumed


def _call_ids(script: list[dict[str, Any]]) -> list[list[tuple[str, str]]]:
    """Per model call, its tool calls as ``(name, id)`` (the scripted model numbers the
    calls without an explicit id ``call_1``, ``call_2``, ... in streaming order)."""
    counter = 0
    out: list[list[tuple[str, str]]] = []
    for turn in script:
        calls: list[tuple[str, str]] = []
        for call in turn.get("tool_calls") or []:
            if "name" in call:
                name, given = str(call["name"]), call.get("id")
            else:
                ((name, _),) = call.items()
                given = None
            if given is None:
                counter += 1
                given = f"call_{counter}"
            calls.append((str(name), str(given)))
        out.append(calls)
    return out


class _Deriver:
    """Walks the failing trace and lists, in an order a correct trace also has, the events
    the model's replies require."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.ids = _call_ids(script)
        self.replies = 0
        self.events: list[dict[str, Any]] = []
        self.results = 0
        self.runs = 0
        self.stack: list[dict[str, Any]] = []

    def walk(self, trace: list[dict[str, Any]]) -> None:
        # The trace may be broken (that is why we are here): events go to the open run of
        # their depth, and an agent_end only closes the innermost run if depths agree.
        for e in trace:
            kind, depth = e["type"], e["depth"]
            if kind == "agent_start":
                self.runs += 1
                self.stack.append({"depth": depth, "calls": [], "done": 0, "stop": None})
                continue
            if kind == "message_end" and e["role"] == "assistant":
                self.replies += 1
            frame = next((f for f in reversed(self.stack) if f["depth"] == depth), None)
            if frame is None or (kind == "agent_end" and frame is not self.stack[-1]):
                continue
            self._event(kind, e, frame)

    def _emit(self, frame: dict[str, Any], upto: int, round_: int) -> None:
        depth = frame["depth"]
        for name, call_id in frame["calls"][frame["done"] : upto]:
            where = {"depth": depth, "round": round_}
            self.events.append(
                {"tool_execution_end": {**where, "tool_name": name, "tool_call_id": call_id}}
            )
            self.events.append(
                {"message_end": {**where, "role": "toolResult", "tool_call_id": call_id}}
            )
        frame["done"] = max(frame["done"], upto)

    def _position(self, frame: dict[str, Any], call_id: str) -> int | None:
        ids = [c for _, c in frame["calls"]]
        return ids.index(call_id) if call_id in ids else None

    def _event(self, kind: str, e: dict[str, Any], frame: dict[str, Any]) -> None:
        if kind == "message_end" and e["role"] == "assistant":
            reply = self.replies - 1  # counted by walk()
            calls = self.ids[reply] if reply < len(self.ids) else []
            frame["stop"] = e.get("stop_reason")
            frame["calls"] = [] if frame["stop"] in ("error", "aborted") else calls
            frame["done"] = 0
            self.results += len(frame["calls"])
        elif kind == "tool_execution_start":
            at = self._position(frame, e["tool_call_id"])
            if at is not None:
                self._emit(frame, at, e["round"])
        elif kind == "tool_execution_end":
            at = self._position(frame, e["tool_call_id"])
            if at is not None:
                self._emit(frame, at + 1, e["round"])
        elif kind == "turn_end":
            self._emit(frame, len(frame["calls"]), e["round"])
            self.events.append(
                {
                    "turn_end": {
                        "depth": frame["depth"],
                        "round": e["round"],
                        "tool_results": len(frame["calls"]),
                    }
                }
            )
        elif kind == "agent_end":
            fields: dict[str, Any] = {"depth": frame["depth"]}
            if frame["stop"] in ("error", "aborted"):
                fields["reason"] = frame["stop"]
            self.events.append({"agent_end": fields})
            self.stack.pop()


def derive_expect(scenario: Scenario, trace: list[dict[str, Any]], calls: int) -> dict[str, Any]:
    """The ``expect:`` a correct loop meets on ``scenario`` (its script trimmed to
    ``calls`` model calls), derived from the model's replies in ``trace``."""
    script = _script(scenario, calls)
    deriver = _Deriver(script)
    deriver.walk(trace)
    outer = [e for e in trace if e["type"] == "message_end" and e["depth"] == 0]
    last = next((e for e in reversed(outer) if e["role"] == "assistant"), None)
    failed = last is not None and last.get("stop_reason") in ("error", "aborted")
    expect: dict[str, Any] = {"raises": bool(failed)}
    if last is not None and not failed:
        expect["result"] = last.get("text", "")
    expect["model_calls"] = calls
    expect["events"] = deriver.events
    expect["counts"] = {
        "agent_start": deriver.runs,
        "agent_end": deriver.runs,
        "turn_start": deriver.replies,
        "turn_end": deriver.replies,
        "tool_execution_start": deriver.results,
        "tool_execution_end": deriver.results,
    }
    if not scenario.steering:
        expect["not_events"] = [{"tool_execution_end": {"skipped": True}}]
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


_Dumper.add_representer(str, _str)


def regression_document(
    scenario: Scenario,
    trace: list[dict[str, Any]],
    calls: int,
    violations: list[str],
    *,
    seed: int | None = None,
) -> dict[str, Any]:
    """The scenario file's content (a dict in the schema's key order)."""
    data = scenario.model_dump(exclude_defaults=True, exclude={"path", "expect"})
    data["scenario"] = f"fuzz regression: {_title(violations[0])}" if violations else "fuzz case"
    found = f" with seed {seed}" if seed is not None else ""
    data["description"] = (
        f"Found and shrunk by `openprogram-sim fuzz`{found}. Invariants violated:\n"
        + "\n".join(f"- {v}" for v in violations)
        + "\nThe expectations encode the invariants on this script: a correct loop passes."
    )
    data["tags"] = ["regression", "fuzz"]
    data["model"] = _script(scenario, calls)
    data["expect"] = derive_expect(scenario, trace, calls)
    order = ["scenario", "description", "tags", "system_prompt", "tools", "toolsets", "exec"]
    order += ["model", "steering", "follow_ups", "expect"]
    return {k: data[k] for k in order if k in data}


def write_regression(
    directory: str | Path,
    scenario: Scenario,
    trace: list[dict[str, Any]],
    calls: int,
    violations: list[str],
    *,
    seed: int | None = None,
) -> Path:
    """Write the regression file under ``directory`` (created if needed); returns its path.
    The name carries a digest of the content, so the same case is written once."""
    document = regression_document(scenario, trace, calls, violations, seed=seed)
    text = yaml.dump(
        document,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=None,
        width=100,
    )
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fuzz_{digest}.yaml"
    path.write_text(text, encoding="utf-8")
    return path
