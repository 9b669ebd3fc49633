"""Properties: rules over a trace that need no reference run, checked by one evaluator.

A rule is one ``{name: parameters}`` mapping; the vocabulary is closed (:data:`RULES`):

``never: {tool: send_email, after: {tool: ask_user, result: {$contains: "no"}}}``
    no such call (after one of ``after`` returned, when given)
``before: {first: lookup_order, then: refund}``
    every ``then`` call starts after a ``first`` call has ended
``at_most: {tool: search, times: 3}`` / ``at_least: {tool: search, times: 1}``
    how many calls match
``same_round: [get_weather, get_time]``
    one round calls each of them (the model asked for them together)
``no_repeat: {tool: charge_card, args: same}``
    never the same call twice (``args: any``: never the tool twice)
``ends_with: {reason: stop}``
    how the outer exec ended (``tool:``: and its last call)

Where a rule names a call it takes a tool name or a selector: ``{tool: name or matcher,
args: {...}, result: matcher, is_error: bool, depth: N}``; ``args`` as a plain mapping names
only the arguments it compares (a ``$subset``). A violation gives the events (``#N``) that
break the rule and why.

Adding a rule is one function here: its parameters as a pydantic model, the function
decorated with :func:`_rule`, yielding a :class:`Violation` for each break.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from openprogram_sim.trace._explain import render_entry
from openprogram_sim.trace._matchers import check_matcher, describe, matches, show
from openprogram_sim.trace._trajectory import TraceCall, trace_calls

__all__ = [
    "RULES",
    "Violation",
    "assert_properties",
    "check_properties",
    "check_rule",
    "describe_rule",
    "rules_json_schema",
]


def _problem(loc: tuple[Any, ...], message: str, value: Any) -> ValidationError:
    return ValidationError.from_exception_data(
        "rule",
        [
            InitErrorDetails(
                type=PydanticCustomError("value_error", "{message}", {"message": message}),
                loc=loc,
                input=value,
            )
        ],
    )


class _Params(BaseModel):
    """A rule's parameters: unknown keys are mistakes named with a did-you-mean."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            allowed = list(cls.model_fields)
            for key in data:
                if key not in allowed:
                    close = difflib.get_close_matches(str(key), allowed, n=1)
                    hint = f"did you mean {close[0]!r}?" if close else f"keys: {', '.join(allowed)}"
                    raise _problem((key,), f"unknown key {key!r}; {hint}", data[key])
        return data


def _matcher_ok(value: Any) -> Any:
    problem = check_matcher(value)
    if problem:
        raise ValueError(problem)
    return value


