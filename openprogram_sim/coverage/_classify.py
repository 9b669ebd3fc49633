"""Which behaviours of the catalogue a run exercised, and the evidence for each.

Evidence is a list of :class:`Witness` entries: trace events, requests and ``expect:`` keys
that an expectation would have to check for the behaviour to count as asserted (see
:mod:`openprogram_sim.coverage._asserted`). A behaviour is exercised when it has evidence.

Only the run's trace, its requests and its scenario are read. Where a behaviour depends on
what the scenario set up (an exec's arguments, which user messages are steering or
follow-ups), the scenario's own entries decide: a user message is a steering message when
its text is one of the scenario's ``steering:`` texts, a follow-up when it is one of its
``follow_ups:`` texts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openprogram_sim.coverage._runs import Call, Round, Run, read_runs
from openprogram_sim.coverage._toolbox import ToolInfo, exec_args_of, tool_infos
from openprogram_sim.scenario import ExecArgs, Scenario

__all__ = ["Evidence", "Witness", "classify"]

HARD_CAP = 50
"""The seed's ``MAX_INNER_ITERATIONS``."""


@dataclass(frozen=True, slots=True)
class Witness:
    """One thing an expectation may check to assert a behaviour.

    ``kind`` is ``event`` (``at``: a trace index), ``request`` (``at``: an index into the
    requests) or ``expect`` (``at``: an ``expect:`` key: ``result``, ``raises``,
    ``model_calls`` or ``counts.<event type>``). ``keys`` are the fields an expectation on
    it must name. Witnesses with a ``group`` assert only together with one of another group
    (two calls of one batch, for the order of a batch); ungrouped ones assert alone."""

    kind: str
    at: int | str
    keys: frozenset[str] = frozenset()
    group: int | None = None


Evidence = dict[str, list[Witness]]
"""Behaviour id -> its witnesses in one run (only exercised behaviours appear)."""


def _event(at: int | None, *keys: str, group: int | None = None) -> list[Witness]:
    return [] if at is None else [Witness("event", at, frozenset(keys), group)]


def _request(at: int | None, *keys: str) -> list[Witness]:
    return [] if at is None else [Witness("request", at, frozenset(keys))]


def _expect(*keys: str) -> list[Witness]:
    return [Witness("expect", k) for k in keys]


_HISTORY = ("messages", "last_message", "message_count")
_CAP_COUNTS = ("counts.turn_start", "counts.turn_end")


@dataclass(slots=True)
class _Facts:
    """One run's outcome, read once for every rule."""

    trace: Sequence[Mapping[str, Any]]
    requests: Sequence[Mapping[str, Any]]
    scenario: Scenario
    runs: list[Run]
    tools: dict[str, ToolInfo]
    error: bool
    """exec raised."""

    def reply(self, round_: Round) -> Mapping[str, Any]:
        return self.trace[round_.reply] if round_.reply is not None else {}

    def offered(self, round_: Round) -> list[str] | None:
        if round_.request is None or round_.request >= len(self.requests):
            return None
        tools = self.requests[round_.request].get("tools")
        return list(tools) if isinstance(tools, list) else None

    def exec_args(self, run: Run) -> ExecArgs | None:
        return exec_args_of(self.scenario, run.parent.name if run.parent else None)

    def text(self, at: int) -> Any:
        return self.trace[at].get("text")


def _is_text_reply(reply: Mapping[str, Any]) -> bool:
    return not reply.get("tool_calls") and reply.get("stop_reason") not in ("error", "aborted")


# --------------------------------------------------------------------------- basics


def _text_finish(f: _Facts) -> list[Witness]:
    out: list[Witness] = []
    for run in f.runs:
        if run.reason != "stop" or not run.rounds or not _is_text_reply(f.reply(run.rounds[-1])):
            continue
        out += _event(run.end, "reason")
        out += _event(run.rounds[-1].reply, "text", "stop_reason", "tool_calls")
        top = run.depth == 0 and f.scenario.call is None and not f.scenario.exec.choices
        out += _expect("result") if top else []
    return out


