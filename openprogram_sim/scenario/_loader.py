"""Loading scenario files safely, with errors that name the file, the line and the fix.

:func:`load_scenario` reports every mistake at once, each with its line: YAML syntax,
the schema (unknown keys with a did-you-mean), and the semantic checks the schema cannot
express (tools named in ``exec`` that are not defined, event names and fields, matchers).
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from openprogram_sim.errors import ScenarioError, ScenarioIssue
from openprogram_sim.scenario._schema import (
    CassetteModel,
    EventExpect,
    ExecArgs,
    Expect,
    FollowUp,
    ModelTurn,
    RequestExpect,
    Scenario,
    Steering,
    ToolDef,
)
from openprogram_sim.trace import EVENT_FIELDS, check_matcher

__all__ = ["discover", "load_scenario", "parse_scenario"]


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
