"""The starter scenario of each behaviour (:data:`STARTERS`): a builder that takes the
suite's tool (and a second one where two are needed) and returns the scenario's parts as
data. What each starter expects is what the seed's rules say a correct loop does with its
script, never a run.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from openprogram_sim.coverage._suite_tools import SuiteTool, arguments_valid

__all__ = ["FOLLOW_UP", "FORCED", "STARTERS", "STEER"]

STEER = "Stop there; do this instead."
FOLLOW_UP = "One more thing: summarise it."

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
    if (
        required
        and arguments_valid(t.name, t.parameters, t.args)
        and not arguments_valid(t.name, t.parameters, {})
    ):
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


STARTERS: dict[str, Callable[[SuiteTool, SuiteTool | None], _Doc]] = {
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