def _tool_round(f: _Facts) -> list[Witness]:
    out: list[Witness] = []
    for run in f.runs:
        for k, round_ in enumerate(run.rounds[:-1]):
            ran = [c for c in round_.calls if c.ran]
            if not ran:
                continue
            for call in ran:
                out += _event(call.end, "result", "is_error")
            out += _request(run.rounds[k + 1].request, *_HISTORY)
    return out + _expect("model_calls") if out else []


def _several_calls(f: _Facts) -> list[Witness]:
    out: list[Witness] = []
    for run in f.runs:
        for round_ in run.rounds:
            ran = [c for c in round_.calls if c.ran]
            if len(ran) < 2:
                continue
            out += _event(round_.reply, "tool_calls")
            keys = ("tool_call_id", "tool_name", "args", "result")
            for n, call in enumerate(ran):
                for at in call.events:
                    out += _event(at, *keys, group=n)
    return out


# --------------------------------------------------------------------------- tool errors


_KINDS = {
    "unknown_tool": "unknown_tool",
    "invalid_arguments": "invalid_arguments",
    "raised": "tool_raised",
}


def _error_kind(f: _Facts, round_: Round, call: Call) -> str | None:
    """Why a call that ran got an error result: unknown, invalid, raised (None: the tool
    returned an error result itself, or it cannot be told). The trace's ``error_kind``
    says; a trace recorded without it is read against the scenario's tools."""
    recorded = f.trace[call.end].get("error_kind") if call.end is not None else None
    if recorded is not None:
        return _KINDS.get(recorded)
    info = f.tools.get(call.name)
    offered = f.offered(round_)
    if offered is not None and call.name not in offered and not (info and info.defer):
        return "unknown_tool"
    if info is None or info.parameters is None:
        return None
    if not _valid(call.name, info.parameters, call.args):
        return "invalid_arguments"
    if info.body in ("raises", "exec", "python"):
        return "tool_raised"
    return None


def _valid(name: str, schema: dict[str, Any], args: Any) -> bool:
    from openprogram.providers import parse_arguments
    from openprogram.tools import ArgumentsError, validate_tool_arguments

    if isinstance(args, str):
        args = parse_arguments(args)
    try:
        validate_tool_arguments(name, schema, args)
    except ArgumentsError:
        return False
    return True


def _tool_errors(f: _Facts) -> Evidence:
    out: Evidence = {}
    for run in f.runs:
        for k, round_ in enumerate(run.rounds):
            failed = [c for c in round_.calls if c.ran and c.is_error]
            for call in failed:
                kind = _error_kind(f, round_, call)
                if kind is not None:
                    out.setdefault(kind, []).extend(_event(call.end, "is_error", "result"))
            if failed and k + 1 < len(run.rounds):
                after = run.rounds[k + 1]
                witnesses = _request(after.request, *_HISTORY)
                witnesses += _event(after.reply, "text", "tool_calls")
                out.setdefault("error_result_returned", []).extend(witnesses)
    if "error_result_returned" in out:
        out["error_result_returned"] += _expect("model_calls")
    return out


# --------------------------------------------------------------------------- the menu


def _requests_of(run: Run, key: str = "tools") -> list[Witness]:
    return [w for at in run.requests for w in _request(at, key)]


def _menu(f: _Facts) -> Evidence:
    out: Evidence = {}
    for run in f.runs:
        args = f.exec_args(run)
        if args is None or not run.requests:
            continue
        chosen = args.tools is not None or args.toolset is not None
        if not chosen and not _inherits(f, run) and any(f.offered(r) for r in run.rounds):
            out.setdefault("full_toolset_default", []).extend(_requests_of(run))
        opted_out = args.tools == [] or args.toolset == "none"
        if opted_out:
            target = "tools_opt_out" if run.depth == 0 else "nested_opt_out"
            out.setdefault(target, []).extend(_requests_of(run))
        if run.depth > 0 and args.tools is None and args.toolset is None and _inherits(f, run):
            out.setdefault("nested_inherits_tools", []).extend(_requests_of(run))
        if args.tools_source is not None or args.tools_allow is not None or args.tools_deny:
            out.setdefault("tool_policy_trim", []).extend(_requests_of(run))
    return out


