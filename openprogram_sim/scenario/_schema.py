"""The scenario file's schema: pydantic models, and the JSON Schema editors use.

A scenario is one YAML file (see the README): the tools to simulate, the ``exec`` call, the
scripted model turns, steering and follow-up injection points, and the expectations.
:func:`~openprogram_sim.scenario.json_schema` (``_jsonschema.py``) is what ``openprogram-sim
schema`` prints.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from openprogram.types import ErrorReason, Usage
from openprogram_sim.models import Choice, ScriptStep, Turn, TurnToolCall, WireFault
from openprogram_sim.trace import EVENT_FIELDS, Trajectory, check_rule, parse_path

__all__ = [
    "AbortPoint",
    "CallRange",
    "CassetteFault",
    "CassetteModel",
    "ConversationStep",
    "EventExpect",
    "ExecArgs",
    "Expect",
    "FollowUp",
    "HistoryMessage",
    "JudgeCriterion",
    "JudgeSpec",
    "MessageExpect",
    "ModelChoice",
    "ModelTurn",
    "RaisesSpec",
    "RequestExpect",
    "Scenario",
    "StepExecArgs",
    "Steering",
    "ToolDef",
    "ToolOutcome",
    "WireOptions",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ForcedChoice(_Model):
    type: Literal["function"]
    name: str


def _choice_tag(value: Any) -> str:
    # Called on raw input when validating and on the model when serializing.
    return "forced" if isinstance(value, (dict, ForcedChoice)) else "mode"


ToolChoiceField = Annotated[
    Annotated[Literal["auto", "required", "none"], Tag("mode")]
    | Annotated[ForcedChoice, Tag("forced")],
    Discriminator(_choice_tag),
]


class ExecArgs(_Model):
    """The arguments of ``Runtime.exec`` (also the ``exec:`` of a nested tool)."""

    content: str = Field(description="The prompt; in a tool's exec, {param} takes its argument.")
    tools: list[str] | None = Field(
        None, description="Tool names from `tools:`; absent: the full toolset; []: none."
    )
    toolset: str | None = None
    tools_source: str | None = None
    tools_allow: list[str] | None = None
    tools_deny: list[str] | None = None
    tool_choice: ToolChoiceField = "auto"
    parallel_tool_calls: bool | None = None
    max_iterations: int | None = None
    choices: list[Any] | None = Field(
        None, description="Tool names (functions) or plain values the model picks one of."
    )


class ToolOutcome(_Model):
    """One call's outcome in a tool's ``outcomes:``: ``{returns: value}`` or ``{raises: text}``."""

    returns: Any = Field(
        None, description="The call returns this value ({$error: text}: an error result)."
    )
    raises: str | None = Field(None, description="The call raises with this message.")

    @model_validator(mode="after")
    def _one_outcome(self) -> ToolOutcome:
        given = [k for k in ("returns", "raises") if k in self.model_fields_set]
        if len(given) != 1:
            raise ValueError(
                "an outcome is {returns: value} or {raises: message}"
                + (f"; it gives {' and '.join(given)}: keep one" if given else "")
            )
        return self


class ToolDef(_Model):
    """A simulated tool (at most one of ``returns``, ``raises``, ``outcomes`` and ``exec``),
    or the user's own tool named by ``python:``, whose spec and body come from the code
    (``returns``, ``raises`` or ``outcomes`` then stub its body out)."""

    python: str | None = Field(
        None,
        description="The user's tool, 'package.module:name' (an @function/@agentic_function, a "
        "{spec, execute} dict or any Tool); its spec comes from the code.",
    )
    description: str = ""
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the arguments.",
    )
    returns: Any = Field(
        None,
        description="The result: a value, or a list of values (one per call; last repeats). "
        "{$error: text} is an error result the tool returns without raising.",
    )
    updates: list[Any] = Field(
        default_factory=list,
        description="Progress the tool reports before returning (tool_execution_update events).",
    )
    raises: str | None = Field(None, description="The tool raises with this message.")
    outcomes: list[ToolOutcome] | None = Field(
        None,
        min_length=1,
        description="One outcome per call, in call order (the last repeats): each "
        "{returns: value} or {raises: message}.",
    )
    exec: ExecArgs | None = Field(None, description="The tool's body calls exec (nested loop).")
    defer: bool = Field(False, description="Deferred: loaded through tool_search.")
    toolsets: list[str] = Field(default_factory=list, description="Toolsets it belongs to.")
    expose: bool = True
    unsafe_in: list[str] = Field(default_factory=list, description="Sources it is unsafe in.")
    requires_env: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_behaviour(self) -> ToolDef:
        behaviours = ("returns", "raises", "outcomes", "exec")
        given = [k for k in behaviours if getattr(self, k) is not None]
        if len(given) > 1:
            hint = (
                " (outcomes: [{returns: ...}, {raises: ...}] mixes both, call by call)"
                if {"returns", "raises"} <= set(given)
                else ""
            )
            raise ValueError(
                f"a tool has one behaviour; it gives {' and '.join(given)}: keep one{hint}"
            )
        if self.updates and (self.raises is not None or self.exec is not None):
            raise ValueError("updates: only a tool that returns reports progress here")
        if self.python is not None:
            from_code = {"description", "parameters", "exec"} & self.model_fields_set
            if from_code:
                raise ValueError(
                    f"a python: tool takes its {' and '.join(sorted(from_code))} from the "
                    "code; remove them (returns:, raises: or outcomes: may stub its body out)"
                )
        return self


class WireSpec(_Model):
    """``wire:`` of a model turn: what the turn does to the HTTP exchange when the wire server
    (``openprogram-sim serve``) plays it; the scripted model ignores it."""

    status: int | None = Field(None, ge=400, le=599, description="An HTTP error status.")
    retry_after: float | None = Field(None, ge=0, description="The retry-after header (s).")
    retry_after_ms: int | None = Field(None, ge=0, description="OpenAI's retry-after-ms.")
    error_mode: Literal["auto", "http", "stream"] = "auto"
    headers: dict[str, str] = Field(default_factory=dict, description="Extra response headers.")
    cut_after: int | None = Field(
        None, ge=0, description="Drop the connection after this many body chunks."
    )
    corrupt_chunk: int | None = Field(
        None, ge=1, description="Replace body chunk N with bytes the client cannot parse."
    )
    interval: float = Field(0.0, ge=0, description="Real seconds between body chunks.")


class ModelTurn(_Model):
    """One model reply, in call order across nesting levels."""

    text: str | None = None
    thinking: str | None = None
    tool_calls: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Each {name: arguments} or {name: ..., arguments: ..., id: ...}.",
    )
    stop_reason: Literal["stop", "length", "toolUse", "error", "aborted"] | None = None
    error: str | None = None
    error_reason: ErrorReason | None = Field(
        None, description="An error stop's kind (rate_limit, overloaded, server, auth, ...)."
    )
    retryable: bool | None = Field(None, description="An error stop: a retry may succeed.")
    retry_after: float | None = Field(
        None, ge=0, description="An error stop: seconds the provider asked to wait."
    )
    usage: dict[str, int] | None = None
    fault: Literal["truncate", "raise", "hang"] | None = None
    latency: float = Field(0.0, ge=0, description="Seconds on the virtual clock.")
    wire: WireSpec | None = Field(
        None, description="What the turn does over HTTP when the wire server plays it."
    )
    one_of: list[ModelChoice] | None = Field(
        None,
        min_length=1,
        description="Instead of one reply: a weighted choice, [{weight: 0.7, tool_calls: "
        "[...]}, {weight: 0.3, text: ...}], drawn per run from the scenario's seed: (per "
        "session under serve); weights are positive and need not sum to 1.",
    )

    @model_validator(mode="after")
    def _one_of_alone(self) -> ModelTurn:
        if self.one_of is not None:
            others = sorted(self.model_fields_set - {"one_of", "wire"})
            if others:
                raise ValueError(
                    f"a one_of turn takes no {', '.join(others)}: put them in each option "
                    "(one_of: [{weight: 0.7, text: ...}, ...])"
                )
        return self

    @model_validator(mode="after")
    def _calls_shape(self) -> ModelTurn:
        for call in self.tool_calls:
            if "name" in call:
                extra = set(call) - {"name", "arguments", "id"}
                if extra:
                    raise ValueError(
                        f"tool call {call!r} has unknown key(s) {sorted(extra)}; "
                        "use {name: ..., arguments: ..., id: ...}"
                    )
            elif len(call) != 1:
                raise ValueError(
                    f"tool call {call!r} must be {{tool_name: arguments}} (one key) or "
                    "{name: ..., arguments: ...}"
                )
        if self.usage is not None:
            unknown = set(self.usage) - {
                "input",
                "output",
                "cache_read",
                "cache_write",
                "reasoning",
            }
            if unknown:
                raise ValueError(
                    f"usage has unknown key(s) {sorted(unknown)}; use input, output, "
                    "cache_read, cache_write, reasoning"
                )
        return self

    def to_turn(self) -> Turn:
        """The reply as the scripted model plays it."""
        if self.one_of is not None:
            return Turn(one_of=tuple(Choice(c.weight, c.to_turn()) for c in self.one_of))
        return Turn(
            text=self.text,
            thinking=self.thinking,
            tool_calls=[TurnToolCall.coerce(c) for c in self.tool_calls],
            stop_reason=self.stop_reason,
            error=self.error,
            error_reason=self.error_reason,
            retryable=self.retryable,
            retry_after=self.retry_after,
            usage=Usage(**self.usage) if self.usage is not None else None,
            fault=self.fault,
            latency=self.latency,
        )

    def wire_fault(self) -> WireFault:
        """The reply's ``wire:`` fault, as the wire simulator serves it."""
        spec = self.wire.model_dump(exclude_none=True) if self.wire is not None else None
        return WireFault.coerce(spec)