class Selector(_Params):
    """Which calls a rule is about; a tool name alone is ``{tool: name}``."""

    tool: Any = Field(description="The tool's name, or a matcher ({$in: [a, b]}, {$regex: ...}).")
    args: Any = Field(
        None,
        description="Its arguments: a mapping names the ones compared (others may be "
        "present); values may be matchers.",
    )
    result: Any = Field(None, description="Its result text (a value or a matcher).")
    is_error: bool | None = Field(None, description="Whether its result is an error.")
    depth: int | None = Field(None, ge=0, description="Only calls at this depth (default: all).")

    @model_validator(mode="before")
    @classmethod
    def _a_name(cls, data: Any) -> Any:
        return {"tool": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _matchers(self) -> Selector:
        for name in ("tool", "args", "result"):
            problem = check_matcher(getattr(self, name))
            if problem:
                raise _problem((name,), problem, getattr(self, name))
        return self

    def fits(self, call: TraceCall) -> bool:
        if not matches(self.tool, call.name):
            return False
        if self.depth is not None and call.depth != self.depth:
            return False
        if self.args is not None:
            want = self.args
            if isinstance(want, Mapping) and not any(str(k).startswith("$") for k in want):
                want = {"$subset": dict(want)}
            if not matches(want, call.args):
                return False
        if self.result is not None and not matches(self.result, call.result):
            return False
        return self.is_error is None or call.is_error == self.is_error

    def text(self) -> str:
        """``search`` or ``ask_user {result: contains "no"}``."""
        name = self.tool if isinstance(self.tool, str) else describe(self.tool)
        parts = [
            f"{k}: {describe(v)}"
            for k, v in (("args", self.args), ("result", self.result), ("is_error", self.is_error))
            if v is not None
        ]
        if self.depth is not None:
            parts.append(f"depth: {self.depth}")
        return f"{name} {{{', '.join(parts)}}}" if parts else str(name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    """One way a trace breaks a rule."""

    rule: int
    """Index of the rule in the list checked."""
    name: str
    """The rule's name (``never``, ``before``, ...)."""
    events: tuple[int, ...]
    """The events (``#N``) that break it (empty when what breaks it is an absence)."""
    message: str
    """Why, in a sentence."""
    lines: tuple[str, ...] = ()
    """The events shown, one line each."""

    def __str__(self) -> str:
        return "\n".join([self.message, *(f"  {line}" for line in self.lines)])


@dataclass(slots=True)
class _Run:
    """What a rule reads: the trace and its calls."""

    trace: Sequence[Mapping[str, Any]]
    calls: list[TraceCall] = field(default_factory=list)

    def entry(self, i: int) -> str:
        return f"#{i:<3} {render_entry(self.trace[i])}"


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule of the vocabulary: its parameters and the function that checks them."""

    name: str
    params: type[BaseModel]
    check: Callable[[Any, _Run], Iterator[tuple[str, tuple[int, ...]]]]
    doc: str
    example: Any


RULES: dict[str, Rule] = {}
"""The rules, by name (the closed vocabulary of ``expect.properties``)."""


def _rule(
    params: type[BaseModel], example: Any
) -> Callable[[Callable[[Any, _Run], Iterator[tuple[str, tuple[int, ...]]]]], Any]:
    """Register the decorated function as the rule of its name; it yields, for each break,
    why (a sentence) and the events that show it."""

    def register(fn: Callable[[Any, _Run], Iterator[tuple[str, tuple[int, ...]]]]) -> Any:
        name = fn.__name__.removeprefix("rule_")
        doc = " ".join((fn.__doc__ or "").replace("``", "`").split())
        RULES[name] = Rule(name, params, fn, doc, example)
        return fn

    return register


def _calls(run: _Run, selector: Selector) -> list[TraceCall]:
    return [c for c in run.calls if selector.fits(c)]


def _numbers(calls: Sequence[TraceCall]) -> str:
    shown = ", ".join(f"#{c.index}" for c in calls[:10])
    return shown + (f" and {len(calls) - 10} more" if len(calls) > 10 else "")


class _Never(Selector):
    after: Selector | None = Field(
        None, description="Only calls that start after a call matching this one has ended."
    )


@_rule(_Never, {"tool": "send_email", "after": {"tool": "ask_user", "result": {"$contains": "no"}}})
def rule_never(p: _Never, run: _Run) -> Iterator[tuple[str, tuple[int, ...]]]:
    """No call matches ``tool`` (with ``after:``, none that starts after a call matching
    ``after`` has ended)."""
    after = _calls(run, p.after) if p.after is not None else []
    for call in _calls(run, p):
        if p.after is None:
            yield f"{call.name} was called: {call.render()}", (call.index,)
            continue
        before = [a for a in after if a.end is not None and a.end < call.index]
        if before:
            first = before[0]
            assert first.end is not None
            yield (
                f"{call.name} was called at #{call.index} after {first.name} returned "
                f"{show(first.result)} at #{first.end}",
                (first.end, call.index),
            )


class _Before(_Params):
    first: Selector = Field(description="The call that must come first.")
    then: Selector = Field(description="Each call of this kind needs a `first` call before it.")


@_rule(_Before, {"first": "lookup_order", "then": "refund"})
def rule_before(p: _Before, run: _Run) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Every call matching ``then`` starts after a call matching ``first`` has ended."""
    firsts = _calls(run, p.first)
    for call in _calls(run, p.then):
        if not any(f.end is not None and f.end < call.index for f in firsts):
            earlier = [f for f in firsts if f.index < call.index]
            why = (
                f" ({first.name} started at #{first.index} but had not ended)"
                if (first := next(iter(earlier), None)) is not None
                else ""
            )
            yield (
                f"{call.name} at #{call.index} has no {p.first.text()} that ended before it{why}",
                (call.index,),
            )


class _Count(Selector):
    times: int = Field(ge=0, description="How many calls.")


@_rule(_Count, {"tool": "search", "times": 3})
def rule_at_most(p: _Count, run: _Run) -> Iterator[tuple[str, tuple[int, ...]]]:
    """At most ``times`` calls match ``tool``."""
    found = _calls(run, p)
    if len(found) > p.times:
        extra = found[p.times :]
        yield (
            f"{p.text()} was called {len(found)} times, at most {p.times} allowed: "
            f"{_numbers(found)} (beyond the limit: {_numbers(extra)})",
            tuple(c.index for c in extra),
        )


@_rule(_Count, {"tool": "search", "times": 1})
def rule_at_least(p: _Count, run: _Run) -> Iterator[tuple[str, tuple[int, ...]]]:
    """At least ``times`` calls match ``tool``."""
    found = _calls(run, p)
    if len(found) < p.times:
        made = f": {_numbers(found)}" if found else ""
        yield (
            f"{p.text()} was called {len(found)} times, at least {p.times} expected{made}",
            tuple(c.index for c in found),
        )


class _SameRound(_Params):
    tools: list[Selector] = Field(min_length=2, description="The calls made together.")

    @model_validator(mode="before")
    @classmethod
    def _a_list(cls, data: Any) -> Any:
        if isinstance(data, list) and len(data) < 2:
            raise _problem((), "same_round lists two calls or more: [get_weather, get_time]", data)
        return {"tools": data} if isinstance(data, list) else data


@_rule(_SameRound, ["get_weather", "get_time"])
def rule_same_round(p: _SameRound, run: _Run) -> Iterator[tuple[str, tuple[int, ...]]]:
    """One round calls each of ``tools`` (given as a list): the model asked for them
    together."""
    found = [_calls(run, s) for s in p.tools]
    rounds = [{c.round_key for c in calls} for calls in found]
    if set.intersection(*rounds):
        return
    names = ", ".join(s.text() for s in p.tools)
    missing = [s.text() for s, calls in zip(p.tools, found, strict=True) if not calls]
    if missing:
        yield f"{', '.join(missing)} never called, so [{names}] were not called in one round", ()
        return
    where = "; ".join(
        f"{s.text()} at {', '.join(f'#{c.index} (d{c.depth} r{c.round})' for c in calls[:5])}"
        for s, calls in zip(p.tools, found, strict=True)
    )
    yield (
        f"[{names}] were never called in one round: {where}",
        tuple(c.index for calls in found for c in calls),
    )


class _NoRepeat(_Params):
    tool: Any = Field(description="The tool's name, or a matcher.")
    args: Literal["same", "any"] = Field(
        "same",
        description="same: a call with the same arguments as an earlier one repeats it; "
        "any: any second call repeats the first.",
    )
    depth: int | None = Field(None, ge=0, description="Only calls at this depth.")

    @model_validator(mode="before")
    @classmethod
    def _a_name(cls, data: Any) -> Any:
        return {"tool": data} if isinstance(data, str) else data


@_rule(_NoRepeat, {"tool": "charge_card", "args": "same"})
def rule_no_repeat(p: _NoRepeat, run: _Run) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Never the same call twice: no call of ``tool`` with the arguments of an earlier one
    (``args: any``: no second call of it at all)."""
    selector = Selector(tool=p.tool, depth=p.depth)
    seen: list[TraceCall] = []
    for call in _calls(run, selector):
        earlier = next(
            (s for s in seen if s.name == call.name and (p.args == "any" or s.args == call.args)),
            None,
        )
        if earlier is not None:
            same = "the same arguments" if p.args == "same" else f"args: {p.args}"
            yield (
                f"{call.render()} repeats #{earlier.index} ({same})",
                (earlier.index, call.index),
            )
        seen.append(call)


class _EndsWith(_Params):
    reason: Any = Field(
        None, description="How the outer exec ended: stop, error, aborted or cap (or a matcher)."
    )
    tool: Selector | None = Field(None, description="Its last tool call matches this one.")

    @model_validator(mode="after")
    def _one_given(self) -> _EndsWith:
        if self.reason is None and self.tool is None:
            raise ValueError("ends_with needs reason: (stop, error, aborted, cap) or tool:")
        problem = check_matcher(self.reason)
        if problem:
            raise _problem(("reason",), problem, self.reason)
        return self


@_rule(_EndsWith, {"reason": "stop"})
def rule_ends_with(p: _EndsWith, run: _Run) -> Iterator[tuple[str, tuple[int, ...]]]:
    """The outer exec's last ``agent_end`` has ``reason``; with ``tool:``, the run's last
    tool call matches it."""
    ends = [
        i for i, e in enumerate(run.trace) if e.get("type") == "agent_end" and not e.get("depth")
    ]
    if p.reason is not None:
        if not ends:
            yield "the trace has no agent_end at depth 0 (the run did not end)", ()
        elif not matches(p.reason, run.trace[ends[-1]].get("reason")):
            last = ends[-1]
            yield (
                f"the run ended with reason {show(run.trace[last].get('reason'))} at #{last}, "
                f"expected {describe(p.reason)}",
                (last,),
            )
    if p.tool is not None:
        if not run.calls:
            yield f"no tool was called; the last call should be {p.tool.text()}", ()
        elif not p.tool.fits(run.calls[-1]):
            last_call = run.calls[-1]
            yield (
                f"the last call is {last_call.render()}, expected {p.tool.text()}",
                (last_call.index,),
            )


# -- the evaluator -----------------------------------------------------------------------


def check_rule(rule: Any) -> tuple[str, BaseModel]:
    """``rule`` (``{name: parameters}``) validated: its name and parameters; raises
    ``pydantic.ValidationError`` whose locations start at the rule's name."""
    if not isinstance(rule, Mapping) or len(rule) != 1:
        raise _problem(
            (),
            "a property is one rule: {name: parameters}, e.g. {at_most: {tool: search, "
            "times: 3}}; rules: " + ", ".join(RULES),
            rule,
        )
    ((name, params),) = rule.items()
    if name not in RULES:
        close = difflib.get_close_matches(str(name), list(RULES), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"rules are: {', '.join(RULES)}"
        raise _problem((name,), f"unknown rule {name!r}; {hint}", params)
    try:
        return name, RULES[name].params.model_validate(params)
    except ValidationError as exc:
        raise ValidationError.from_exception_data(
            "rule",
            [
                InitErrorDetails(
                    type=PydanticCustomError("value_error", "{message}", {"message": _message(e)}),
                    loc=(name, *e["loc"]),
                    input=e.get("input"),
                )
                for e in exc.errors()
            ],
        ) from None


def _message(error: Mapping[str, Any]) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "missing":
        return f"missing required key {error['loc'][-1]!r}"
    if error["type"] not in ("value_error", "assertion_error"):
        message += f" (got {show(error.get('input'))[:80]})"
    return message


def describe_rule(rule: Mapping[str, Any]) -> str:
    """A rule as one line: ``at_most: {"tool": "search", "times": 3}``."""
    ((name, params),) = rule.items()
    return f"{name}: {show(params)}"


def check_properties(trace: Any, rules: Sequence[Mapping[str, Any]]) -> list[Violation]:
    """Every way ``trace`` (its entries, or anything with a ``.trace``) breaks ``rules``
    (``{name: parameters}`` each), in rule order; empty when all hold. A bad rule raises
    ``ValueError`` naming it and the fix."""
    entries = list(getattr(trace, "trace", trace))
    run = _Run(entries, trace_calls(entries))
    out: list[Violation] = []
    for i, rule in enumerate(rules):
        try:
            name, params = check_rule(rule)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {_message(e)}" for e in exc.errors()
            )
            raise ValueError(f"property {i + 1} ({show(rule)}): {problems}") from None
        for message, events in RULES[name].check(params, run):
            lines = tuple(run.entry(k) for k in sorted(set(events))[:10])
            out.append(Violation(rule=i, name=name, events=events, message=message, lines=lines))
    return out


def assert_properties(trace: Any, rules: Sequence[Mapping[str, Any]]) -> None:
    """Assert that ``trace`` holds every rule; raises ``AssertionError`` listing each
    violation (the rule, the events that break it and why)::

        assert_properties(rec.trace, [{"at_most": {"tool": "search", "times": 3}},
                                      {"ends_with": {"reason": "stop"}}])
    """
    __tracebackhide__ = True
    found = check_properties(trace, rules)
    if found:
        raise AssertionError(render_violations(found, rules))


def render_violations(found: Sequence[Violation], rules: Sequence[Mapping[str, Any]]) -> str:
    """Violations grouped by rule, as a failing test prints them."""
    lines = []
    for i in sorted({v.rule for v in found}):
        lines.append(f"property {i + 1} does not hold: {describe_rule(rules[i])}")
        for v in (v for v in found if v.rule == i):
            lines.extend(f"  {line}" for line in str(v).splitlines())
    return "\n".join(lines)


def rules_json_schema() -> dict[str, Any]:
    """JSON Schema definitions: ``PropertyRule`` (one rule of :data:`RULES`, each described
    with its example) and what they refer to, for ``$defs``."""
    defs: dict[str, Any] = {}
    rules: dict[str, Any] = {}
    for name, rule in RULES.items():
        schema = rule.params.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(schema.pop("$defs", {}))
        schema.pop("title", None)
        schema["description"] = f"{rule.doc} Example: {{{name}: {show(rule.example)}}}"
        rules[name] = schema
    selector = defs.pop("Selector", None) or Selector.model_json_schema()
    selector.pop("title", None)
    defs["Selector"] = {"anyOf": [{"type": "string", "description": "A tool's name."}, selector]}
    rules["same_round"] = {
        "type": "array",
        "minItems": 2,
        "items": {"$ref": "#/$defs/Selector"},
        "description": rules["same_round"]["description"],
    }
    for name in ("never", "no_repeat"):  # a tool's name alone is a rule too
        rules[name] = {
            "anyOf": [{"type": "string", "description": "A tool's name."}, rules[name]],
            "description": rules[name]["description"],
        }
    defs["PropertyRule"] = {
        "type": "object",
        "description": "One rule over the trace: {rule: parameters}.",
        "minProperties": 1,
        "maxProperties": 1,
        "additionalProperties": False,
        "properties": rules,
    }
    return defs