def _inherits(f: _Facts, run: Run) -> bool:
    """Whether an enclosing exec of ``run`` gave a ``tools=`` list (that it inherits)."""
    outer = run.outer
    while outer is not None:
        args = f.exec_args(outer)
        if args is not None and args.tools is not None:
            return True
        outer = outer.outer
    return False


def _tool_choice(f: _Facts) -> Evidence:
    out: Evidence = {}
    for at, request in enumerate(f.requests):
        choice = request.get("tool_choice")
        if isinstance(choice, dict):
            target = "tool_choice_forced" if choice.get("type") == "function" else None
        else:
            target = f"tool_choice_{choice}" if choice in ("auto", "required", "none") else None
        if target is not None:
            out.setdefault(target, []).extend(_request(at, "tool_choice"))
        if request.get("parallel_tool_calls") is False:
            out.setdefault("parallel_tool_calls_false", []).extend(
                _request(at, "parallel_tool_calls")
            )
    return out


# --------------------------------------------------------------------------- stops and cap


def _stops(f: _Facts) -> Evidence:
    out: Evidence = {}
    keys = {"error": ("stop_reason", "error", "error_reason"), "aborted": ("stop_reason",)}
    for run in f.runs:
        for round_ in run.rounds:
            stop = f.reply(round_).get("stop_reason")
            if stop == "length":
                out.setdefault("length_stop", []).extend(_event(round_.reply, "stop_reason"))
            if stop not in keys:
                continue
            witnesses = _event(round_.reply, *keys[stop])
            if run.reason == stop:
                witnesses += _event(run.end, "reason")
                witnesses += _expect("raises") if run.depth == 0 and f.error else []
            out.setdefault(f"{stop}_stop", []).extend(witnesses)
        stops = {f.reply(r).get("stop_reason") for r in run.rounds}
        if run.reason == "aborted" and "aborted" not in stops:
            witnesses = _event(run.end, "reason")
            for _, call in run.calls():
                witnesses += _event(call.end, "skipped", "result") if call.skipped else []
            witnesses += _expect("raises") if run.depth == 0 and f.error else []
            out.setdefault("run_aborted", []).extend(witnesses)
    return out


def _cap(f: _Facts) -> Evidence:
    out: Evidence = {}
    for run in f.runs:
        rounds = len(run.rounds)
        if run.reason == "cap":
            top = run.depth == 0 and not f.error
            out.setdefault("cap_hit", []).extend(
                _event(run.end, "reason") + _expect("model_calls", *_CAP_COUNTS)
            )
            out["cap_hit"] += _expect("result") if top else []
            if rounds == HARD_CAP:
                out.setdefault("hard_cap_50", []).extend(
                    _event(run.end, "reason", "round") + _expect("model_calls", *_CAP_COUNTS)
                )
        args = f.exec_args(run)
        floor = args is not None and args.max_iterations is not None and args.max_iterations < 1
        if floor and rounds:
            out.setdefault("cap_floor_at_one", []).extend(
                _event(run.end, "reason", "round") + _expect("model_calls", *_CAP_COUNTS)
            )
    return out


# --------------------------------------------------------------------------- steering


def _entered(f: _Facts) -> Evidence:
    """Rounds of the outer run opened by a steering, follow-up or re-ask message."""
    out: Evidence = {}
    steering = {s.text for s in f.scenario.steering}
    follow_ups = {u.text for u in f.scenario.follow_ups}
    choices = f.scenario.call is None and bool(f.scenario.exec.choices)
    for run in f.runs:
        if run.depth != 0:
            continue
        for k, round_ in enumerate(run.rounds[1:], start=1):
            before = run.rounds[k - 1]
            for at in round_.inputs:
                entered = _entered_as(f.trace[at], steering, follow_ups)
                targets = _input_kinds(f, before, entered, choices)
                for target in targets:
                    witnesses = _event(at, "text") + _request(round_.request, *_HISTORY)
                    witnesses += _expect("raises" if target == "choices_reask" else "model_calls")
                    out.setdefault(target, []).extend(witnesses)
        for round_ in run.rounds:
            for call in round_.calls:
                if call.skipped and round_ is not run.rounds[-1]:
                    out.setdefault("steering_skip", []).extend(
                        _event(call.end, "skipped", "result")
                    )
    return out


