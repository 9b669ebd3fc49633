"""Loading scenario files safely, with errors that name the file, the line and the fix.

:func:`load_scenario` reports every mistake at once, each with its line: YAML syntax,
the schema (unknown keys with a did-you-mean), and the semantic checks the schema cannot
express (tools named in ``exec`` that are not defined, event names and fields, matchers).
"""

from __future__ import annotations

import difflib
import errno
import json
import stat
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from openprogram.tools import SEARCH_TOOL_NAME
from openprogram_sim.errors import ScenarioError, ScenarioIssue
from openprogram_sim.scenario._discover import CASSETTE_REASON
from openprogram_sim.scenario._python import import_roots
from openprogram_sim.scenario._schema import (
    AbortPoint,
    CallRange,
    CassetteFault,
    CassetteModel,
    ConversationStep,
    ExecArgs,
    Expect,
    FollowUp,
    HistoryMessage,
    JudgeCriterion,
    JudgeSpec,
    MessageExpect,
    ModelTurn,
    RequestExpect,
    Scenario,
    Steering,
    ToolDef,
    ToolOutcome,
)
from openprogram_sim.scenario._yaml import (
    MAX_BYTES,
    LineMap,
    YamlProblem,
    decode,
    read_yaml,
    too_large,
)
from openprogram_sim.trace import EVENT_FIELDS, check_field_value, check_matcher

__all__ = [
    "load_scenario",
    "parse_scenario",
    "python_refs",
    "ref_problem",
    "tool_name_issues",
    "where_of",
]


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


def where_of(path: tuple[Any, ...]) -> str:
    """A key path as errors write it: ``tools.search.python``, ``exec.tools[1]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _expect_key(names: list[str]) -> str:
    """Which model's keys are allowed under ``expect.<names[1]>...``."""
    if names[1:3] == ["judge", "criteria"]:
        return "criteria"
    if names[1] == "history":
        return "expect_history"
    if names[1] in ("requests", "judge", "model_calls"):
        return names[1]
    return "expect"


def _fields_of(model: type[BaseModel], path: tuple[Any, ...]) -> list[str]:
    """The keys allowed at ``path`` (for "did you mean" hints)."""
    targets: dict[str, type[BaseModel]] = {
        "": Scenario,
        "cassette": CassetteModel,
        "faults": CassetteFault,
        "exec": ExecArgs,
        "expect": Expect,
        "tool": ToolDef,
        "outcome": ToolOutcome,
        "turn": ModelTurn,
        "steering": Steering,
        "follow_ups": FollowUp,
        "requests": RequestExpect,
        "expect_history": MessageExpect,
        "history": HistoryMessage,
        "abort": AbortPoint,
        "judge": JudgeSpec,
        "criteria": JudgeCriterion,
        "model_calls": CallRange,
    }
    if path[:1] == ("conversation",):  # a step: its own keys, then the top level's
        return _fields_of(model, path[2:]) if len(path) > 2 else list(ConversationStep.model_fields)
    names = [p for p in path if isinstance(p, str)]
    if not names:
        key = ""
    elif names[0] == "tools" and len(names) >= 3 and names[2] == "exec":
        key = "exec"
    elif names[0] == "tools" and len(names) >= 3 and names[2] == "outcomes":
        key = "outcome"
    elif names[0] == "tools":
        key = "tool"
    elif names[0] == "model" and not any(isinstance(p, int) for p in path):
        key = "cassette"  # model: {cassette: ...}, a mapping
    elif names[0] == "model" and names[1:2] == ["faults"]:
        key = "faults"
    elif names[0] == "model":
        key = "turn"
    elif names[0] == "expect" and len(names) > 1:
        key = _expect_key(names)
    else:
        key = names[0]
    target = targets.get(key, model)
    return [n for n in target.model_fields if n != "path"]