class ModelChoice(ModelTurn):
    """One option of a ``one_of`` turn: a reply (the keys of a turn) and its weight."""

    weight: float = Field(
        gt=0, allow_inf_nan=False, description="How likely, relative to the other options."
    )

    @model_validator(mode="after")
    def _flat(self) -> ModelChoice:
        if self.one_of is not None:
            raise ValueError("an option of one_of cannot hold another one_of")
        if self.wire is not None:
            raise ValueError(
                "an option of one_of takes no wire: (give wire: beside one_of, for every option)"
            )
        return self


ModelTurn.model_rebuild()


class CassetteFault(_Model):
    """``model.faults``: a fault played on top of a cassette, at the ``turn``-th request of
    the replay, through the real adapter."""

    turn: int = Field(ge=1, description="The request it applies to (1: the first).")
    cut_after: int | None = Field(
        None, ge=0, description="Serve the recorded reply's first N events, then drop it."
    )
    status: int | None = Field(
        None,
        ge=400,
        le=599,
        description="Answer with the API's HTTP error (e.g. 429, 503); the recorded reply "
        "is kept for the next request.",
    )
    retry_after: float | None = Field(None, ge=0, description="retry-after of the error (s).")
    message: str | None = Field(None, description="The error's message.")

    @model_validator(mode="after")
    def _one_fault(self) -> CassetteFault:
        if (self.cut_after is None) == (self.status is None):
            raise ValueError("give exactly one of cut_after: N or status: CODE")
        return self


