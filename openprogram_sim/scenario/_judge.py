"""What ``expect.judge`` asks and how its answer is read: after a run, a model reads the
prompt, the run's tool calls (arguments and results) and its final text, and gives a
verdict on each criterion through one forced tool call at temperature 0.

The request is built from the run's trace and result alone (no ids, no times), so a run
replayed from its cassette sends the judge the same bytes and the judge's recorded reply
answers it: a judged eval sample replays offline, under ``openprogram-sim run`` too. Who
asks (live and recorded under ``eval``, replayed under ``run``) is the caller's: any
provider will do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openprogram.providers import Context, Provider, StreamOptions
from openprogram.types import AssistantMessage, ToolSpec, UserMessage
from openprogram_sim.errors import SimError
from openprogram_sim.scenario._schema import JudgeCriterion, JudgeSpec
from openprogram_sim.trace import Failure

__all__ = [
    "RESULT_CHARS",
    "TEXT_CHARS",
    "VERDICT_TOOL",
    "CriterionVerdict",
    "JudgeError",
    "JudgedRun",
    "ask_judge",
    "criterion_failures",
    "judge_changes",
    "judge_request",
    "read_verdicts",
]

VERDICT_TOOL = "record_verdicts"
"""The tool the judge is made to call."""

RESULT_CHARS = 2000
"""The most characters of each tool result the judge reads (the rest is cut, and says so)."""

TEXT_CHARS = 8000
"""The most characters of the prompt and of the final text the judge reads."""

_SYSTEM = (
    "You judge one run of an AI agent that uses tools. You are shown what the agent was "
    "asked, every tool call it made (with the arguments it sent and the result it got) and "
    "its final answer. For each criterion, decide whether the run meets it: verdict pass or "
    "fail, a score from 1 (not at all) to 5 (fully), and one sentence of reason that cites "
    "what the run did. Judge only what is shown; do not assume tool calls or results that "
    f"are not there. Answer by calling {VERDICT_TOOL} once, with every criterion."
)


class JudgeError(SimError):
    """The judge could not give a verdict: its call failed, or its reply was no tool call
    or a call whose arguments are not a verdict for each criterion."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CriterionVerdict:
    """The judge's verdict on one criterion, and whether it passes the criterion's rule."""

    name: str
    verdict: str
    """``pass`` or ``fail``, as the judge said."""
    score: int
    """1 to 5."""
    reason: str
    passed: bool
    """The criterion's pass rule applied: ``score >= min_score`` when it gives one, else
    ``verdict == "pass"``."""


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit} more characters cut]"


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgedRun:
    """What the judge reads of a run."""

    trace: Sequence[Mapping[str, Any]]
    """The run's trace: its prompts (user messages of the outer exec) and tool calls."""
    result: Any = None
    """What exec returned."""
    error: str | None = None
    """What exec raised (``Type: message``), when it raised."""
    prompt: str = ""
    """The prompt, when the trace holds none (a run that never started)."""

    @classmethod
    def of(cls, outcome: Any) -> JudgedRun:
        """What the judge reads of a :class:`~openprogram_sim.play.RunOutcome`."""
        content = getattr(outcome.scenario.exec, "content", "") or ""
        return cls(
            trace=outcome.trace,
            result=outcome.result,
            error=outcome.error_text,
            prompt=str(content),
        )


def _calls(trace: Sequence[Mapping[str, Any]]) -> list[str]:
    lines: list[str] = []
    for event in trace:
        if event["type"] != "tool_execution_end":
            continue
        args = json.dumps(event.get("args"), ensure_ascii=False, sort_keys=True)
        result = _cut(str(event.get("result") or ""), RESULT_CHARS)
        kind = "error" if event.get("is_error") else "result"
        nested = f" (nested, depth {event['depth']})" if event.get("depth") else ""
        lines.append(
            f"{len(lines) + 1}. {event.get('tool_name')}({args}){nested}\n   {kind}: {result}"
        )
    return lines


def _prompts(run: JudgedRun) -> list[str]:
    found = [
        _cut(str(e.get("text") or ""), TEXT_CHARS)
        for e in run.trace
        if e["type"] == "message_end" and e.get("role") == "user" and not e.get("depth")
    ]
    return found or [_cut(run.prompt, TEXT_CHARS)]


def _final(run: JudgedRun) -> str:
    if run.error is not None:
        return f"The run ended in an error, with no final answer: {run.error}"
    result = run.result
    text = result if isinstance(result, str) else json.dumps(result, default=str)
    return "Its final answer:\n" + _cut(text, TEXT_CHARS)