def _issue_from_error(err: Any, data: Any, lines: LineMap, file: str) -> ScenarioIssue:
    loc = tuple(err["loc"])
    path = _data_path(data, loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        key = path[-1] if path else loc[-1]
        allowed = _fields_of(Scenario, path[:-1])
        close = difflib.get_close_matches(str(key), allowed, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"allowed keys: {', '.join(allowed)}"
        message = f"unknown key {key!r}; {hint}"
        return ScenarioIssue(file, lines.line(path, key=True), where_of(path), message)
    if kind == "missing":
        message = f"missing required key {loc[-1]!r}"
        return ScenarioIssue(file, lines.line(path), where_of(path), message)
    message = err["msg"].removeprefix("Value error, ")
    if kind not in ("value_error", "assertion_error"):
        message += f" (got {json.dumps(err.get('input'), default=str)[:80]})"
    return ScenarioIssue(file, lines.line(path), where_of(path), message)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _semantic_issues(
    data: dict[str, Any],
    lines: LineMap,
    file: str,
    extra_names: AbstractSet[str] | None = frozenset(),
) -> list[ScenarioIssue]:
    """Checks beyond types: names that must exist, events and their fields, matchers that
    must compile. They read the raw data (each part only where it has the right shape), so
    they run even when the schema found mistakes: a file's mistakes are reported at once.
    ``extra_names``: the tool names known beside the file's own (None: not known yet, as
    with a ``registry:``, whose names are checked when the run imports it)."""
    issues: list[ScenarioIssue] = []
    if extra_names is not None:
        issues += tool_name_issues(data, lines, file, extra_names)
    expects: list[tuple[tuple[Any, ...], Any]] = [(("expect",), data.get("expect"))]
    for k, step in enumerate(_list(data.get("conversation"))):  # each exec of a conversation
        expects.append((("conversation", k, "expect"), _dict(step).get("expect")))
    for base, raw in expects:
        _check_expect(_dict(raw), base, lines, file, issues)
    _check_abort_turn(data, lines, file, issues)
    return issues


def tool_name_issues(
    data: dict[str, Any], lines: LineMap | None, file: str, extra_names: AbstractSet[str]
) -> list[ScenarioIssue]:
    """Every tool name the file uses (``exec.tools``, toolsets, nested and conversation
    execs, ``expect.requests`` tools, the calls of ``expect.trajectory`` and the tools of
    ``expect.properties`` rules) that is neither one of its ``tools:`` nor in
    ``extra_names`` (a registry's), each with its line and a did-you-mean. A trajectory or
    rule may also name a tool the scripted model calls (a call of an unknown tool is a
    behaviour a scenario tests)."""
    issues: list[ScenarioIssue] = []
    tools = _dict(data.get("tools"))
    defined = {str(name) for name in tools} | set(extra_names)

    def check_names(
        names: Any, path: tuple[Any, ...], what: str, known: AbstractSet[str] = defined
    ) -> None:
        for i, name in enumerate(_list(names)):
            if isinstance(name, str) and name not in known:
                issues.append(_unknown_tool(name, (*path, i), what, known, lines, file))

    check_names(_dict(data.get("exec")).get("tools"), ("exec", "tools"), "exec.tools")
    for tool_name, tool in tools.items():
        nested = _dict(_dict(tool).get("exec"))
        check_names(nested.get("tools"), ("tools", tool_name, "exec", "tools"), "exec.tools")
    for set_name, members in _dict(data.get("toolsets")).items():
        check_names(members, ("toolsets", set_name), f"toolset {set_name!r}")
    expects: list[tuple[tuple[Any, ...], Any]] = [(("expect",), data.get("expect"))]
    for k, step in enumerate(_list(data.get("conversation"))):  # each exec of a conversation
        step_exec = _dict(_dict(step).get("exec")).get("tools")
        check_names(step_exec, ("conversation", k, "exec", "tools"), "exec.tools")
        expects.append((("conversation", k, "expect"), _dict(step).get("expect")))
    if "call" in data:  # with `call:`, the user's function may exec with tools of its own
        return issues
    offered = defined | {SEARCH_TOOL_NAME}  # offered by the loop when a tool is deferred
    called = offered | _scripted_names(data.get("model"))
    for base, raw in expects:
        for i, request in enumerate(_list(_dict(raw).get("requests"))):
            where = (*base, "requests", i, "tools")
            check_names(_dict(request).get("tools"), where, where_of(where), offered)
        issues += [
            _unknown_tool(name, path, what, called, lines, file)
            for path, name, what in _expected_names(_dict(raw), base)
            if name not in called
        ]
    return issues


def _unknown_tool(
    name: str,
    path: tuple[Any, ...],
    what: str,
    known: AbstractSet[str],
    lines: LineMap | None,
    file: str,
) -> ScenarioIssue:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f"did you mean {close[0]!r}?" if close else "define it under `tools:`"
    return ScenarioIssue(
        file,
        lines.line(path) if lines is not None else None,
        where_of(path),
        f"{what} names tool {name!r}, which is not defined; {hint}",
    )


def _scripted_names(model: Any) -> set[str]:
    """The tools the scripted model's turns call, in any option of a ``one_of`` turn (none
    for a cassette)."""
    names = set()
    turns = [t for turn in _list(model) for t in [turn, *_list(_dict(turn).get("one_of"))]]
    for turn in turns:
        for call in _list(_dict(turn).get("tool_calls")):
            call = _dict(call)
            name = call.get("name") if "name" in call else next(iter(call), None)
            if isinstance(name, str):
                names.add(name)
    return names


def _expected_names(
    expect: dict[str, Any], base: tuple[Any, ...]
) -> Iterator[tuple[tuple[Any, ...], str, str]]:
    """``(path, name, what)`` of each tool an ``expect:``'s trajectory calls and its rules
    name (``what``: the trajectory, or ``property 2 (at_most)``)."""
    calls = _list(_dict(expect.get("trajectory")).get("calls"))
    for i, entry in enumerate(calls):
        group = entry if isinstance(entry, list) else [entry]
        for j, member in enumerate(group):
            path = (*base, "trajectory", "calls", i, *((j,) if isinstance(entry, list) else ()))
            names = [member] if isinstance(member, str) else list(_dict(member))
            names = [n for n in names if n != "args_mode"]
            if len(names) == 1 and isinstance(names[0], str):  # else the schema says why
                yield path, names[0], "the trajectory"
    for i, rule in enumerate(_list(expect.get("properties"))):
        for rule_name, params in _dict(rule).items():
            if rule_name == "ends_with" and not isinstance(params, dict):
                continue  # its short form is no tool's name (the rule's check says so)
            what = f"property {i + 1} ({rule_name})"
            for path, name in _selector_names(params, (*base, "properties", i, rule_name)):
                yield path, name, what


NamedTool = tuple[tuple[Any, ...], str]

_NAMING_KEYS = ("tool", "after", "first", "then", "$in")
"""The keys of a rule's parameters that hold a tool's name, a selector or names."""


def _selector_names(value: Any, path: tuple[Any, ...]) -> Iterator[NamedTool]:
    """The plain tool names in a rule's parameters: a name, a selector's ``tool`` (or the
    names of its ``$in``), and the selectors under ``after``/``first``/``then``/lists."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _selector_names(item, (*path, i))
    elif isinstance(value, dict):
        for key in _NAMING_KEYS:
            if key in value:
                yield from _selector_names(value[key], (*path, key))


def _check_expect(
    expect: dict[str, Any],
    base: tuple[Any, ...],
    lines: LineMap,
    file: str,
    issues: list[ScenarioIssue],
) -> None:
    """An ``expect:`` mapping's events, counts and matchers (``base``: where it is)."""
    _check_events(_list(expect.get("events")), (*base, "events"), lines, file, issues)
    _check_events(_list(expect.get("not_events")), (*base, "not_events"), lines, file, issues)
    for event_type in _dict(expect.get("counts")):
        if event_type not in EVENT_FIELDS:
            issues.append(_unknown_event(event_type, (*base, "counts", event_type), lines, file))
    _check_value_matchers(expect, lines, file, issues, base)


def _check_abort_turn(
    data: dict[str, Any], lines: LineMap, file: str, issues: list[ScenarioIssue]
) -> None:
    """``abort: {during_turn: N}`` needs a moment while turn N is in flight: its latency, a
    streamed piece, or a hang."""
    n = _dict(data.get("abort")).get("during_turn")
    turns = data.get("model")
    if not isinstance(n, int) or not isinstance(turns, list) or not 1 <= n <= len(turns):
        return
    turn = _dict(turns[n - 1])
    streams = any(turn.get(k) for k in ("text", "thinking", "tool_calls"))
    if streams or turn.get("latency") or turn.get("fault") == "hang":
        return
    path = ("abort", "during_turn")
    issues.append(
        ScenarioIssue(
            file,
            lines.line(path),
            where_of(path),
            f"model turn {n} streams nothing and does not wait, so no abort can land while it "
            "is in flight; give it latency: or fault: hang (a model that never answers), or "
            "abort after_round: instead",
        )
    )


def _check_value_matchers(
    expect: dict[str, Any],
    lines: LineMap,
    file: str,
    issues: list[ScenarioIssue],
    base: tuple[Any, ...] = ("expect",),
) -> None:
    checks: list[tuple[tuple[Any, ...], Any]] = []
    if "result" in expect:
        checks.append(((*base, "result"), expect["result"]))
    for i, request in enumerate(_list(expect.get("requests"))):
        for name, value in _dict(request).items():
            checks.append(((*base, "requests", i, name), value))
    for path, value in checks:
        problem = check_matcher(value)
        if problem:
            issues.append(ScenarioIssue(file, lines.line(path), where_of(path), problem))
    for i, message in enumerate(_list(expect.get("history"))):
        for name, value in _dict(message).items():
            path = (*base, "history", i, name)
            problem = check_matcher(value) or check_field_value(name, value)
            if problem:
                issues.append(ScenarioIssue(file, lines.line(path), where_of(path), problem))


def _unknown_event(name: str, path: tuple[Any, ...], lines: LineMap, file: str) -> ScenarioIssue:
    close = difflib.get_close_matches(name, list(EVENT_FIELDS), n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"events are: {', '.join(EVENT_FIELDS)}"
    return ScenarioIssue(
        file, lines.line(path, key=True), where_of(path), f"unknown event {name!r}; {hint}"
    )


def _check_events(
    events: list[object],
    base: tuple[Any, ...],
    lines: LineMap,
    file: str,
    issues: list[ScenarioIssue],
) -> None:
    for i, item in enumerate(events):
        path = (*base, i)
        if not isinstance(item, dict):
            continue  # the schema reports the wrong type
        if len(item) != 1:
            issues.append(
                ScenarioIssue(
                    file,
                    lines.line(path),
                    where_of(path),
                    "an expected event is one key, the event type: {tool_execution_end: {...}}",
                )
            )
            continue
        ((event_type, fields),) = item.items()
        if not isinstance(fields, dict) and fields is not None:
            continue  # the schema reports the wrong type
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
                        where_of(fpath),
                        f"{event_type} has no field {name!r}; {hint}",
                    )
                )
            problem = check_matcher(value) or check_field_value(name, value)
            if problem:
                issues.append(ScenarioIssue(file, lines.line(fpath), where_of(fpath), problem))


def parse_scenario(
    text: str,
    path: str = "<string>",
    *,
    pythonpath: Sequence[str | Path] = (),
    origin: str | Path | None = None,
) -> Scenario:
    """Parse and validate scenario YAML; raises :class:`ScenarioError` listing every issue.

    ``path`` names the file in errors; ``origin`` is where it really is (default: ``path``),
    from which the user's Python it references is imported (see :mod:`._python`), with
    ``pythonpath`` folders added."""
    try:
        document = read_yaml(text)
    except YamlProblem as exc:
        raise ScenarioError([ScenarioIssue(path, exc.line, "", exc.message)]) from None
    data, lines = document.data, document.lines
    shape = _not_a_scenario_shape(data, document.empty)
    if shape is not None:
        raise ScenarioError([ScenarioIssue(path, 1, "", shape)])
    issues = [
        ScenarioIssue(
            path,
            again,
            where_of(where),
            f"key {where[-1]!r} is given twice (lines {first} and {again}); keep one",
        )
        for where, first, again in document.duplicates
    ]
    scenario: Scenario | None = None
    try:
        scenario = Scenario.model_validate({**data, "path": path})
    except ValidationError as exc:
        issues += [_issue_from_error(e, data, lines, path) for e in exc.errors()]
    extra_names: set[str] | None = set()
    if scenario is not None and (_names_python(scenario) or scenario.setup or scenario.teardown):
        place = str(origin) if origin is not None else path
        # nothing is imported here: the run imports and checks what the file names (a file
        # that is only collected, filtered out or served runs none of its Python)
        scenario._roots = import_roots(place if Path(place).exists() else None, pythonpath)
        issues += _ref_issues(scenario, lines, path)
        if scenario.registry:
            extra_names = None  # its names are known once the run imports it
    issues += _semantic_issues(data, lines, path, extra_names)
    if issues or scenario is None:
        raise ScenarioError(sorted(issues, key=lambda i: i.line or 0)) from None
    scenario._lines = lines
    return scenario


MINIMAL = (
    '{scenario: hello, exec: {content: "Hi"}, model: [{text: "Hello"}], expect: {result: "Hello"}}'
)
"""The smallest scenario that runs and passes (one line of flow YAML), quoted by the
message for an empty file."""


def _not_a_scenario_shape(data: Any, empty: bool) -> str | None:
    """What is wrong with a document that is not a scenario mapping at all, or None."""
    if empty:
        return (
            "the file is empty (no YAML in it, only blank lines or comments); a minimal "
            f"scenario is {MINIMAL}, or run `openprogram-sim init MODULE` for a starter over "
            "your tools"
        )
    if not isinstance(data, dict):
        return "a scenario file is a mapping with `scenario:`, `exec:`, `model:` and `expect:` keys"
    if "interactions" in data and "scenario" not in data:
        return (
            f"this file is {CASSETTE_REASON}; run the scenario that replays it "
            "(`model: {cassette: ...}`), or its folder, where cassettes are left alone"
        )
    return None


def _names_python(scenario: Scenario) -> bool:
    return bool(scenario.registry or scenario.call) or any(
        t.python for t in scenario.tools.values()
    )


def python_refs(scenario: Scenario) -> list[tuple[tuple[str, ...], str]]:
    """Where each ``python:``, ``registry:`` and ``call:`` reference of the file is (its key
    path), and the reference: what a run imports."""
    refs: list[tuple[tuple[str, ...], str]] = [
        (("tools", n, "python"), t.python) for n, t in scenario.tools.items() if t.python
    ]
    if scenario.registry:
        refs.append((("registry",), scenario.registry))
    if scenario.call:
        refs.append((("call",), scenario.call))
    return refs


def ref_problem(ref: str) -> str | None:
    """What is wrong with how ``ref`` is written (not ``package.module:name``), or None."""
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        return f"{ref!r} is not a reference: write it as 'package.module:name'"
    return None


def _ref_issues(scenario: Scenario, lines: LineMap, file: str) -> list[ScenarioIssue]:
    """The references that are not written as ``package.module:name`` (found without
    importing anything)."""
    issues = []
    for where, ref in python_refs(scenario):
        problem = ref_problem(ref)
        if problem is not None:
            issues.append(ScenarioIssue(file, lines.line(where), where_of(where), problem))
    return issues


def load_scenario(
    path: str | Path, *, shown_as: str | None = None, pythonpath: Sequence[str | Path] = ()
) -> Scenario:
    """Load one scenario file (a regular file of UTF-8 text, at most ``MAX_BYTES``);
    errors name it ``shown_as`` when given (e.g. relative to a project's root). The user's
    Python it references is imported from its folder, the current directory, the
    ``[tool.openprogram] pythonpath`` of the nearest ``pyproject.toml`` and ``pythonpath``."""
    file = Path(path)
    shown = shown_as if shown_as is not None else str(path)
    try:
        raw = _read(file)
        text = decode(raw)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno == errno.ELOOP:
            reason = "a symbolic link loop (a link that points back to itself)"
        raise ScenarioError([ScenarioIssue(shown, None, "", f"cannot read: {reason}")]) from None
    except YamlProblem as exc:
        raise ScenarioError([ScenarioIssue(shown, exc.line, "", exc.message)]) from None
    return parse_scenario(text, shown, pythonpath=pythonpath, origin=file)


def _read(file: Path) -> bytes:
    """The file's bytes; anything but a regular file (a FIFO, a device, a folder) is refused
    before it is opened, so a FIFO named ``*.yaml`` cannot block the run."""
    info = file.stat()
    if not stat.S_ISREG(info.st_mode):
        raise YamlProblem(None, "not a regular file (a folder, a FIFO or a device); skipped")
    if info.st_size > MAX_BYTES:
        raise too_large(info.st_size)
    with file.open("rb") as handle:
        return handle.read(MAX_BYTES + 1)  # +1: a file that grew since is still caught
