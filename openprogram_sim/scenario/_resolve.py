"""Importing the user's Python a scenario names, when the scenario runs.

A scenario file that names Python (``python:``, ``registry:``, ``call:``) is trusted like a
test file: its modules run their top-level code when imported. Loading a file imports
nothing, so a file that is only collected (``pytest --collect-only``), filtered out
(``-k``, ``-m``) or served (``openprogram-sim serve``, which plays model turns only) runs
none of it. A run imports it through :func:`resolve_python`, which checks what the loader
used to: each reference imports, ``call:`` is a callable, ``registry:`` a ``ToolRegistry``,
each ``python:`` a tool of the name it is filed under, and the tool names the file uses
exist once the registry's are known. A standard-library or builtin callable
(``subprocess:getoutput``, ``os:system``, ``builtins:eval``) is refused unless the project
allows it by name (see :func:`~openprogram_sim.scenario._python.refuse_stdlib`). Every
problem is one :class:`ScenarioError` naming the file and line of its reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openprogram_sim.errors import ScenarioError, ScenarioIssue
from openprogram_sim.scenario._loader import python_refs, tool_name_issues, where_of
from openprogram_sim.scenario._python import (
    PythonRefError,
    import_ref,
    import_roots,
    refuse_stdlib,
)
from openprogram_sim.scenario._schema import ExecArgs, Expect, Scenario

__all__ = ["resolve_python"]


def resolve_python(scenario: Scenario) -> dict[str, Any]:
    """The user's objects ``scenario``'s ``python:``, ``registry:`` and ``call:`` name, by
    reference, imported on the first call and kept on the scenario (the next run reuses
    them). Raises :class:`ScenarioError` listing every reference that does not import, is
    not what its key needs, or is a standard-library callable not allowed, and every tool
    name the file uses that neither it nor its registry defines."""
    known: dict[str, Any] = scenario._python
    refs = python_refs(scenario)
    if all(ref in known for _, ref in refs):
        return known
    roots: list[Path] = (
        list(scenario._roots)
        if scenario._roots is not None
        else import_roots(scenario.path or None)
    )
    file = scenario.path or "<scenario>"
    issues: list[ScenarioIssue] = []
    found: dict[str, Any] = {}
    registry_names: set[str] | None = None
    for where, ref in refs:
        try:
            value = import_ref(ref, roots)
            if where == ("registry",):
                names = _registry_names(value, ref)
            elif where == ("call",):
                if not callable(value):
                    raise TypeError(f"{ref!r} is a {type(value).__name__}, not a callable")
            else:
                _check_tool(value, ref, str(where[1]))
            for body in _bodies(value):
                refuse_stdlib(ref, body, roots[0])
            if where == ("registry",):
                registry_names = names
            found[ref] = value
        except (PythonRefError, TypeError, ValueError) as exc:
            issues.append(ScenarioIssue(file, scenario.line(*where), where_of(where), str(exc)))
    if registry_names is not None:
        issues += tool_name_issues(_names_data(scenario), scenario._lines, file, registry_names)
    if issues:
        raise ScenarioError(sorted(issues, key=lambda i: i.line or 0))
    known.update(found)
    return known


def _bodies(value: Any) -> list[Any]:
    """What runs when ``value`` is called or used as a tool: a ``{"spec", "execute"}``
    dict's ``execute``; else ``value`` itself, a tool object's ``execute`` and a decorated
    function's own body."""
    if isinstance(value, Mapping):
        return [value.get("execute")]
    tool = getattr(value, "__openprogram_tool__", value)
    source = getattr(tool, "source", None)
    if isinstance(source, Mapping):
        source = source.get("execute")
    found = [value, source, getattr(value, "execute", None)]
    return [v for v in found if v is not None]


def _registry_names(value: Any, ref: str) -> set[str]:
    from openprogram import ToolRegistry

    if not isinstance(value, ToolRegistry):
        raise TypeError(f"{ref!r} is a {type(value).__name__}, not a ToolRegistry")
    return set(value.names())


def _check_tool(value: Any, ref: str, key: str) -> None:
    from openprogram import ToolRegistry
    from openprogram.tools import as_tool

    if isinstance(value, ToolRegistry):
        raise TypeError(f"{ref!r} is a ToolRegistry, not a tool: name it with `registry:`")
    tool = as_tool(value)  # a clear TypeError for anything that is not a tool
    if tool.name != key:
        raise ValueError(
            f"{ref!r} is the tool {tool.name!r}; name it {tool.name!r} under `tools:` "
            "(the model calls it by that name)"
        )


def _names_data(scenario: Scenario) -> dict[str, Any]:
    """The parts of the file that name tools, as the loader read them (plain data)."""

    def exec_of(args: ExecArgs | None) -> dict[str, Any]:
        return {"tools": args.tools} if args is not None else {}

    def expect_of(expect: Expect) -> dict[str, Any]:
        out: dict[str, Any] = {"requests": [{"tools": r.tools} for r in expect.requests]}
        if expect.trajectory is not None:
            out["trajectory"] = {"calls": expect.trajectory.calls}
        out["properties"] = expect.properties
        return out

    data: dict[str, Any] = {
        "exec": exec_of(scenario.exec),
        "tools": {name: {"exec": exec_of(t.exec)} for name, t in scenario.tools.items()},
        "toolsets": scenario.toolsets,
        "conversation": [
            {"exec": exec_of(step.exec), "expect": expect_of(step.expect)}
            for step in scenario.conversation or ()
        ],
        "expect": expect_of(scenario.expect),
    }
    if isinstance(scenario.model, list):  # the tools the script calls
        data["model"] = [
            {
                "tool_calls": turn.tool_calls,
                "one_of": [{"tool_calls": c.tool_calls} for c in turn.one_of or ()],
            }
            for turn in scenario.model
        ]
    if scenario.call is not None:
        data["call"] = scenario.call
    return data
