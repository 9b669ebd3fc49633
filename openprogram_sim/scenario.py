"""Scenario files: the schema, safe loading, and errors that name the file, line and fix.

A scenario is one YAML file (see DESIGN.md and the README): the tools to simulate, the
``exec`` call, the scripted model turns, steering and follow-up injection points, and the
expectations. :func:`load_scenario` reports every mistake at once, each with its line.
:func:`json_schema` is the JSON Schema editors use (``openprogram-sim schema``).
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    model_validator,
)

from openprogram_sim.errors import ScenarioError, ScenarioIssue
from openprogram_sim.matchers import check_matcher

__all__ = [
    "EVENT_FIELDS",
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
    "discover",
    "json_schema",
    "load_scenario",
    "parse_scenario",
]

_BASE = ("type", "depth", "round")
_MESSAGE = (*_BASE, "role", "text", "tool_calls", "stop_reason", "error", "tool_call_id",
            "tool_name", "is_error")  # fmt: skip
_TOOL = (*_BASE, "tool_call_id", "tool_name", "args")
EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "agent_start": _BASE,
    "agent_end": (*_BASE, "reason"),
    "turn_start": _BASE,
    "turn_end": (*_BASE, "tool_calls", "stop_reason", "tool_results"),
    "message_start": _MESSAGE,
    "message_update": _MESSAGE,
    "message_end": _MESSAGE,
    "tool_execution_start": _TOOL,
    "tool_execution_update": (*_TOOL, "partial_result"),
    "tool_execution_end": (*_TOOL, "result", "is_error"),
}
"""Which trace fields each event type has (what an expectation may name)."""


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


# --------------------------------------------------------------------------- loading


class _Lines:
    """Line numbers of every key and value in a YAML document, by key path."""

    def __init__(self, node: yaml.Node | None) -> None:
        self.keys: dict[tuple[Any, ...], int] = {}
        self.values: dict[tuple[Any, ...], int] = {}
        if node is not None:
            self._walk(node, ())

    def _walk(self, node: yaml.Node, path: tuple[Any, ...]) -> None:
        self.values[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                sub = (*path, key.value)
                self.keys[sub] = key.start_mark.line + 1
                self._walk(value, sub)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._walk(item, (*path, i))

    def line(self, path: tuple[Any, ...], *, key: bool = True) -> int | None:
        """The line of the key at ``path`` (or of its value, for list items and when
        ``key=False``), else of the nearest enclosing node."""
        while path:
            first, second = (self.keys, self.values) if key else (self.values, self.keys)
            found = first.get(path) or second.get(path)
            if found is not None:
                return found
            path = path[:-1]
        return self.values.get(())


def _data_path(data: Any, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """The part of a pydantic error location that exists in the data (union tags and
    validator names dropped)."""
    path: list[Any] = []
    node = data
    for part in loc:
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_dict or in_list:
            node = node[part]
            path.append(part)
    return tuple(path)


def _where(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _fields_of(model: type[BaseModel], path: tuple[Any, ...]) -> list[str]:
    """The keys allowed at ``path`` (for "did you mean" hints)."""
    targets: dict[str, type[BaseModel]] = {
        "": Scenario,
        "exec": ExecArgs,
        "expect": Expect,
        "tool": ToolDef,
        "turn": ModelTurn,
        "steering": Steering,
        "follow_ups": FollowUp,
        "requests": RequestExpect,
    }
    names = [p for p in path if isinstance(p, str)]
    if not names:
        key = ""
    elif names[0] == "tools" and len(names) >= 3 and names[2] == "exec":
        key = "exec"
    elif names[0] == "tools":
        key = "tool"
    elif names[0] == "model":
        key = "turn"
    elif names[0] == "expect" and len(names) > 1 and names[1] == "requests":
        key = "requests"
    else:
        key = names[0]
    target = targets.get(key, model)
    return [n for n in target.model_fields if n != "path"]


def _issue_from_error(err: Any, data: Any, lines: _Lines, file: str) -> ScenarioIssue:
    loc = tuple(err["loc"])
    path = _data_path(data, loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        key = path[-1] if path else loc[-1]
        allowed = _fields_of(Scenario, path[:-1])
        close = difflib.get_close_matches(str(key), allowed, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"allowed keys: {', '.join(allowed)}"
        message = f"unknown key {key!r}; {hint}"
        return ScenarioIssue(file, lines.line(path, key=True), _where(path), message)
    if kind == "missing":
        message = f"missing required key {loc[-1]!r}"
        return ScenarioIssue(file, lines.line(path), _where(path), message)
    message = err["msg"].removeprefix("Value error, ")
    if kind not in ("value_error", "assertion_error"):
        message += f" (got {json.dumps(err.get('input'), default=str)[:80]})"
    return ScenarioIssue(file, lines.line(path), _where(path), message)


def _semantic_issues(scenario: Scenario, lines: _Lines, file: str) -> list[ScenarioIssue]:
    """Checks beyond types: names that must exist, matchers that must compile."""
    issues: list[ScenarioIssue] = []
    defined = set(scenario.tools)

    def check_names(names: list[str] | None, path: tuple[Any, ...], what: str) -> None:
        for i, name in enumerate(names or []):
            if name not in defined:
                close = difflib.get_close_matches(name, sorted(defined), n=1)
                hint = f"did you mean {close[0]!r}?" if close else "define it under `tools:`"
                issues.append(
                    ScenarioIssue(
                        file,
                        lines.line((*path, i)),
                        _where((*path, i)),
                        f"{what} names tool {name!r}, which is not defined; {hint}",
                    )
                )

    if isinstance(scenario.model, CassetteModel):
        issues.append(
            ScenarioIssue(
                file,
                lines.line(("model", "cassette")),
                "model.cassette",
                "model: {cassette: ...} (replaying recorded provider HTTP) is not supported by "
                "this version yet; script the model's turns as a list under `model:`",
            )
        )
    check_names(scenario.exec.tools, ("exec", "tools"), "exec.tools")
    for tool_name, tool in scenario.tools.items():
        if tool.exec is not None:
            check_names(tool.exec.tools, ("tools", tool_name, "exec", "tools"), "exec.tools")
    for set_name, members in scenario.toolsets.items():
        check_names(members, ("toolsets", set_name), f"toolset {set_name!r}")
    _check_events(scenario.expect.events, ("expect", "events"), lines, file, issues)
    _check_events(scenario.expect.not_events, ("expect", "not_events"), lines, file, issues)
    for event_type in scenario.expect.counts:
        if event_type not in EVENT_FIELDS:
            issues.append(_unknown_event(event_type, ("expect", "counts", event_type), lines, file))
    _check_value_matchers(scenario, lines, file, issues)
    return issues


def _check_value_matchers(
    scenario: Scenario, lines: _Lines, file: str, issues: list[ScenarioIssue]
) -> None:
    checks: list[tuple[tuple[Any, ...], Any]] = [(("expect", "result"), scenario.expect.result)]
    for i, request in enumerate(scenario.expect.requests):
        for name, value in request.model_dump(exclude_none=True).items():
            checks.append((("expect", "requests", i, name), value))
    for path, value in checks:
        problem = check_matcher(value)
        if problem:
            issues.append(ScenarioIssue(file, lines.line(path), _where(path), problem))


def _unknown_event(name: str, path: tuple[Any, ...], lines: _Lines, file: str) -> ScenarioIssue:
    close = difflib.get_close_matches(name, list(EVENT_FIELDS), n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"events are: {', '.join(EVENT_FIELDS)}"
    return ScenarioIssue(
        file, lines.line(path, key=True), _where(path), f"unknown event {name!r}; {hint}"
    )


def _check_events(
    events: list[EventExpect],
    base: tuple[Any, ...],
    lines: _Lines,
    file: str,
    issues: list[ScenarioIssue],
) -> None:
    for i, item in enumerate(events):
        path = (*base, i)
        if len(item) != 1:
            issues.append(
                ScenarioIssue(
                    file,
                    lines.line(path),
                    _where(path),
                    "an expected event is one key, the event type: {tool_execution_end: {...}}",
                )
            )
            continue
        ((event_type, fields),) = item.items()
        if event_type not in EVENT_FIELDS:
            issues.append(_unknown_event(event_type, (*path, event_type), lines, file))
            continue
        allowed = EVENT_FIELDS[event_type]
        for name, value in (fields or {}).items():
            fpath = (*path, event_type, name)
            if name not in allowed:
                close = difflib.get_close_matches(name, allowed, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"fields: {', '.join(allowed)}"
                issues.append(
                    ScenarioIssue(
                        file,
                        lines.line(fpath, key=True),
                        _where(fpath),
                        f"{event_type} has no field {name!r}; {hint}",
                    )
                )
            problem = check_matcher(value)
            if problem:
                issues.append(ScenarioIssue(file, lines.line(fpath), _where(fpath), problem))


def parse_scenario(text: str, path: str = "<string>") -> Scenario:
    """Parse and validate scenario YAML; raises :class:`ScenarioError` listing every issue."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError([ScenarioIssue(path, line, "", f"not valid YAML: {problem}")]) from None
    lines = _Lines(node)
    if not isinstance(data, dict):
        raise ScenarioError(
            [
                ScenarioIssue(
                    path,
                    1,
                    "",
                    "a scenario file is a mapping with `scenario:`, `exec:`,"
                    " `model:` and `expect:` keys",
                )
            ]
        )
    try:
        scenario = Scenario.model_validate({**data, "path": path})
    except ValidationError as exc:
        issues = [_issue_from_error(e, data, lines, path) for e in exc.errors()]
        raise ScenarioError(sorted(issues, key=lambda i: i.line or 0)) from None
    issues = _semantic_issues(scenario, lines, path)
    if issues:
        raise ScenarioError(sorted(issues, key=lambda i: i.line or 0))
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    """Load one scenario file."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError([ScenarioIssue(str(path), None, "", f"cannot read: {exc}")]) from None
    return parse_scenario(text, str(path))


def discover(paths: list[str | Path]) -> list[Path]:
    """Every ``*.yaml``/``*.yml`` file under ``paths`` (files are taken as given), sorted."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found.extend(sorted(q for q in p.rglob("*") if q.suffix in (".yaml", ".yml")))
        elif p.exists():
            found.append(p)
        else:
            raise ScenarioError([ScenarioIssue(str(p), None, "", "no such file or directory")])
    return found