class CassetteModel(_Model):
    """``model: {cassette: path, model: PROVIDER:MODEL}``: replay recorded provider HTTP
    through openprogram's real adapter (``openprogram-sim record`` makes the file)."""

    cassette: str = Field(description="The cassette file, relative to this scenario file.")
    model: str | None = Field(
        None,
        description="The adapter, PROVIDER:MODEL (e.g. anthropic:claude-sonnet-4-5); default: "
        "the one the cassette was recorded with.",
    )
    ignore: list[str] | None = Field(
        None,
        description="JSON paths of request-body fields left out of matching, e.g. "
        "$.metadata or $.messages[*].cache_control (default: per-user ids).",
    )
    faults: list[CassetteFault] = Field(default_factory=list)
    timing: Literal["instant", "recorded"] = Field(
        "instant", description="instant: no waiting; recorded: the recorded pace."
    )

    @field_validator("ignore")
    @classmethod
    def _readable_paths(cls, patterns: list[str] | None) -> list[str] | None:
        for pattern in patterns or ():
            parse_path(pattern)  # a ValueError names the pattern and the fix
        return patterns


def _model_tag(value: Any) -> str:
    # not "cassette": a tag that is also a key would hide the key path in error locations
    return "recording" if isinstance(value, (dict, CassetteModel)) else "turns"


ModelField = Annotated[
    Annotated[list[ModelTurn], Tag("turns")] | Annotated[CassetteModel, Tag("recording")],
    Discriminator(_model_tag),
]


class Steering(_Model):
    """A steering message queued at a point of the outer exec."""

    text: str
    after_tool: int | None = Field(
        None, ge=1, description="Queued once this many tool calls of the run have finished."
    )
    after_round: int | None = Field(
        None, ge=1, description="Queued once this round of the outer exec has ended."
    )

    @model_validator(mode="after")
    def _one_point(self) -> Steering:
        if (self.after_tool is None) == (self.after_round is None):
            raise ValueError("give exactly one of after_tool or after_round")
        return self


class FollowUp(_Model):
    text: str


class HistoryMessage(_Model):
    """One message of the conversation before ``exec.content`` (``history:``)."""

    role: Literal["user", "assistant", "toolResult"]
    text: str = ""
    tool_calls: list[dict[str, Any]] = Field(
        default_factory=list,
        description="An assistant message's calls, each {name: ..., arguments: ..., id: ...}.",
    )
    tool_call_id: str | None = Field(None, description="A toolResult: the call it answers.")
    tool_name: str | None = Field(None, description="A toolResult: the tool's name.")
    is_error: bool = False

    @model_validator(mode="after")
    def _fits_its_role(self) -> HistoryMessage:
        if self.tool_calls and self.role != "assistant":
            raise ValueError("tool_calls belong to an assistant message")
        for call in self.tool_calls:
            if set(call) - {"name", "arguments", "id"} or not {"name", "id"} <= set(call):
                raise ValueError(
                    f"history tool call {call!r} must be {{name: ..., arguments: ..., id: ...}}"
                    " (the id is what its toolResult names)"
                )
        if self.role == "toolResult" and not (self.tool_call_id and self.tool_name):
            raise ValueError("a toolResult message needs tool_call_id and tool_name")
        if self.role != "toolResult" and (self.tool_call_id or self.tool_name or self.is_error):
            raise ValueError("tool_call_id, tool_name and is_error belong to a toolResult")
        return self


