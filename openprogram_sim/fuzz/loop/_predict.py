"""What the seed's rules say a scenario's run does, worked out from the scenario alone.

The loop's seed (``tool-call-loop.md``) fixes what a run must do with a given model script;
:func:`predict` applies those rules to a scenario's own script and settings, without
running the loop, so that what a regression file expects never comes from the run under
test. The rules applied, in the seed's order:

- **Rounds.** Each model call plays the next turn of the script (one script for every
  depth, in call order). A run makes at most ``effective_cap`` model calls
  (:mod:`openprogram_sim.fuzz._rules`): 50 when ``max_iterations`` is not given, else
  ``max(1, min(50, max_iterations))``; wanting one more ends the run with reason ``cap``,
  a normal finish.
- **Terminal errors.** A reply with an ``error``/``aborted`` stop, or a stream that ends
  without a final event or raises (a call past the end of the script raises too), ends
  the run at once: none of its calls run, ``agent_end.reason`` is ``error``/``aborted``
  and the outer exec raises ``ModelError``/``RunAbortedError``.
- **Picking.** A reply with tool calls has each call executed in order, and each gets
  exactly one result, paired by id: an error result for a tool not in the run's menu, for
  arguments that are not a JSON object or fail ``validate_tool_arguments``, for a tool that
  raises or returns ``{$error: ...}``, and for a nested exec that raises; otherwise a plain
  result. A reply with no
  tool call finishes; exec returns its text (at the cap: the last reply's text).
- **Steering.** An entry is queued once its point is reached: ``after_tool: N`` at the N-th
  ``tool_execution_end`` of the whole run (any depth, skipped calls included),
  ``after_round: N`` at the outer ``turn_end`` of round N; all entries of one point, in
  file order. Steering reaches only the outer run, which polls it after each of its tool
  calls: when a message is queued, every remaining call of the batch is skipped (an error
  result ``Skipped due to queued user message``, marked ``skipped``) and the queued
  messages open the next round, which they keep alive even after a text-only reply.
- **Follow-ups** are queued before the run and delivered together when the outer run's
  inner loop would finish, if the cap leaves a round for them.
- **Nesting.** A tool with ``exec:`` runs its own loop one level deeper, with its own cap
  and menu: its ``tools:`` list, else the list of the innermost enclosing exec that gave
  one, else every tool; ``toolset: none`` offers nothing.
- **Ids.** The scripted model numbers the calls without an explicit id ``call_1``,
  ``call_2``, ... in the order it streams them, failed replies included. (An explicit id
  that is empty, repeated or of that form is refused: the loop renames colliding ids by a
  rule of its own.)

Whether a call's arguments are valid is asked of ``parse_arguments`` and
``validate_tool_arguments``, the tool layer's rule the seed names, never of the loop. What
these rules do not decide (``choices:``, deferred tools, named toolsets and gating keys,
``fault: hang``, ``abort:``, the user's code (``python:``, ``registry:``), a cassette
model, a nested prompt with format fields other than ``{name}``) makes :func:`predict`
raise :class:`UnpredictableScenario` rather than guess.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from openprogram.providers import parse_arguments
from openprogram.tools import ArgumentsError, validate_tool_arguments
from openprogram_sim.errors import SimError
from openprogram_sim.fuzz._rules import SKIP_TEXT, effective_cap
from openprogram_sim.scenario import ExecArgs, Scenario

__all__ = ["EXHAUSTED_TURN", "Prediction", "UnpredictableScenario", "predict"]

EXHAUSTED_TURN: dict[str, Any] = {"fault": "raise", "error": "the model had no scripted turn left"}
"""A model call past the end of the script, written out (it crashes the provider, as the
scripted model's own exhaustion does)."""

_FAILED = {"error": "ModelError", "aborted": "RunAbortedError"}
_FIELD = re.compile(r"\{(\w*)\}")
_AUTO_ID = re.compile(r"call_\d+")


class UnpredictableScenario(SimError, ValueError):
    """The scenario uses something the seed's rules alone do not decide; the message says
    what."""


@dataclass(slots=True)
class Prediction:
    """What a correct loop does with a scenario, by the seed's rules."""

    script: list[dict[str, Any]]
    """The turns the run plays, in call order (a call past the script as a crashing turn)."""
    reason: str
    """The outer run's ``agent_end.reason``: stop, error, aborted or cap."""
    raises: str | None
    """The error class exec raises (``ModelError``, ``RunAbortedError``), or None."""
    result: str | None
    """What exec returns, when it does not raise."""
    events: list[dict[str, dict[str, Any]]] = field(default_factory=list)
    """The events the run must hold, in order (an ``ordered`` expectation, gaps allowed)."""
    counts: Counter[str] = field(default_factory=Counter)
    """How many events of each type the trace holds (``message_update`` aside)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Per model call: its depth and round, and the history it is sent."""
    fired: list[int] = field(default_factory=list)
    """Indices of the steering entries whose point is reached, in firing order."""
    skipped: int = 0
    """Calls skipped because steering arrived mid-batch."""

    @property
    def model_calls(self) -> int:
        return len(self.script)


@dataclass(slots=True)
class _Call:
    name: str
    id: str
    arguments: Any


class _Walk:
    """The rules applied turn by turn; each method is one of the seed's steps."""

    def __init__(self, scenario: Scenario) -> None:
        if not isinstance(scenario.model, list):
            raise UnpredictableScenario("model: is a cassette; the rules walk a scripted model")
        if scenario.abort is not None:
            raise UnpredictableScenario("abort: (the rules say nothing of where an abort lands)")
        _check_supported(scenario)
        self.scenario = scenario
        self.turns = [t.model_dump(exclude_defaults=True) for t in scenario.model]
        self.played: list[dict[str, Any]] = []
        self.ids = 0
        self.given_ids: set[str] = set()
        self.tool_ends = 0
        self.by_tool: dict[int, list[int]] = {}
        self.by_round: dict[int, list[int]] = {}
        for i, entry in enumerate(scenario.steering):
            if entry.after_tool is not None:
                self.by_tool.setdefault(entry.after_tool, []).append(i)
            elif entry.after_round is not None:
                self.by_round.setdefault(entry.after_round, []).append(i)
        self.returned: dict[str, int] = {}
        self.queue: list[str] = []
        self.follow_ups = [f.text for f in scenario.follow_ups]
        self.fired: list[int] = []
        self.events: list[dict[str, dict[str, Any]]] = []
        self.counts: Counter[str] = Counter()
        self.requests: list[dict[str, Any]] = []
        self.skipped = 0

    # -- a run ---------------------------------------------------------------------------

    def run(self, args: ExecArgs, depth: int, inherited: list[str] | None) -> tuple[str, str]:
        """One exec's run; returns its end reason and final text."""
        menu, passed_down = self._menu(args, inherited)
        cap = effective_cap(args.max_iterations)
        self.counts["agent_start"] += 1
        if depth:
            self.events.append({"agent_start": {"depth": depth}})
        history = _History(args.content if depth == 0 else None)
        self.counts.update(("turn_start", "message_start", "message_end"))  # round 1, prompt
        round_, first, text = 1, True, ""
        pending: list[str] = []
        while True:
            more = True
            while more or pending:
                if not first:
                    if round_ >= cap:
                        return self._end(depth, "cap", text)
                    round_ += 1
                    self.counts["turn_start"] += 1
                first = False
                self._deliver(pending, depth, round_, history)
                turn, calls, stop = self._model_call(depth, round_, history)
                if stop is not None:
                    self._turn_end(depth, round_, 0)
                    return self._end(depth, stop, "")
                text, more = turn.get("text") or "", bool(calls)
                steering = self._execute(calls, depth, round_, menu, passed_down, history)
                self._turn_end(depth, round_, len(calls))
                pending = steering + self._poll(depth)
            pending = self._poll_follow_ups(depth)
            if not pending:
                return self._end(depth, "stop", text)
            if round_ >= cap:
                return self._end(depth, "cap", text)

    def _menu(
        self, args: ExecArgs, inherited: list[str] | None
    ) -> tuple[set[str], list[str] | None]:
        """The run's tool names, and the list a nested exec without ``tools:`` inherits."""
        if args.choices is not None:
            raise UnpredictableScenario("exec with choices: (a decision re-asks by its own rules)")
        if args.tools_source is not None or args.tools_allow is not None or args.tools_deny:
            raise UnpredictableScenario("exec with tools_source/tools_allow/tools_deny")
        if args.toolset not in (None, "full", "none"):
            raise UnpredictableScenario(f"exec with the named toolset {args.toolset!r}")
        unknown = set(args.tools or ()) - set(self.scenario.tools)
        if unknown:
            raise UnpredictableScenario(f"exec offers tools the scenario lacks: {sorted(unknown)}")
        passed_down = list(args.tools) if args.tools is not None else inherited
        chosen = passed_down if passed_down is not None else list(self.scenario.tools)
        return (set() if args.toolset == "none" else set(chosen)), passed_down

    def _deliver(self, pending: list[str], depth: int, round_: int, history: _History) -> None:
        for text in pending:
            self.counts.update(("message_start", "message_end"))
            self.events.append(
                {"message_end": {"depth": depth, "round": round_, "role": "user", "text": text}}
            )
            history.add({"role": "user", "text": text})
        pending.clear()

    def _model_call(
        self, depth: int, round_: int, history: _History
    ) -> tuple[dict[str, Any], list[_Call], str | None]:
        """Play the next turn: its tool calls (ids numbered as streamed) and, when it ends
        the run, its stop (error or aborted)."""
        self.requests.append(
            {"call": len(self.played) + 1, "depth": depth, "round": round_, **history.request()}
        )
        used = len(self.played)
        turn = self.turns[used] if used < len(self.turns) else dict(EXHAUSTED_TURN)
        self.played.append(turn)
        calls = [self._call(c) for c in turn.get("tool_calls") or ()]
        fault = turn.get("fault")
        if fault == "hang":
            raise UnpredictableScenario("a turn with fault: hang (only an abort ends it)")
        stop = "error" if fault is not None else turn.get("stop_reason")
        stop = stop if stop in ("error", "aborted") else None
        self.counts.update(("message_start", "message_end"))
        fields: dict[str, Any] = {"depth": depth, "round": round_, "role": "assistant"}
        if stop is None:
            fields["tool_calls"] = [c.name for c in calls]
        else:
            fields["stop_reason"] = stop
        self.events.append({"message_end": fields})
        history.add({"role": "assistant"})
        return turn, ([] if stop else calls), stop

    def _call(self, entry: dict[str, Any]) -> _Call:
        if "name" in entry:
            name, arguments, given = str(entry["name"]), entry.get("arguments", {}), entry.get("id")
        else:
            ((name, arguments),) = entry.items()
            arguments, given = ({} if arguments is None else arguments), None
        if given is None:
            self.ids += 1
            given = f"call_{self.ids}"
        elif not given or str(given) in self.given_ids or _AUTO_ID.fullmatch(str(given)):
            raise UnpredictableScenario(
                f"tool call id {given!r} is empty or may repeat another; the loop renames "
                "such ids by its own rule"
            )
        else:
            self.given_ids.add(str(given))
        return _Call(str(name), str(given), arguments)

    # -- tools ---------------------------------------------------------------------------

    def _execute(
        self,
        calls: list[_Call],
        depth: int,
        round_: int,
        menu: set[str],
        passed_down: list[str] | None,
        history: _History,
    ) -> list[str]:
        """Run the calls in order; after each (outer run only) poll steering, and when a
        message is queued skip the rest and return the messages."""
        for k, call in enumerate(calls):
            self.counts["tool_execution_start"] += 1
            is_error = self._invoke(call, depth, menu, passed_down)
            self._result(call, depth, round_, is_error, False, history)
            steering = self._poll(depth)
            if steering:
                for rest in calls[k + 1 :]:
                    self.counts["tool_execution_start"] += 1
                    self._result(rest, depth, round_, True, True, history)
                return steering
        return []

    def _invoke(
        self, call: _Call, depth: int, menu: set[str], passed_down: list[str] | None
    ) -> bool:
        """Whether the call's result is an error."""
        if call.name not in menu:
            return True
        spec = self.scenario.tools[call.name]
        raw = call.arguments
        arguments = parse_arguments(raw if isinstance(raw, str) else json.dumps(raw))
        try:
            validate_tool_arguments(call.name, spec.parameters, arguments)
        except ArgumentsError:
            return True
        if spec.raises is not None:
            return True
        if spec.exec is None:
            return self._returns_error(call.name, spec.returns)
        if _odd_fields(spec.exec.content):
            raise UnpredictableScenario(
                f"tool {call.name!r}: its exec content has format fields other than {{name}}"
            )
        reason, _ = self.run(spec.exec, depth + 1, passed_down)
        return reason in _FAILED

    def _returns_error(self, name: str, returns: Any) -> bool:
        """A ``returns:`` value (one per call of a list, the last repeating) of the form
        ``{$error: text}`` is an error result the tool returns without raising."""
        if isinstance(returns, list):
            n = self.returned[name] = self.returned.get(name, 0) + 1
            returns = returns[min(n, len(returns)) - 1] if returns else None
        return isinstance(returns, dict) and len(returns) == 1 and "$error" in returns

    def _result(
        self,
        call: _Call,
        depth: int,
        round_: int,
        is_error: bool,
        skipped: bool,
        history: _History,
    ) -> None:
        where = {"depth": depth, "round": round_}
        end: dict[str, Any] = {
            **where,
            "tool_name": call.name,
            "tool_call_id": call.id,
            "is_error": is_error,
            "skipped": skipped,
        }
        if skipped:
            end["result"] = {"$regex": f"^{SKIP_TEXT}\\.?$"}
            self.skipped += 1
        self.counts.update(("tool_execution_end", "message_start", "message_end"))
        self.events.append({"tool_execution_end": end})
        self.events.append(
            {
                "message_end": {
                    **where,
                    "role": "toolResult",
                    "tool_call_id": call.id,
                    "skipped": skipped,
                }
            }
        )
        history.add({"role": "toolResult", "tool_name": call.name})
        self.tool_ends += 1
        self._fire(self.by_tool.get(self.tool_ends, ()))

    # -- queues and ends -----------------------------------------------------------------

    def _fire(self, entries: Any) -> None:
        for i in entries:
            self.queue.append(self.scenario.steering[i].text)
            self.fired.append(i)

    def _poll(self, depth: int) -> list[str]:
        """Steering reaches the outer run only; nested runs poll queues of their own."""
        if depth or not self.queue:
            return []
        out, self.queue = self.queue, []
        return out

    def _poll_follow_ups(self, depth: int) -> list[str]:
        if depth:
            return []
        out, self.follow_ups = self.follow_ups, []
        return out

    def _turn_end(self, depth: int, round_: int, results: int) -> None:
        self.counts["turn_end"] += 1
        self.events.append({"turn_end": {"depth": depth, "round": round_, "tool_results": results}})
        if depth == 0:
            self._fire(self.by_round.get(round_, ()))

    def _end(self, depth: int, reason: str, text: str) -> tuple[str, str]:
        self.counts["agent_end"] += 1
        self.events.append({"agent_end": {"depth": depth, "reason": reason}})
        return reason, text


class _History:
    """A run's history as the model sees it: how many messages, and the last one."""

    __slots__ = ("count", "last")

    def __init__(self, prompt: str | None) -> None:
        self.count = 1
        self.last: dict[str, Any] = {"role": "user"}
        if prompt is not None:
            self.last["text"] = prompt

    def add(self, message: dict[str, Any]) -> None:
        self.count += 1
        self.last = message

    def request(self) -> dict[str, Any]:
        return {"message_count": self.count, "last_message": dict(self.last)}


def _odd_fields(content: str) -> bool:
    """Format fields other than ``{name}`` (positional, escaped or unbalanced braces): the
    prompt may fail to format, which the rules leave to the runner."""
    if any(not name or name[0].isdigit() for name in _FIELD.findall(content)):
        return True
    rest = _FIELD.sub("", content)
    return "{" in rest or "}" in rest


_KNOWN: dict[str, frozenset[str]] = {
    "scenario": frozenset({
        "scenario", "description", "tags", "system_prompt", "tools", "toolsets", "exec",
        "model", "steering", "follow_ups", "abort", "timeout", "expect", "registry", "env",
        "path",
    }),
    "exec": frozenset({
        "content", "tools", "toolset", "tools_source", "tools_allow", "tools_deny",
        "tool_choice", "parallel_tool_calls", "max_iterations", "choices",
    }),
    "tool": frozenset({
        "python", "description", "parameters", "returns", "updates", "raises", "exec",
        "defer", "toolsets", "expose", "unsafe_in", "requires_env",
    }),
    "turn": frozenset({
        "text", "thinking", "tool_calls", "stop_reason", "error", "usage", "fault",
        "latency", "error_reason", "retryable", "retry_after",
    }),
}  # fmt: skip
"""The keys the rules know to act on or to be inert; a key added to the format later is
refused until the rules are taught it (rather than silently ignored)."""


def _unknown_keys(kind: str, model: Any) -> None:
    unknown = set(model.model_fields_set) - _KNOWN[kind]
    if unknown:
        raise UnpredictableScenario(f"{kind} key(s) {sorted(unknown)} the rules do not cover yet")


def _check_supported(scenario: Scenario) -> None:
    _unknown_keys("scenario", scenario)
    _unknown_keys("exec", scenario.exec)
    for turn in scenario.model if isinstance(scenario.model, list) else ():
        _unknown_keys("turn", turn)
    if scenario.registry is not None:
        raise UnpredictableScenario("registry: (the user's tools, gating and toolsets)")
    for name, spec in scenario.tools.items():
        _unknown_keys("tool", spec)
        if spec.exec is not None:
            _unknown_keys("exec", spec.exec)
        if spec.python is not None:
            raise UnpredictableScenario(f"tool {name!r} is the user's code (python:)")
        gated = spec.defer or spec.toolsets or not spec.expose or spec.unsafe_in
        if gated or spec.requires_env:
            raise UnpredictableScenario(
                f"tool {name!r} is deferred or gated (defer/toolsets/expose/unsafe_in/"
                "requires_env); the rules walk plain menus"
            )


def predict(scenario: Scenario) -> Prediction:
    """What a correct loop does with ``scenario``, by the seed's rules (see the module
    docstring); raises :class:`UnpredictableScenario` for what the rules do not decide."""
    walk = _Walk(scenario)
    reason, text = walk.run(scenario.exec, 0, None)
    raises = _FAILED.get(reason)
    return Prediction(
        script=walk.played,
        reason=reason,
        raises=raises,
        result=None if raises else text,
        events=walk.events,
        counts=walk.counts,
        requests=walk.requests,
        fired=walk.fired,
        skipped=walk.skipped,
    )
