"""The scenario file's schema: pydantic models, and the JSON Schema editors use.

A scenario is one YAML file (see the README): the tools to simulate, the ``exec`` call, the
scripted model turns, steering and follow-up injection points, and the expectations.
:func:`json_schema` is what ``openprogram-sim schema`` prints.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)

__all__ = [
    "CassetteModel",
    "EventExpect",
    "ExecArgs",
    "Expect",
    "FollowUp",
    "ModelTurn",
    "RaisesSpec",
    "RequestExpect",
    "Scenario",
    "Steering",
    "ToolDef",
    "json_schema",
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


class ToolDef(_Model):
    """A simulated tool. At most one of ``returns``, ``raises`` and ``exec``."""

    description: str = ""
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the arguments.",
    )
    returns: Any = Field(
        None, description="The result: a value, or a list of values (one per call; last repeats)."
    )
    raises: str | None = Field(None, description="The tool raises with this message.")
    exec: ExecArgs | None = Field(None, description="The tool's body calls exec (nested loop).")
    defer: bool = Field(False, description="Deferred: loaded through tool_search.")
    toolsets: list[str] = Field(default_factory=list, description="Toolsets it belongs to.")
    expose: bool = True
    unsafe_in: list[str] = Field(default_factory=list, description="Sources it is unsafe in.")
    requires_env: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_behaviour(self) -> ToolDef:
        given = [k for k in ("returns", "raises", "exec") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"a tool has one behaviour; it gives {' and '.join(given)}: keep one")
        return self


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
    usage: dict[str, int] | None = None
    fault: Literal["truncate", "raise", "hang"] | None = None
    latency: float = Field(0.0, ge=0, description="Seconds on the virtual clock.")

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


class CassetteModel(_Model):
    """``model: {cassette: path}``: replay recorded provider HTTP through a real adapter."""

    cassette: str


def _model_tag(value: Any) -> str:
    return "cassette" if isinstance(value, (dict, CassetteModel)) else "turns"


ModelField = Annotated[
    Annotated[list[ModelTurn], Tag("turns")] | Annotated[CassetteModel, Tag("cassette")],
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


EventExpect = dict[str, dict[str, Any]]


class RaisesSpec(_Model):
    """``raises: {type: ModelError, message: quota}``: both optional."""

    type: str | None = Field(None, description="The error class name (or a base class name).")
    message: str | None = Field(None, description="Text the error message contains.")


class Expect(_Model):
    result: Any = Field(None, description="What exec returned (a value or a matcher).")
    raises: bool | str | RaisesSpec = Field(
        False,
        description="true: exec must raise; text: its message contains it; or {type, message}.",
    )
    model_calls: int | None = None
    requests: list[RequestExpect] = Field(default_factory=list)
    events: list[EventExpect] = Field(default_factory=list)
    events_mode: Literal["ordered", "exact", "unordered"] = "ordered"
    not_events: list[EventExpect] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict, description="Event type -> how many.")


class Scenario(_Model):
    """One scenario file."""

    scenario: str = Field(description="The title.")
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    system_prompt: str = ""
    tools: dict[str, ToolDef] = Field(default_factory=dict)
    toolsets: dict[str, list[str]] = Field(
        default_factory=dict, description="Named toolsets over the scenario's tools."
    )
    exec: ExecArgs
    model: ModelField
    steering: list[Steering] = Field(default_factory=list)
    follow_ups: list[FollowUp] = Field(default_factory=list)
    expect: Expect = Field(default_factory=Expect)
    path: str = Field("", exclude=True, description="(set by the loader)")


def json_schema() -> dict[str, Any]:
    """The JSON Schema of scenario files."""
    schema = Scenario.model_json_schema()
    schema["properties"].pop("path", None)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "openprogram scenario"
    return schema