_ABORT_POINTS = ("after_tool", "after_round", "during_tool", "during_turn")


class AbortPoint(_Model):
    """``abort:``: where the run is aborted (as ``Runtime.abort()`` would, from outside)."""

    after_tool: int | None = Field(
        None, ge=1, description="Once this many tool calls of the run have finished."
    )
    after_round: int | None = Field(
        None, ge=1, description="Once this round of the outer exec has ended."
    )
    during_tool: int | None = Field(
        None,
        ge=1,
        description="While the N-th tool call of the run (all depths, in call order) runs: "
        "a simulated tool waits for the abort; one of yours is aborted at its first await.",
    )
    during_turn: int | None = Field(
        None,
        ge=1,
        description="While the N-th model reply (all depths, in call order) is in flight: "
        "during its latency: when it has one, else after its first streamed piece, else "
        "(a reply that streams nothing, fault: hang) while it waits.",
    )

    @model_validator(mode="after")
    def _one_point(self) -> AbortPoint:
        given = [k for k in _ABORT_POINTS if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of after_tool, after_round, during_tool or during_turn"
            )
        return self

    def point(self) -> tuple[str, int]:
        """``(kind, n)``: the point's name and number."""
        for kind in _ABORT_POINTS:
            value = getattr(self, kind)
            if value is not None:
                return kind, int(value)
        raise AssertionError("validated: one point is given")


class RequestExpect(_Model):
    """What the model was sent on one call (fields given are compared)."""

    call: int | None = Field(None, ge=1, description="Which call (1-based); default: in order.")
    depth: int | None = None
    round: int | None = None
    tools: Any = None
    tool_choice: Any = None
    parallel_tool_calls: Any = None
    system_prompt: Any = None
    message_count: Any = None
    last_message: Any = Field(
        None,
        description="Fields of the last message sent (role, text, tool_calls, tool_name, "
        "is_error); the fields given are compared.",
    )
    messages: Any = Field(None, description="Every message sent, each as fields (as last_message).")


class MessageExpect(_Model):
    """One message of ``expect.history``: the fields given are compared (values or
    matchers), as in ``expect.requests``' ``messages``."""

    role: Any = Field(None, description="user, assistant or toolResult.")
    text: Any = None
    tool_calls: Any = Field(
        None, description="An assistant message's calls, each {name: ..., arguments: ...}."
    )
    tool_name: Any = Field(None, description="A toolResult: the tool's name.")
    is_error: Any = Field(None, description="A toolResult: whether it is an error.")

    def fields(self) -> dict[str, Any]:
        """The fields the file gives (a ``null`` it gives included)."""
        return {k: getattr(self, k) for k in type(self).model_fields if k in self.model_fields_set}


EventExpect = Annotated[
    dict[str, dict[str, Any]], WithJsonSchema({"x-placeholder": "ExpectedEvent"})
]
"""``{event_type: {field: matcher}}`` (the JSON Schema names every event and its fields)."""


def _a_rule(value: Any) -> Any:
    check_rule(value)  # a ValidationError locates the mistake within the rule
    return value


PropertyRule = Annotated[
    dict[str, Any], BeforeValidator(_a_rule), WithJsonSchema({"x-placeholder": "PropertyRule"})
]
"""``{rule: parameters}``, one rule of :data:`openprogram_sim.trace.RULES`."""


class RaisesSpec(_Model):
    """``raises: {type: ModelError, message: quota}``: both optional; ``type`` may list
    several accepted classes (``type: [ModelError, RunAbortedError]``)."""

    type: str | list[str] | None = Field(
        None, description="The error class name (or a base class name), or a list of them."
    )
    message: str | None = Field(None, description="Text the error message contains.")