def _entered_as(
    entry: Mapping[str, Any], steering: set[str], follow_ups: set[str]
) -> tuple[bool, bool, bool]:
    """Whether a user message entered as steering, as one of the scenario's follow-ups, or
    as a follow-up the scenario did not write (an ``exec(choices=)`` re-ask). By the trace's
    ``origin``; a trace without one is read by the texts the scenario gave."""
    text, origin = entry.get("text"), entry.get("origin")
    if origin is None:
        return text in steering, text in follow_ups, text not in steering | follow_ups
    follow_up = origin == "follow_up"
    return (
        origin == "steering",
        follow_up and text in follow_ups,
        follow_up and text not in follow_ups,
    )


def _input_kinds(
    f: _Facts, before: Round, entered: tuple[bool, bool, bool], choices: bool
) -> list[str]:
    as_steering, as_follow_up, unwritten = entered
    kinds = []
    if as_steering:
        if _is_text_reply(f.reply(before)) and not before.calls:
            kinds.append("steering_after_text")
        elif before.calls and not any(c.skipped for c in before.calls):
            kinds.append("steering_after_round")
    if as_follow_up:
        kinds.append("follow_up_pass")
    if unwritten and choices:
        kinds.append("choices_reask")
    return kinds


# --------------------------------------------------------------------------- nesting, deferred


def _nested(f: _Facts) -> Evidence:
    witnesses = [
        Witness("event", i, frozenset({"depth"}))
        for i, e in enumerate(f.trace)
        if int(e.get("depth") or 0) > 0
    ]
    witnesses += [
        Witness("request", i, frozenset({"depth"}))
        for i, r in enumerate(f.requests)
        if int(r.get("depth") or 0) > 0
    ]
    return {"nested_exec": witnesses} if witnesses else {}


def _deferred(f: _Facts) -> Evidence:
    out: list[Witness] = []
    for run in f.runs:
        loaded: Call | None = None
        for round_, call in run.calls():
            if call.name == "tool_search" and call.ran and not call.is_error:
                loaded = loaded or call
                continue
            offered = f.offered(round_)
            if loaded is None or offered is None or call.name in offered:
                continue
            if call.ran and not call.is_error:
                out += _event(call.end, "is_error", "result")
                out += _event(loaded.end, "is_error", "result")
                later = [r.request for r in run.rounds if r.start > round_.start]
                out += [w for at in later for w in _request(at, "tools")]
    return {"deferred_tool_loaded": out} if out else {}


def _choices(f: _Facts) -> Evidence:
    if f.scenario.call is not None or not f.scenario.exec.choices or f.error:
        return {}
    return {"choices_pick": _expect("result")}


_RULES: tuple[Callable[[_Facts], Evidence], ...] = (
    _tool_errors,
    _menu,
    _tool_choice,
    _stops,
    _cap,
    _entered,
    _nested,
    _deferred,
    _choices,
)
_SINGLE: dict[str, Callable[[_Facts], list[Witness]]] = {
    "text_finish": _text_finish,
    "tool_round": _tool_round,
    "several_calls_one_round": _several_calls,
}


def classify(
    trace: Sequence[Mapping[str, Any]],
    requests: Sequence[Mapping[str, Any]],
    scenario: Scenario,
    *,
    raised: bool = False,
) -> Evidence:
    """The behaviours one run of ``scenario`` exercised, each with its witnesses.

    ``trace`` and ``requests`` are the outcome's (:class:`~openprogram_sim.scenario.RunOutcome`
    ``.trace`` and ``.requests``; of a request only ``depth``, ``round``, ``tools``,
    ``tool_choice`` and ``parallel_tool_calls`` are read); ``raised`` says exec raised."""
    facts = _Facts(
        trace=trace,
        requests=requests,
        scenario=scenario,
        runs=read_runs(trace),
        tools=tool_infos(scenario),
        error=raised,
    )
    evidence: Evidence = {}
    for name, single in _SINGLE.items():
        found = single(facts)
        if found:
            evidence[name] = found
    for rule in _RULES:
        for name, witnesses in rule(facts).items():
            if witnesses:
                evidence.setdefault(name, []).extend(witnesses)
    return evidence
