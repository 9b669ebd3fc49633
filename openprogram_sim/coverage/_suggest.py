"""Starter scenarios for the behaviours a suite does not exercise, built on its own tools.

For each behaviour, :func:`suggest` writes a small scenario that exercises it and asserts it
(the expectations the catalogue counts as asserting), on a tool the suite already uses: a
simulated tool is copied with its schema and a plain ``returns:``; the user's own tool is
named with ``python:`` and stubbed (``returns:``/``raises:``), so the starter is
deterministic. The arguments are ones the suite already sends that tool, else built from
its schema. What every starter expects is what the seed's rules say a correct loop does
with its script, never a run.

The YAML is written by the fuzz regression writer (one expected event and one request per
line), so a starter reads like the files ``openprogram-sim fuzz`` writes.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from openprogram_sim.coverage._catalogue import Behaviour, behaviour
from openprogram_sim.coverage._toolbox import python_tools
from openprogram_sim.scenario import Scenario

__all__ = ["SuiteTool", "starter_document", "starter_text", "suggest", "suite_tools"]

TAGS = {
    "basics": "basics",
    "tool errors": "errors",
    "menu": "toolsets",
    "tool_choice": "tool_choice",
    "stops": "stops",
    "cap": "cap",
    "steering": "steering",
    "follow-ups": "follow_ups",
    "nested": "nested",
    "deferred": "deferred",
    "choices": "choices",
}
"""A behaviour group as a scenario tag (lowercase words, usable as pytest markers)."""

STEER = "Stop there; do this instead."
FOLLOW_UP = "One more thing: summarise it."


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteTool:
    """A tool the suite uses, as a starter names it."""

    name: str
    description: str
    parameters: dict[str, Any]
    args: dict[str, Any]
    """Arguments the suite sends it (or built from its schema)."""
    python: str | None = None
    """``pkg.module:attr`` when it is the user's own tool."""

    def entry(self, **behaviour: Any) -> dict[str, Any]:
        """Its ``tools:`` entry, with a body (``returns:`` by default)."""
        body = behaviour or {"returns": f"{self.name} result"}
        if self.python is not None:
            return {"python": self.python, **body}
        spec: dict[str, Any] = {"parameters": self.parameters, **body}
        return {"description": self.description, **spec} if self.description else spec

    def simulated(self, **behaviour: Any) -> dict[str, Any]:
        """A simulated copy with its schema (for what a ``python:`` entry cannot say)."""
        body = behaviour or {"returns": f"{self.name} result"}
        spec = {"description": self.description, "parameters": self.parameters, **body}
        return {k: v for k, v in spec.items() if v != ""}


def _sent_args(scenarios: Sequence[Scenario], name: str) -> dict[str, Any] | None:
    for scenario in scenarios:
        turns = scenario.model if isinstance(scenario.model, list) else []
        for turn in turns:
            for call in turn.tool_calls:
                if "name" in call:
                    called, args = call["name"], call.get("arguments", {})
                else:
                    ((called, args),) = call.items()
                if called == name and isinstance(args, dict):
                    return dict(args)
    return None


def _valid(name: str, schema: dict[str, Any], args: Any) -> bool:
    from openprogram.tools import ArgumentsError, validate_tool_arguments

    try:
        validate_tool_arguments(name, schema, args)
    except ArgumentsError:
        return False
    return True


def _args(scenarios: Sequence[Scenario], name: str, schema: dict[str, Any]) -> dict[str, Any]:
    from openprogram_sim.models import example_arguments

    sent = _sent_args(scenarios, name)
    if sent is not None and _valid(name, schema, sent):
        return sent
    return example_arguments(schema)


def _ref_of(tool: Any, fallback: str) -> str | None:
    """``module:name`` the user's tool is importable as (a registry's tools have none of
    their own in the scenario)."""
    import sys

    if ":" in fallback and not _is_registry(fallback):
        return fallback
    source = getattr(tool, "source", None)
    fn = getattr(source, "__wrapped__", source)
    module, name = getattr(fn, "__module__", None), getattr(fn, "__name__", None)
    if module and name and getattr(sys.modules.get(module), name, None) is source:
        return f"{module}:{name}"
    return None


def _is_registry(ref: str) -> bool:
    from openprogram import ToolRegistry
    from openprogram_sim.scenario._python import import_ref

    try:
        return isinstance(import_ref(ref), ToolRegistry)
    except Exception:
        return False