class CallRange(_Model):
    """``model_calls: {min: 1, max: 4}``: how many model calls, within bounds (either may
    be left out; both count every depth)."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra={"minProperties": 1})

    min: int | None = Field(None, ge=0, description="At least this many model calls.")
    max: int | None = Field(None, ge=0, description="At most this many model calls.")

    @model_validator(mode="after")
    def _a_range(self) -> CallRange:
        if self.min is None and self.max is None:
            raise ValueError("a range gives min:, max: or both, e.g. {min: 1, max: 4}")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(
                f"min: {self.min} is above max: {self.max}; the range is empty (swap them?)"
            )
        return self

    def holds(self, n: int) -> bool:
        """Whether ``n`` model calls are within the range."""
        return (self.min is None or n >= self.min) and (self.max is None or n <= self.max)

    def __str__(self) -> str:
        if self.max is None:
            return f"at least {self.min}"
        if self.min is None:
            return f"at most {self.max}"
        return f"between {self.min} and {self.max}"


def _calls_tag(value: Any) -> str:
    # Called on raw input when validating and on the model when serializing.
    return "range" if isinstance(value, (dict, CallRange)) else "count"


CallsField = Annotated[
    Annotated[int, Tag("count")] | Annotated[CallRange, Tag("range")],
    Discriminator(_calls_tag),
]
"""``model_calls:``: a number, or a range ``{min, max}``."""


JUDGE_SCALE = (1, 5)
"""The scores a judge gives each criterion (1: not at all, 5: fully)."""

_CRITERION_NAME = r"^[A-Za-z0-9][\w.-]{0,63}$"
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
_LOOPBACK_PATTERN = r"^https?://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?([/?#].*)?$"


def _a_criterion_name(value: str) -> str:
    if not re.match(_CRITERION_NAME, value):
        raise ValueError(
            f"criterion name {value!r} is not a name: up to 64 letters, digits, _ . or -, "
            "starting with a letter or digit (e.g. polite, names-the-status)"
        )
    return value


class JudgeCriterion(_Model):
    """One criterion of ``expect.judge``: what the judge reads the run for, and when it
    passes."""

    name: Annotated[str, AfterValidator(_a_criterion_name)] = Field(
        description="Its name in the verdict and in the sample's checks (judge.NAME).",
        json_schema_extra={"pattern": _CRITERION_NAME},
    )
    text: str = Field(min_length=1, description="What the run must do, as the judge reads it.")
    min_score: int | None = Field(
        None,
        ge=JUDGE_SCALE[0],
        le=JUDGE_SCALE[1],
        description="Pass when the judge scores it at least this (1-5); default: when the "
        "judge's verdict is pass.",
    )

    def passes(self, verdict: str, score: int) -> bool:
        """The pass rule: ``score >= min_score`` when given, else ``verdict == "pass"``."""
        return score >= self.min_score if self.min_score is not None else verdict == "pass"


def _named_criteria(value: Any) -> Any:
    """A criterion given as text is named by its place: ``c1``, ``c2``..."""
    if not isinstance(value, list):
        return value
    return [
        {"name": f"c{i + 1}", "text": c} if isinstance(c, str) else c for i, c in enumerate(value)
    ]


def _a_model_name(value: str) -> str:
    provider, colon, model = value.partition(":")
    if not (colon and provider and model):
        raise ValueError(f"{value!r} is not PROVIDER:MODEL (e.g. openai:gpt-4o-mini)")
    return value


def _a_loopback_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{value!r} is not an http(s) URL, e.g. http://127.0.0.1:8400/v1")
    if parts.hostname not in _LOOPBACK and f"[{parts.hostname}]" not in _LOOPBACK:
        raise ValueError(
            f"{value!r} is not on this machine: a scenario file may point the judge only at "
            "a loopback address (127.0.0.1, localhost, ::1), since the judge's key goes "
            "wherever it points; for another host set the adapter's variable "
            "(OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL)"
        )
    return value


class JudgeSpec(_Model):
    """``expect.judge``: a model asked, after the run, for a verdict on each criterion
    (one forced tool call at temperature 0), reading the prompt, the run's final text and
    its tool calls with their arguments and results. Judged under ``openprogram-sim
    eval``, recorded into each sample's cassette and replayed from it (docs/judge.md)."""

    model: Annotated[str, AfterValidator(_a_model_name)] = Field(
        description="The judge's adapter, PROVIDER:MODEL (its key from the usual variable, "
        "e.g. OPENAI_API_KEY).",
        json_schema_extra={"pattern": "^[^:]+:.+$"},
    )
    criteria: Annotated[
        list[JudgeCriterion],
        BeforeValidator(_named_criteria),
        WithJsonSchema(
            {
                "type": "array",
                "minItems": 1,
                "maxItems": 20,
                "items": {
                    "anyOf": [
                        {"type": "string", "minLength": 1},
                        {"x-placeholder": "JudgeCriterion"},
                    ]
                },
            }
        ),
    ] = Field(
        min_length=1,
        max_length=20,
        description="What the run must do: each a text (named c1, c2...) or {name, text, "
        "min_score}.",
    )
    rubric: str = Field(
        "", description="Instructions the judge reads before the criteria (who the agent "
        "is, what good looks like).",
    )  # fmt: skip
    base_url: Annotated[str, AfterValidator(_a_loopback_url)] | None = Field(
        None,
        description="The judge's endpoint on this machine (a proxy, the wire server); "
        "{sample} is replaced by the sample's name. Default: the adapter's own (its "
        "environment variable, else the provider's).",
        json_schema_extra={"pattern": _LOOPBACK_PATTERN},
    )

    cassette: str | None = Field(
        None,
        description="A cassette holding this judge's recorded calls (an eval sample's, whose "
        "replies this scenario's model: plays), relative to this file: openprogram-sim run "
        "replays the judge from it. Not used by eval, which asks the judge live.",
    )

    def asked(self) -> dict[str, Any]:
        """What the judge is asked (model, rubric, criteria), as a cassette keeps it: not
        where it is asked (``base_url``) or replayed from (``cassette``)."""
        return self.model_dump(mode="json", exclude={"base_url", "cassette"})

    @field_validator("criteria")
    @classmethod
    def _names_once(cls, criteria: list[JudgeCriterion]) -> list[JudgeCriterion]:
        seen: set[str] = set()
        for i, c in enumerate(criteria):
            if c.name in seen:
                raise ValidationError.from_exception_data(
                    "JudgeSpec",
                    [
                        InitErrorDetails(
                            type=PydanticCustomError(
                                "value_error",
                                "criterion name '{name}' is given twice; names are unique (a "
                                "criterion given as text is named by its place: c1, c2...)",
                                {"name": c.name},
                            ),
                            loc=(i, "name"),
                            input=c.name,
                        )
                    ],
                )
            seen.add(c.name)
        return criteria


