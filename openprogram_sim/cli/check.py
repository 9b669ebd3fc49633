"""``openprogram-sim check TRACE_FILE --properties FILE [--trajectory FILE]``: the rules a
suite's scenarios use, checked on a trace that did not come from a run here (a production
log, another machine's ``run --json``).

The trace file is JSON, one of

- OpenTelemetry GenAI spans as OTLP JSON (``{"resourceSpans": [...]}``, or one such object
  a line), told by that key: each trace id is one trace, rebuilt from its ``invoke_agent``,
  ``chat`` and ``execute_tool`` spans (:mod:`openprogram_sim.trace._otel`),
- a list of trace entries (each ``{"type": ..., "depth": ..., "round": ...}`` and the fields
  of its event, as :mod:`openprogram_sim.trace` normalizes them),
- ``{"trace": [entries]}`` (optionally with ``"path"`` or ``"title"`` naming it): one run,
- the whole output of ``openprogram-sim run --json``: each scenario's ``trace`` is checked.

The properties file is YAML (or JSON): a list of rules, or a mapping whose ``properties:``
holds them, as in a scenario's ``expect:``. The trajectory file is the mapping of
``expect.trajectory`` (or a mapping whose ``trajectory:`` holds it). Exit status: 0 when every
trace holds, 1 when one breaks a rule or misses its trajectory, 2 when a file cannot be read.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from openprogram_sim.errors import ScenarioIssue
from openprogram_sim.scenario import MAX_BYTES
from openprogram_sim.trace import (
    Failure,
    Trajectory,
    check_properties,
    check_rule,
    describe_rule,
    match_trajectory,
    render_failures,
)
from openprogram_sim.trace._otel import OtlpError, is_otlp, otlp_traces

__all__ = [
    "CheckFileError",
    "Expectations",
    "add_parser",
    "command",
    "read_expectations",
    "read_rules",
    "read_traces",
]


class CheckFileError(Exception):
    """A file ``check`` reads cannot be used; the message names the file, the line, the fix."""


@dataclass(slots=True)
class _Yaml:
    """A YAML file's data and the node tree its lines come from."""

    path: str
    data: Any
    root: yaml.Node | None

    def line(self, *path: Any) -> int | None:
        """The line of the value at ``path`` (keys and list indexes), or of the nearest
        part of it that exists."""
        node, found = self.root, None
        for part in path:
            if isinstance(node, yaml.MappingNode):
                found = next((v for k, v in node.value if k.value == str(part)), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                found = node.value[part] if 0 <= part < len(node.value) else None
            else:
                found = None
            if found is None:
                break
            node = found
        return node.start_mark.line + 1 if node is not None else None

    def where(self, *path: Any) -> str:
        line = self.line(*path)
        return f"{self.path}:{line}" if line is not None else self.path


def _read_text(path: str) -> str:
    file = Path(path)
    try:
        if not file.is_file():
            raise CheckFileError(f"{path}: not a file (give the path of a file to read)")
        if file.stat().st_size > MAX_BYTES:
            raise CheckFileError(f"{path}: larger than {MAX_BYTES // 2**20} MiB; refused")
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckFileError(f"{path}: cannot read: {exc}") from None


def _read_yaml(path: str) -> _Yaml:
    text = _read_text(path)
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                mark = event.start_mark
                line = f":{mark.line + 1}" if mark is not None else ""
                raise CheckFileError(
                    f"{path}{line}: an alias (*name); write the value out (aliases are not "
                    "read here)"
                )
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise CheckFileError(f"{path}{line}: not YAML: {problem}") from None
    return _Yaml(path, data, root)


def _issue(doc: _Yaml, base: tuple[Any, ...], exc: ValidationError) -> list[str]:
    out = []
    for e in exc.errors():
        loc = (*base, *e["loc"])
        message = str(e["msg"]).removeprefix("Value error, ")
        if e["type"] not in ("value_error", "missing"):
            message += f" (got {json.dumps(e.get('input'), default=str)[:80]})"
        if e["type"] == "missing":
            message = f"missing required key {e['loc'][-1]!r}"
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        out.append(str(ScenarioIssue(doc.path, doc.line(*loc), where, message)))
    return out


def read_rules(path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The rules in ``path`` and, for each, its ``file:line``; raises :class:`CheckFileError`
    naming every rule that is wrong."""
    doc = _read_yaml(path)
    base: tuple[Any, ...] = ()
    rules = doc.data
    if isinstance(rules, dict) and "properties" in rules:
        base, rules = ("properties",), rules["properties"]
    if not isinstance(rules, list):
        raise CheckFileError(
            f"{path}: a properties file is a list of rules (- at_most: {{tool: search, "
            "times: 3}), or a mapping whose properties: holds them"
        )
    problems: list[str] = []
    for i, rule in enumerate(rules):
        try:
            check_rule(rule)
        except ValidationError as exc:
            problems += _issue(doc, (*base, i), exc)
    if problems:
        raise CheckFileError("\n".join(problems))
    return rules, [doc.where(*base, i) for i in range(len(rules))]


def read_trajectory(path: str) -> tuple[Trajectory, _Yaml, tuple[Any, ...]]:
    """The trajectory in ``path``, its document and where in it the trajectory is."""
    doc = _read_yaml(path)
    base: tuple[Any, ...] = ()
    data = doc.data
    if isinstance(data, dict) and "trajectory" in data:
        base, data = ("trajectory",), data["trajectory"]
    if not isinstance(data, dict):
        raise CheckFileError(
            f"{path}: a trajectory file is the mapping of expect.trajectory (mode:, args:, "
            "depth:, calls:, min_score:), or a mapping whose trajectory: holds it"
        )
    try:
        return Trajectory.model_validate(data), doc, base
    except ValidationError as exc:
        raise CheckFileError("\n".join(_issue(doc, base, exc))) from None


@dataclass(frozen=True, slots=True)
class Expectations:
    """What a properties file holds: its rules with the ``file:line`` of each, and its
    trajectory (the mapping) with where it is."""

    rules: list[dict[str, Any]]
    lines: list[str]
    trajectory: dict[str, Any] | None
    trajectory_where: str


_FILE_KEYS = ("properties", "trajectory")


def read_expectations(path: str) -> Expectations:
    """A properties file as ``fuzz --properties`` reads it: what ``check --properties``
    reads (a list of rules, or a mapping whose ``properties:`` holds them), and in the
    mapping, optionally, ``trajectory:`` (as ``check --trajectory`` reads it). Raises
    :class:`CheckFileError` naming the file, the line and the fix."""
    doc = _read_yaml(path)
    data = doc.data
    if isinstance(data, dict):
        for key in data:
            if key not in _FILE_KEYS:
                close = difflib.get_close_matches(str(key), _FILE_KEYS, n=1)
                hint = f"did you mean {close[0]!r}?" if close else "keys: properties, trajectory"
                raise CheckFileError(f"{doc.where(key)}: unknown key {key!r}; {hint}")
        if not data:
            raise CheckFileError(f"{path}: empty; give properties: (a list of rules)")
    rules: list[dict[str, Any]] = []
    lines: list[str] = []
    if not isinstance(data, dict) or "properties" in data:
        rules, lines = read_rules(path)
    trajectory, where = None, path
    if isinstance(data, dict) and "trajectory" in data:
        _, tdoc, base = read_trajectory(path)
        trajectory, where = dict(data["trajectory"]), tdoc.where(*base)
    return Expectations(rules, lines, trajectory, where)


def read_traces(path: str) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Each trace in the JSON file ``path``, with the name it is reported by."""
    text = _read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and '"resourceSpans"' in text:  # OTLP JSON Lines
            yield from _spans(text, path)
            return
        raise CheckFileError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    if is_otlp(data):
        yield from _spans(data, path)
        return
    if isinstance(data, dict) and isinstance(data.get("scenarios"), list):
        runs = [(f"{path}: {s.get('path', i + 1)}", s) for i, s in enumerate(data["scenarios"])]
        runs = [(name, s) for name, s in runs if isinstance(s, dict) and "trace" in s]
    elif isinstance(data, dict) and "trace" in data:
        runs = [(path, data)]
    elif isinstance(data, list):
        runs = [(path, {"trace": data})]
    else:
        raise CheckFileError(
            f'{path}: a trace file is a JSON list of trace entries, {{"trace": [...]}}, or '
            "the output of openprogram-sim run --json"
        )
    for name, run in runs:
        trace = run["trace"]
        if not isinstance(trace, list):
            raise CheckFileError(f'{name}: "trace" is a list of entries')
        for i, entry in enumerate(trace):
            if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
                raise CheckFileError(
                    f'{name}: entry {i} is not a trace entry (a mapping with "type", '
                    '"depth" and "round")'
                )
        yield name, trace


def _spans(data: Any, path: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """The traces OpenTelemetry GenAI spans (OTLP JSON) rebuild."""
    try:
        return otlp_traces(data, path)
    except OtlpError as exc:
        raise CheckFileError(str(exc)) from None


def _check_one(
    trace: list[dict[str, Any]],
    rules: list[dict[str, Any]],
    rule_lines: list[str],
    trajectory: tuple[Trajectory, _Yaml, tuple[Any, ...]] | None,
) -> tuple[list[Failure], str]:
    """The failures of one trace, and its trajectory's score (``""`` without one)."""
    failures: list[Failure] = []
    score = ""
    if trajectory is not None:
        spec, doc, base = trajectory
        result = match_trajectory(trace, spec)
        score = f"  (trajectory score {result.score:.2f})"
        if not result.passed:

            def line(item: int, member: int | None) -> int | None:
                path = (*base, "calls", item) + ((member,) if member is not None else ())
                return doc.line(*path)

            failures.append(Failure(result.title(), result.explain(line), doc.where(*base)))
    found = check_properties(trace, rules)
    for i, rule in enumerate(rules):
        broken = [v for v in found if v.rule == i]
        if broken:
            ((name, _),) = rule.items()
            failures.append(
                Failure(
                    f"property {i + 1} ({name}) does not hold: {describe_rule(rule)}",
                    "\n".join(str(v) for v in broken),
                    rule_lines[i],
                )
            )
    return failures, score


def _span_legend(text: str, trace: list[dict[str, Any]]) -> str:
    """For a trace rebuilt from spans: which span each ``#N`` the failures name is."""
    named = sorted({int(n) for n in re.findall(r"#(\d+)", text)})
    return ", ".join(
        f"#{n} is span {trace[n]['span_id']}"
        for n in named
        if n < len(trace) and isinstance(trace[n].get("span_id"), str)
    )


def command(args: argparse.Namespace) -> int:
    if args.properties is None and args.trajectory is None:
        print(
            "openprogram-sim check: give --properties FILE, --trajectory FILE or both",
            file=sys.stderr,
        )
        return 2
    try:
        rules, lines = read_rules(args.properties) if args.properties else ([], [])
        trajectory = read_trajectory(args.trajectory) if args.trajectory else None
        traces = list(read_traces(args.trace))
    except CheckFileError as exc:
        problems = str(exc).splitlines()
        shown = problems[0]
        if len(problems) > 1:
            shown = f"{len(problems)} problems:" + "".join(f"\n  {p}" for p in problems)
        print(f"openprogram-sim check: {shown}", file=sys.stderr)
        return 2
    failed = 0
    for name, trace in traces:
        failures, score = _check_one(trace, rules, lines, trajectory)
        print(f"{'FAIL' if failures else 'PASS'}  {name}{score}")
        if failures:
            failed += 1
            text = render_failures(failures)
            print("\n".join(f"  {line}" for line in text.splitlines()))
            spans = _span_legend(text, trace)
            if spans:
                print(f"  in the spans: {spans}")
    checks = []
    if trajectory is not None:
        checks.append("a trajectory")
    if rules:
        checks.append(f"{len(rules)} propert{'y' if len(rules) == 1 else 'ies'}")
    print(
        f"\n{len(traces)} trace(s) checked against {' and '.join(checks) or 'nothing'}: "
        f"{len(traces) - failed} held, {failed} failed"
    )
    return 1 if failed else 0


def add_parser(sub: Any) -> None:
    check = sub.add_parser(
        "check",
        help="check a trace file (openprogram-sim run --json, a trace, OpenTelemetry GenAI "
        "spans) against properties and a trajectory",
    )
    check.add_argument(
        "trace",
        metavar="TRACE_FILE",
        help="the trace JSON (run --json, --trace-out's files, or OTLP JSON GenAI spans)",
    )
    check.add_argument(
        "--properties", metavar="FILE", help="YAML: a list of rules (as expect.properties)"
    )
    check.add_argument(
        "--trajectory", metavar="FILE", help="YAML: a trajectory (as expect.trajectory)"
    )
    check.set_defaults(func=command)