def suite_tools(scenarios: Iterable[Scenario]) -> list[SuiteTool]:
    """The tools the suite's scenarios use, most used first: simulated tools that return a
    value (each with the definition the suite gives it most often), and the user's own
    tools."""
    loaded = list(scenarios)
    uses: Counter[str] = Counter()
    definitions: dict[str, Counter[str]] = {}
    found: dict[str, SuiteTool] = {}
    for scenario in loaded:
        for name, spec in scenario.tools.items():
            plain = spec.raises is None and spec.exec is None and not spec.defer
            if spec.python is None and plain and name != "tool_search":
                uses[name] += 1
                shape = json.dumps([spec.description, spec.parameters], sort_keys=True)
                definitions.setdefault(name, Counter())[shape] += 1
        for name, tool, ref in python_tools(scenario):
            own = _ref_of(tool, ref)
            if own is None or tool.gates.defer or getattr(tool.source, "agentic", False):
                continue
            uses[name] += 1
            schema = dict(tool.spec.parameters)
            found.setdefault(
                name,
                SuiteTool(
                    name=name,
                    description=tool.spec.description,
                    parameters=schema,
                    args=_args(loaded, name, schema),
                    python=own,
                ),
            )
    for name, shapes in definitions.items():
        if name in found:
            continue
        description, parameters = json.loads(shapes.most_common(1)[0][0])
        found[name] = SuiteTool(
            name=name,
            description=description,
            parameters=parameters,
            args=_args(loaded, name, parameters),
        )
    return [found[name] for name, _ in uses.most_common()]


FALLBACK = SuiteTool(
    name="lookup",
    description="Look a word up.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    args={"q": "tides"},
)
"""The tool a starter uses when the suite has none of its own."""


# --------------------------------------------------------------------------- the starters

_Doc = dict[str, Any]


def _base(t: SuiteTool, content: str, **exec_args: Any) -> _Doc:
    return {"tools": {t.name: t.entry()}, "exec": {"content": content, **exec_args}}


def _call(t: SuiteTool) -> dict[str, Any]:
    return {t.name: copy.deepcopy(t.args)}  # a fresh copy each time: no YAML aliases


def _ended(reason: str, **fields: Any) -> dict[str, Any]:
    return {"agent_end": {"reason": reason, **fields}}