class Expect(_Model):
    result: Any = Field(None, description="What exec returned (a value or a matcher).")
    raises: bool | str | RaisesSpec = Field(
        False,
        description="true: exec must raise; text: its message contains it; or {type, message}.",
    )
    model_calls: CallsField | None = Field(
        None,
        description="All model calls, nested ones included: a number (what a script makes), "
        "or a range {min: 1, max: 4} (what a real model may make).",
    )
    requests: list[RequestExpect] = Field(default_factory=list)
    events: list[EventExpect] = Field(default_factory=list)
    events_mode: Literal["ordered", "exact", "unordered"] = "ordered"
    not_events: list[EventExpect] = Field(default_factory=list)
    history: list[MessageExpect] | None = Field(
        None,
        description="The run's final history, the messages the model would see next "
        "(history:, the prompt and every message the outer exec added), in order; gaps "
        "allowed unless history_mode: exact.",
    )
    history_mode: Literal["ordered", "exact"] = "ordered"
    counts: Annotated[
        dict[str, int],
        WithJsonSchema(
            {
                "type": "object",
                "propertyNames": {"enum": list(EVENT_FIELDS)},
                "additionalProperties": {"type": "integer", "minimum": 0},
            }
        ),
    ] = Field(default_factory=dict, description="Event type -> how many.")
    trajectory: Trajectory | None = Field(
        None,
        description="The tool calls expected (mode, args, depth, calls, min_score), with a "
        "graded score: for a real model, whose exact events vary.",
    )
    properties: list[PropertyRule] = Field(
        default_factory=list,
        description="Rules the trace must hold, that need no reference run: never, before, "
        "at_most, at_least, same_round, no_repeat, ends_with.",
    )
    judge: JudgeSpec | None = Field(
        None,
        description="A model's verdict on each criterion, after the run (under eval; "
        "recorded and replayed with each sample's cassette; see docs/judge.md).",
    )


class StepExecArgs(ExecArgs):
    """The ``exec:`` of a ``conversation:`` step: ``content`` may be left out (or null) to
    continue without a new prompt (``Runtime.exec(None, history=...)``)."""

    content: str | None = Field(  # type: ignore[assignment]
        None,
        description="The prompt; absent or null: continue without a new prompt (the history "
        "must end with a user message or a tool result, as an aborted exec's does).",
    )


class ConversationStep(_Model):
    """One exec of a ``conversation:``: it continues the history the execs before it left
    (the scenario's ``history:``, then each exec's prompt, replies and results)."""

    exec: StepExecArgs = Field(
        description="The arguments of this Runtime.exec call (without content: a continue)."
    )
    steering: list[Steering] = Field(
        default_factory=list, description="Steering for this exec (points counted within it)."
    )
    follow_ups: list[FollowUp] = Field(default_factory=list, description="Its follow-ups.")
    abort: AbortPoint | None = Field(
        None, description="Abort this exec at this point (counted within it)."
    )
    expect: Expect = Field(
        default_factory=Expect,
        description="What this exec must do: its result, raises, events, requests and calls "
        "(counted within it), and the history it leaves.",
    )

    @field_validator("expect")
    @classmethod
    def _judge_reads_the_whole_run(cls, value: Expect) -> Expect:
        if value.judge is not None:
            raise ValueError(
                "judge: belongs to the top-level expect: (it reads the whole conversation's "
                "final text and tool calls), not to a step's"
            )
        return value