def _criteria(spec: JudgeSpec) -> str:
    return "\n".join(f"- {c.name}: {c.text}" for c in spec.criteria)


def _verdict_schema(spec: JudgeSpec) -> dict[str, Any]:
    one = {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["pass", "fail"]},
            "score": {"type": "integer", "minimum": 1, "maximum": 5},
            "reason": {"type": "string"},
        },
        "required": ["verdict", "score", "reason"],
        "additionalProperties": False,
    }
    names = [c.name for c in spec.criteria]
    return {
        "type": "object",
        "properties": {name: one for name in names},
        "required": names,
        "additionalProperties": False,
    }


def _conversation(run: JudgedRun) -> str | None:
    """With several user messages (a conversation, steering, follow-ups): the outer exec's
    messages in order, the agent's text replies between them; None with one prompt."""
    said = [
        (e["role"], _cut(str(e.get("text") or ""), TEXT_CHARS))
        for e in run.trace
        if e["type"] == "message_end"
        and not e.get("depth")
        and (e.get("role") == "user" or (e.get("role") == "assistant" and e.get("text")))
    ]
    if sum(1 for role, _ in said if role == "user") < 2:
        return None
    lines = [f"{'user' if role == 'user' else 'agent'}: {text}" for role, text in said]
    return "The conversation, in order (the agent's tool calls are listed below):\n" + "\n".join(
        lines
    )


def judge_request(spec: JudgeSpec, run: JudgedRun) -> tuple[Context, StreamOptions]:
    """What the judge is sent about ``run``: the run as text, the verdict tool, and the
    options (the tool forced, temperature 0, one call)."""
    calls = _calls(run.trace)
    asked = _conversation(run) or "What the agent was asked:\n" + "\n---\n".join(_prompts(run))
    parts = [
        asked,
        "Its tool calls, in order:\n" + ("\n".join(calls) if calls else "(none)"),
        _final(run),
        "The criteria:\n" + _criteria(spec),
        f"Call {VERDICT_TOOL} with a verdict for each criterion, by name.",
    ]
    system = _SYSTEM + (f"\n\n{spec.rubric.strip()}" if spec.rubric.strip() else "")
    tool = ToolSpec(
        VERDICT_TOOL,
        "Record the verdict on each criterion of the run.",
        _verdict_schema(spec),
    )
    context = Context(system, [UserMessage.of("\n\n".join(parts))], [tool])
    options = StreamOptions(
        tool_choice={"type": "function", "name": VERDICT_TOOL},
        parallel_tool_calls=False,
        temperature=0.0,
    )
    return context, options


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 300 else text[:300] + "..."


def _one(criterion: JudgeCriterion, got: Any) -> CriterionVerdict | str:
    """The verdict on ``criterion`` in what came back, or what is wrong with it."""
    name = criterion.name
    if not isinstance(got, Mapping):
        return f"criterion {name!r}: the verdict is not an object: {_shown(got)}"
    verdict, score, reason = got.get("verdict"), got.get("score"), got.get("reason", "")
    if verdict not in ("pass", "fail"):
        return f"criterion {name!r}: verdict {_shown(verdict)} is not pass or fail ({_shown(got)})"
    if isinstance(score, float) and score.is_integer():
        score = int(score)
    if type(score) is not int or not 1 <= score <= 5:
        return f"criterion {name!r}: score {_shown(score)} is not a whole number from 1 to 5"
    return CriterionVerdict(
        name=name,
        verdict=verdict,
        score=score,
        reason=str(reason),
        passed=criterion.passes(verdict, score),
    )


def _arguments(spec: JudgeSpec, message: AssistantMessage) -> dict[str, Any] | str:
    """The verdict tool's arguments (several calls merged), or what came back instead."""
    names = ", ".join(repr(c.name) for c in spec.criteria)
    if message.stop_reason in ("error", "aborted"):
        return f"the judge's call failed, so no criterion ({names}) has a verdict: " + (
            message.error_message or message.stop_reason
        )
    calls = message.tool_calls
    if not calls:
        text = message.text.strip()
        said = f"text {_shown(_cut(text, 300))}" if text else "nothing"
        return (
            f"no verdict for criteria {names}: the judge answered with {said}, not a call "
            f"of {VERDICT_TOOL}"
        )
    merged: dict[str, Any] = {}
    for call in calls:
        if call.name != VERDICT_TOOL:
            return (
                f"no verdict for criteria {names}: the judge called {call.name!r}, not "
                f"{VERDICT_TOOL}"
            )
        if not isinstance(call.arguments, Mapping):
            return (
                f"no verdict for criteria {names}: the arguments of {VERDICT_TOOL} are not a "
                f"JSON object: {_shown(call.arguments)}"
            )
        merged.update(call.arguments)
    return merged