def _text_finish(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc = _base(t, "Say hello.", tools=[t.name])
    doc["model"] = [{"text": "Hello."}]
    doc["expect"] = {"result": "Hello.", "events": [_ended("stop")]}
    return doc


def _tool_round(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc = _base(t, f"Use {t.name}, then answer.", tools=[t.name])
    doc["model"] = [{"tool_calls": [_call(t)]}, {"text": "Done."}]
    last = {"role": "toolResult", "tool_name": t.name, "is_error": False}
    doc["expect"] = {
        "result": "Done.",
        "model_calls": 2,
        "events": [{"tool_execution_end": {"tool_name": t.name, "is_error": False}}],
        "requests": [{"round": 2, "last_message": last}],
    }
    return doc


def _several(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc = _base(t, f"Use {t.name} twice.", tools=[t.name])
    doc["model"] = [{"tool_calls": [_call(t), _call(t)]}, {"text": "Done."}]
    doc["expect"] = {
        "result": "Done.",
        "events": [
            {"message_end": {"role": "assistant", "tool_calls": [t.name, t.name]}},
            {"tool_execution_end": {"tool_call_id": "call_1", "tool_name": t.name}},
            {"tool_execution_end": {"tool_call_id": "call_2", "tool_name": t.name}},
        ],
    }
    return doc


def _unknown(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc = _base(t, "Use a tool you were not given.", tools=[t.name])
    missing = f"{t.name}_v2"
    doc["model"] = [{"tool_calls": [{missing: {}}]}, {"text": "That tool does not exist."}]
    end = {"tool_name": missing, "is_error": True, "result": {"$contains": "not found"}}
    doc["expect"] = {"model_calls": 2, "events": [{"tool_execution_end": end}]}
    return doc


def _bad_args(t: SuiteTool) -> Any:
    required = t.parameters.get("required") or []
    if required and _valid(t.name, t.parameters, t.args) and not _valid(t.name, t.parameters, {}):
        return {}
    return "[1, 2]"  # not a JSON object: fails any schema


def _invalid(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc = _base(t, f"Use {t.name} with broken arguments.", tools=[t.name])
    doc["model"] = [
        {"tool_calls": [{"name": t.name, "arguments": _bad_args(t)}]},
        {"text": "My arguments were wrong."},
    ]
    end = {"tool_name": t.name, "is_error": True, "result": {"$contains": "Validation failed"}}
    doc["expect"] = {"model_calls": 2, "events": [{"tool_execution_end": end}]}
    return doc


def _raising(t: SuiteTool) -> _Doc:
    doc = _base(t, f"Use {t.name}.", tools=[t.name])
    doc["tools"] = {t.name: t.entry(raises=f"{t.name} is down")}
    doc["model"] = [{"tool_calls": [_call(t)]}, {"text": f"{t.name} is down; try later."}]
    return doc


def _raised(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc = _raising(t)
    end = {"tool_name": t.name, "is_error": True, "result": f"{t.name} is down"}
    doc["expect"] = {"events": [{"tool_execution_end": end}]}
    return doc


def _error_returned(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc = _raising(t)
    last = {"role": "toolResult", "tool_name": t.name, "is_error": True}
    doc["expect"] = {
        "result": f"{t.name} is down; try later.",
        "model_calls": 2,
        "requests": [{"round": 2, "last_message": last}],
    }
    return doc


def _full(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc = _base(t, "Answer with any tool you have.")
    doc["model"] = [{"text": "Nothing needed."}]
    doc["expect"] = {"requests": [{"round": 1, "tools": [t.name]}]}
    return doc


def _opt_out(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc = _base(t, "Think it over; no tools.", tools=[])
    doc["model"] = [{"text": "Thought it over."}]
    doc["expect"] = {"result": "Thought it over.", "requests": [{"round": 1, "tools": []}]}
    return doc


def _policy(t: SuiteTool, other: SuiteTool | None) -> _Doc:
    doc = _base(t, "Answer with the tools left.", tools_deny=[t.name])
    if other is not None:
        doc["tools"][other.name] = other.entry()
    doc["model"] = [{"text": "Done."}]
    left = [other.name] if other is not None else []
    doc["expect"] = {"requests": [{"round": 1, "tools": left}]}
    return doc


FORCED = "forced"
"""``tool_choice`` forcing the starter's tool ({type: function, name: ...})."""


def _choice(choice: Any, picks: bool) -> Callable[[SuiteTool, SuiteTool | None], _Doc]:
    def build(t: SuiteTool, _: SuiteTool | None) -> _Doc:
        choice_ = {"type": "function", "name": t.name} if choice == FORCED else choice
        doc = _base(t, f"Use {t.name} if you need it.", tools=[t.name], tool_choice=choice_)
        calls = [{"tool_calls": [_call(t)]}] if picks else []
        doc["model"] = [*calls, {"text": "Done."}]
        doc["expect"] = {"result": "Done.", "requests": [{"round": 1, "tool_choice": choice_}]}
        return doc

    return build


def _parallel(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc = _base(t, f"Use {t.name} once.", tools=[t.name], parallel_tool_calls=False)
    doc["model"] = [{"tool_calls": [_call(t)]}, {"text": "Done."}]
    doc["expect"] = {"requests": [{"round": 1, "parallel_tool_calls": False}]}
    return doc


def _stop(reason: str) -> Callable[[SuiteTool, SuiteTool | None], _Doc]:
    error = {"type": "ModelError" if reason == "error" else "RunAbortedError"}

    def build(t: SuiteTool, _: SuiteTool | None) -> _Doc:
        doc = _base(t, f"Use {t.name}.", tools=[t.name])
        turn: dict[str, Any] = {"stop_reason": reason}
        turn.update({"error": "overloaded"} if reason == "error" else {})
        doc["model"] = [turn]
        stopped = {"role": "assistant", "stop_reason": reason}
        doc["expect"] = {
            "raises": error,
            "events": [{"message_end": stopped}, _ended(reason)],
            "not_events": [{"tool_execution_start": {}}],
        }
        return doc

    return build


def _length(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc = _base(t, f"Use {t.name}, then answer at length.", tools=[t.name])
    doc["model"] = [{"tool_calls": [_call(t)], "stop_reason": "length"}, {"text": "Done."}]
    doc["expect"] = {
        "result": "Done.",
        "events": [
            {"message_end": {"role": "assistant", "stop_reason": "length"}},
            {"tool_execution_end": {"tool_name": t.name, "is_error": False}},
        ],
    }
    return doc


def _aborted(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc = _base(t, f"Use {t.name} twice.", tools=[t.name])
    doc["model"] = [{"tool_calls": [_call(t), _call(t)]}]
    doc["abort"] = {"after_tool": 1}
    unrun = {"tool_call_id": "call_2", "skipped": True}
    doc["expect"] = {
        "raises": {"type": "RunAbortedError"},
        "events": [{"tool_execution_end": unrun}, _ended("aborted")],
    }
    return doc


def _cap(rounds: int, max_iterations: int | None) -> Callable[[SuiteTool, SuiteTool | None], _Doc]:
    def build(t: SuiteTool, _: SuiteTool | None) -> _Doc:
        extra = {} if max_iterations is None else {"max_iterations": max_iterations}
        doc = _base(t, f"Keep using {t.name}.", tools=[t.name], **extra)
        doc["model"] = [{"tool_calls": [_call(t)]} for _ in range(rounds)]
        doc["expect"] = {"model_calls": rounds, "events": [_ended("cap", round=rounds)]}
        return doc

    return build


def _steer_skip(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc = _base(t, f"Use {t.name} twice.", tools=[t.name])
    doc["model"] = [{"tool_calls": [_call(t), _call(t)]}, {"text": "Switching."}]
    doc["steering"] = [{"after_tool": 1, "text": STEER}]
    skipped = {"tool_call_id": "call_2", "skipped": True, "is_error": True}
    doc["expect"] = {
        "result": "Switching.",
        "events": [
            {"tool_execution_end": skipped},
            {"message_end": {"role": "user", "text": STEER}},
        ],
    }
    return doc


def _entering(key: str, text: str, after_tool_round: bool) -> Callable[..., _Doc]:
    def build(t: SuiteTool, _: SuiteTool | None) -> _Doc:
        doc = _base(t, f"Use {t.name} if you need it.", tools=[t.name])
        first = {"tool_calls": [_call(t)]} if after_tool_round else {"text": "First answer."}
        doc["model"] = [first, {"text": "Second answer."}]
        doc[key] = [{"after_round": 1, "text": text}] if key == "steering" else [{"text": text}]
        doc["expect"] = {
            "result": "Second answer.",
            "model_calls": 2,
            "events": [{"message_end": {"role": "user", "round": 2, "text": text}}],
        }
        return doc

    return build


def _nested(menu: str) -> Callable[[SuiteTool, SuiteTool | None], _Doc]:
    """A tool whose body calls exec: with its own ``tools`` (``own``), none (``inherit``:
    the outer list), or ``tools: []`` (``none``)."""

    def build(t: SuiteTool, _: SuiteTool | None) -> _Doc:
        inner: dict[str, Any] = {"content": "Look into {topic}."}
        offered = {"own": [t.name], "inherit": ["delegate", t.name], "none": []}[menu]
        if menu != "inherit":
            inner["tools"] = offered
        topic = {"type": "object", "properties": {"topic": {"type": "string"}}}
        doc = _base(t, "Research tides.", tools=["delegate", t.name])
        doc["tools"]["delegate"] = {
            "description": "Research a topic (its body calls exec).",
            "parameters": {**topic, "required": ["topic"]},
            "exec": inner,
        }
        doc["model"] = [
            {"tool_calls": [{"delegate": {"topic": "tides"}}]},
            {"text": "Inner answer."},
            {"text": "Outer answer."},
        ]
        doc["expect"] = {
            "result": "Outer answer.",
            "events": [{"agent_start": {"depth": 1}}, _ended("stop", depth=1)],
            "requests": [{"depth": 1, "round": 1, "tools": offered}],
        }
        return doc

    return build


def _deferred(t: SuiteTool, _: SuiteTool | None) -> _Doc:
    doc: _Doc = {
        "tools": {t.name: t.simulated(defer=True, returns=f"{t.name} result")},
        "exec": {"content": f"Find and use {t.name}."},
    }
    doc["model"] = [
        {"tool_calls": [{"tool_search": {"query": f"select:{t.name}"}}]},
        {"tool_calls": [_call(t)]},
        {"text": "Done."},
    ]
    doc["expect"] = {
        "result": "Done.",
        "events": [
            {"tool_execution_end": {"tool_name": "tool_search", "is_error": False}},
            {"tool_execution_end": {"tool_name": t.name, "is_error": False}},
        ],
        "requests": [{"round": 1, "tools": ["tool_search"]}],
    }
    return doc


def _choices(reask: bool) -> Callable[[SuiteTool, SuiteTool | None], _Doc]:
    def build(t: SuiteTool, _: SuiteTool | None) -> _Doc:
        doc = _base(t, "Should we go ahead?", tools=[], choices=["yes", "no"])
        first = [{"text": "Perhaps."}] if reask else []
        doc["model"] = [*first, {"text": '{"value": "no"}'}]
        doc["expect"] = {"result": "no"}
        if reask:
            doc["expect"]["requests"] = [
                {"round": 2, "last_message": {"role": "user", "text": {"$contains": "valid pick"}}}
            ]
        return doc

    return build


_STARTERS: dict[str, Callable[[SuiteTool, SuiteTool | None], _Doc]] = {
    "text_finish": _text_finish,
    "tool_round": _tool_round,
    "several_calls_one_round": _several,
    "unknown_tool": _unknown,
    "invalid_arguments": _invalid,
    "tool_raised": _raised,
    "error_result_returned": _error_returned,
    "full_toolset_default": _full,
    "tools_opt_out": _opt_out,
    "tool_policy_trim": _policy,
    "tool_choice_auto": _choice("auto", picks=False),
    "tool_choice_required": _choice("required", picks=True),
    "tool_choice_none": _choice("none", picks=False),
    "tool_choice_forced": _choice(FORCED, picks=True),
    "parallel_tool_calls_false": _parallel,
    "error_stop": _stop("error"),
    "aborted_stop": _stop("aborted"),
    "run_aborted": _aborted,
    "length_stop": _length,
    "cap_hit": _cap(2, 2),
    "cap_floor_at_one": _cap(1, 0),
    "hard_cap_50": _cap(50, None),
    "steering_skip": _steer_skip,
    "steering_after_text": _entering("steering", STEER, after_tool_round=False),
    "steering_after_round": _entering("steering", STEER, after_tool_round=True),
    "follow_up_pass": _entering("follow_ups", FOLLOW_UP, after_tool_round=False),
    "nested_exec": _nested("own"),
    "nested_inherits_tools": _nested("inherit"),
    "nested_opt_out": _nested("none"),
    "deferred_tool_loaded": _deferred,
    "choices_pick": _choices(reask=False),
    "choices_reask": _choices(reask=True),
}


def _describe(b: Behaviour, t: SuiteTool) -> str:
    on = f"the suite's tool {t.name}"
    if t.python is not None:
        on += f" ({t.python}, its body stubbed: remove returns:/raises: to run your code)"
    return (
        f'{b.source}: "{b.quote}" A starter for {b.id} ({b.title}), which no scenario of the '
        f"suite exercised; it is built on {on}. Edit it to your agent's words."
    )


def starter_document(id: str, tools: Sequence[SuiteTool] = ()) -> dict[str, Any]:
    """The scenario (a dict in the file's key order) that exercises and asserts behaviour
    ``id`` on the first of ``tools`` (the second is used where two are needed)."""
    b = behaviour(id)
    t = tools[0] if tools else FALLBACK
    other = tools[1] if len(tools) > 1 else None
    doc = _STARTERS[id](t, other)
    head: dict[str, Any] = {"scenario": f"{b.id}: {b.title}", "description": _describe(b, t)}
    head["tags"] = [TAGS.get(b.group, "coverage"), "starter"]
    order = ["tools", "exec", "model", "steering", "follow_ups", "abort", "expect"]
    document = {**head, **{k: doc[k] for k in order if k in doc}}
    Scenario.model_validate(document)  # a starter is always a valid file
    return document


def starter_text(document: dict[str, Any], schema_ref: str = "schema/scenario.schema.json") -> str:
    """The document as a scenario file: the editor's schema line, then the YAML the fuzz
    regression writer makes."""
    try:
        from openprogram_sim.fuzz._regression import regression_text
    except ImportError as exc:  # the fuzz package imports Hypothesis
        raise ImportError(
            f"--suggest writes starters with the fuzz regression writer, which needs "
            f"Hypothesis: pip install 'openprogram[fuzz]' ({exc})"
        ) from exc
    return f"# yaml-language-server: $schema={schema_ref}\n" + regression_text(document)


def suggest(missing: Iterable[str], scenarios: Iterable[Scenario]) -> list[tuple[str, str]]:
    """``(id, file text)`` of a starter for each behaviour in ``missing``, on the tools of
    ``scenarios`` (the suite)."""
    tools = suite_tools(scenarios)
    return [(id, starter_text(starter_document(id, tools))) for id in missing]