_IDENTIFIER = r"^[A-Za-z_]\w*$"
_REF = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"


def _one_or_many(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def _a_ref(value: str) -> str:
    if not re.match(_REF, value):
        raise ValueError(f"{value!r} is not an import path; write it as 'package.module:name'")
    return value


def _a_fixture_name(value: str) -> str:
    if not re.match(_IDENTIFIER, value):
        raise ValueError(f"{value!r} is not a fixture name (a Python identifier)")
    return value


Refs = Annotated[
    list[Annotated[str, AfterValidator(_a_ref)]],
    BeforeValidator(_one_or_many),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": _REF},
                {"type": "array", "items": {"type": "string", "pattern": _REF}},
            ]
        }
    ),
]
"""One import path (``package.module:name``) or a list of them."""


ClientCheckName = Literal[
    "answered_once",
    "no_unknown_result",
    "retry_after",
    "max_retries",
    "no_key_in_body",
    "no_request_after_final",
]
"""The client invariants ``serve`` checks on each session (openprogram_sim.wire's
CLIENT_CHECKS; a test holds the two equal)."""


class WireOptions(_Model):
    """How ``serve`` checks the clients of this scenario's sessions."""

    checks: dict[ClientCheckName, bool] = Field(
        default_factory=dict,
        description="Client invariants checked on each served session (every one is on); "
        "false turns one off, e.g. {retry_after: false}.",
    )
    max_retries: int | None = Field(
        None, ge=0, description="Retries of one request in a row the max_retries check allows "
        "(default 4).",
    )  # fmt: skip