def read_verdicts(spec: JudgeSpec, message: AssistantMessage) -> dict[str, CriterionVerdict]:
    """Each criterion's verdict in the judge's reply; :class:`JudgeError` naming each
    criterion without a readable verdict, and what came back."""
    head = f"judge {spec.model}: "
    args = _arguments(spec, message)
    if isinstance(args, str):
        raise JudgeError(head + args)
    out: dict[str, CriterionVerdict] = {}
    problems: list[str] = []
    for criterion in spec.criteria:
        if criterion.name not in args:
            sent = ", ".join(map(repr, args)) or "none"
            problems.append(
                f"criterion {criterion.name!r}: no verdict (it sent verdicts for: {sent})"
            )
            continue
        got = _one(criterion, args[criterion.name])
        if isinstance(got, str):
            problems.append(got)
        else:
            out[criterion.name] = got
    unknown = sorted(set(args) - {c.name for c in spec.criteria})
    if unknown:
        problems.append(f"verdicts for criteria the scenario does not name: {', '.join(unknown)}")
    if problems:
        raise JudgeError(head + "; ".join(problems))
    return out


async def ask_judge(
    provider: Provider,
    spec: JudgeSpec,
    run: JudgedRun,
    *,
    replies: list[AssistantMessage] | None = None,
) -> dict[str, CriterionVerdict]:
    """Ask ``provider`` (the judge's adapter, live or replaying a cassette) for a verdict on
    each criterion of ``spec`` about ``run``; :class:`JudgeError` when none can be read.
    The judge's reply (its usage, its text) is appended to ``replies`` when given."""
    context, options = judge_request(spec, run)
    final: AssistantMessage | None = None
    async for event in provider.stream(context, options):
        if event.type == "done":
            final = event.message
        elif event.type == "error":
            final = event.error
    if final is None:
        raise JudgeError(f"judge {spec.model}: the reply ended without a message")
    if replies is not None:
        replies.append(final)
    return read_verdicts(spec, final)


def criterion_failures(
    spec: JudgeSpec, verdicts: Mapping[str, CriterionVerdict], where: Callable[[int], str]
) -> list[Failure]:
    """A :class:`~openprogram_sim.trace.Failure` for each criterion whose verdict does not
    pass its rule; ``where(i)`` is the ``file:line`` of criterion ``i``."""
    out = []
    for i, criterion in enumerate(spec.criteria):
        got = verdicts[criterion.name]
        if got.passed:
            continue
        rule = "verdict pass"
        if criterion.min_score is not None:
            rule = f"min_score {criterion.min_score}"
        out.append(
            Failure(
                f"judge.{criterion.name}: the judge ({spec.model}) said {got.verdict}, score "
                f"{got.score}/5 (needed: {rule})",
                f"criterion: {criterion.text}\nreason: {got.reason}",
                where(i),
            )
        )
    return out


def judge_changes(spec: JudgeSpec, recorded: Mapping[str, Any]) -> list[str]:
    """How ``spec`` differs from the judge a cassette recorded (its metadata's ``judge:``,
    what that judge was asked: model, rubric, criteria), each as a phrase; empty when they
    are the same."""
    if "criteria" not in recorded:
        return []
    asked = spec.asked()
    out = [
        f"its {key} is {_shown(asked[key])}, the recorded one's {_shown(recorded.get(key))}"
        for key in ("model", "rubric")
        if asked[key] != recorded.get(key)
    ]
    before: dict[str, Any] = {
        str(c.get("name")): c for c in recorded["criteria"] if isinstance(c, dict)
    }
    now: dict[str, Any] = {c["name"]: c for c in asked["criteria"]}
    for name in sorted(now.keys() - before.keys()):
        out.append(f"criterion {name!r} was not recorded")
    for name in sorted(before.keys() - now.keys()):
        out.append(f"the recorded criterion {name!r} is gone")
    for name in sorted(now.keys() & before.keys()):
        if now[name] != before[name]:
            out.append(f"criterion {name!r} differs: {_shown(before[name])} -> {_shown(now[name])}")
    if not out and list(now) != list(before):
        out.append("the criteria are in another order")
    return out