class Scenario(_Model):
    """One scenario file."""

    scenario: str = Field(description="The title.")
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    system_prompt: str = ""
    registry: str | None = Field(
        None,
        description="The user's ToolRegistry, 'package.module:name': its tools, toolsets, "
        "gating and deferred tools (a copy per run; the scenario's tools are added to it).",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment variables set for the run (restored after)."
    )
    tools: dict[str, ToolDef] = Field(default_factory=dict)
    toolsets: dict[str, list[str]] = Field(
        default_factory=dict, description="Named toolsets over the scenario's tools."
    )
    history: list[HistoryMessage] = Field(
        default_factory=list,
        description="The conversation so far, before exec.content (each tool call answered).",
    )
    exec: ExecArgs = Field(
        default_factory=lambda: ExecArgs(content=""),
        description="The arguments of Runtime.exec (required unless call: or conversation: "
        "is given).",
    )
    call: str | None = Field(
        None,
        description="Instead of exec: the application's entry point, 'package.module:name' "
        "(an @agentic_function, or any callable; a `runtime` parameter gets the run's runtime).",
    )
    args: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments for call:.")
    conversation: list[ConversationStep] | None = Field(
        None,
        min_length=1,
        description="Instead of exec: several execs in order, each continuing the history "
        "the one before it left; model: turns are consumed across them.",
    )
    model: ModelField
    steering: list[Steering] = Field(default_factory=list)
    follow_ups: list[FollowUp] = Field(default_factory=list)
    abort: AbortPoint | None = Field(None, description="Abort the run at this point.")
    timeout: float = Field(
        5.0,
        gt=0,
        le=3600,
        description="Seconds of real time the run may take (the virtual clock is apart); "
        "past it the run is aborted and the scenario fails with the trace so far.",
    )
    setup: Refs = Field(
        default_factory=list,
        description="Your callables run before each run, 'package.module:name' (sync or "
        "async; a parameter named like one of fixtures: gets its value); one or a list.",
    )
    teardown: Refs = Field(
        default_factory=list,
        description="Your callables run after each run, even when it fails; one or a list.",
    )
    fixtures: list[
        Annotated[
            str,
            AfterValidator(_a_fixture_name),
            WithJsonSchema({"type": "string", "pattern": _IDENTIFIER}),
        ]
    ] = Field(
        default_factory=list,
        description="pytest fixtures the scenario's test item requests (under pytest only; "
        "openprogram-sim run fails the scenario).",
    )
    seed: int | None = Field(
        None,
        description="The seed one_of turns are drawn from (each run draws the same replies); "
        "without it each run picks a seed and names it.",
    )
    wire: WireOptions = Field(
        default_factory=WireOptions,
        description="How openprogram-sim serve checks this scenario's clients (the client "
        "invariants on each session).",
    )
    expect: Expect = Field(default_factory=Expect)
    path: str = Field("", exclude=True, description="(set by the loader)")
    _lines: Any = PrivateAttr(default=None)

    @field_validator("steering", "follow_ups", "abort")
    @classmethod
    def _not_beside_a_conversation(cls, value: Any, info: ValidationInfo) -> Any:
        if value and info.data.get("conversation"):
            raise ValueError(
                f"with conversation:, {info.field_name}: belongs to the step whose exec it "
                "is for (conversation: [{exec: ..., " + str(info.field_name) + ": ...}])"
            )
        return value

    @field_validator("conversation")
    @classmethod
    def _first_step_has_a_prompt(
        cls, value: list[ConversationStep] | None, info: ValidationInfo
    ) -> list[ConversationStep] | None:
        """The first exec may continue (no content) only a ``history:`` that ends with a user
        message or a tool result; later ones continue what the exec before left."""
        if not value or value[0].exec.content is not None or "history" not in info.data:
            return value  # (a history: that failed is reported on its own)
        history: list[HistoryMessage] = info.data["history"]
        if history and history[-1].role != "assistant":
            return value
        why = (
            f"history: ends with an assistant message (history[{len(history) - 1}])"
            if history
            else "there is no history:"
        )
        raise ValidationError.from_exception_data(
            "Scenario",
            [
                InitErrorDetails(
                    type=PydanticCustomError(
                        "value_error",
                        "the first exec has no content (a continue without a new prompt), but "
                        "{why}, so there is nothing to continue; give it content: (the first "
                        "prompt), or end history: with a user message or a tool result",
                        {"why": why},
                    ),
                    loc=(0, "exec", "content"),
                    input=value[0].exec.content,
                )
            ],
        )

    @field_validator("expect")
    @classmethod
    def _whole_conversation(cls, value: Expect, info: ValidationInfo) -> Expect:
        given = sorted({"result", "raises"} & value.model_fields_set)
        if given and info.data.get("conversation"):
            raise ValueError(
                f"with conversation:, expect.{' and expect.'.join(given)} belong to each step's "
                "expect: (what that exec returned or raised); the top-level expect: is for "
                "the whole conversation (events, requests, model_calls, history)"
            )
        return value

    @model_validator(mode="after")
    def _exec_or_call(self) -> Scenario:
        given = "exec" in self.model_fields_set
        talk = self.conversation is not None
        if talk and (given or self.call is not None):
            raise ValueError(
                "give conversation: (several execs) or exec: or call:, only one of them"
            )
        if self.call is None and not given and not talk:
            raise ValueError(
                "give exec: (the Runtime.exec call), call: (your entry point) or "
                "conversation: (several execs on one history)"
            )
        if self.call is not None and given:
            raise ValueError("give exec: or call:, not both (call: runs your own code)")
        if self.args and self.call is None:
            raise ValueError("args: go with call:")
        return self

    _roots: Any = PrivateAttr(default=None)
    """The folders the loader resolved the file's Python references from (None: built in
    Python, resolved from its ``path`` when it runs)."""
    _python: dict[str, Any] = PrivateAttr(default_factory=dict)
    """The user's objects the scenario's ``python:``/``registry:``/``call:`` references
    name, imported when a run starts (``resolve_python``), never by the loader."""

    def __eq__(self, other: object) -> bool:
        # Two scenarios are equal when their contents are: where each was loaded from (the
        # private line map) does not count.
        return type(other) is type(self) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    def script(self) -> list[ScriptStep]:
        """The ``model:`` turns as plain steps, each a :class:`~openprogram_sim.models.Turn`
        with its :class:`~openprogram_sim.models.WireFault`: what
        :class:`~openprogram_sim.models.ScriptedModel`, :func:`~openprogram_sim.wire.serve`
        and :class:`~openprogram_sim.wire.ScriptedWire` play. A ``TypeError`` when ``model:``
        names a cassette."""
        faults = [turn.wire_fault() for turn in self._model_turns()]
        return list(zip(self.turns(), faults, strict=True))

    def turns(self) -> list[Turn]:
        """The ``model:`` turns as the scripted model plays them (:meth:`script` without the
        ``wire:`` faults, which it does not play), the scenario's ``seed`` on each
        ``one_of`` turn. A ``TypeError`` when ``model:`` names a cassette."""
        turns = [turn.to_turn() for turn in self._model_turns()]
        if self.seed is None:
            return turns
        return [replace(t, seed=self.seed) if t.one_of else t for t in turns]

    def _model_turns(self) -> list[ModelTurn]:
        if not isinstance(self.model, list):
            raise TypeError(f"{self.path}: model: names a cassette, not a list of turns")
        return self.model

    def line(self, *path: Any) -> int | None:
        """The line of the key at ``path`` in the file it was loaded from (None when built
        in Python), e.g. ``scenario.line("steering", 1)``."""
        return self._lines.line(tuple(path)) if self._lines is not None else None

    def where(self, *path: Any) -> str:
        """``file:line`` of ``path`` (the file alone when the line is unknown)."""
        line = self.line(*path)
        name = self.path or "<scenario>"
        return f"{name}:{line}" if line is not None else name
