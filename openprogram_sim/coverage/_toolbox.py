"""What a scenario's tools are: each one's argument schema, what its body does, whether it is
deferred, and for the user's own tools the Python function behind it.

Simulated tools say it in the file (``returns:``, ``raises:``, ``exec:``, ``defer:``); the
user's tools (``python:``, ``registry:``) are read from the code the scenario names, the
objects the runner imported (:func:`~openprogram_sim.scenario.resolve_python`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from openprogram_sim.errors import ScenarioError
from openprogram_sim.scenario import ExecArgs, Scenario, resolve_python

__all__ = ["ToolInfo", "exec_args_of", "python_tools", "tool_infos"]

Body = Literal["returns", "error_result", "raises", "exec", "python"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInfo:
    name: str
    parameters: dict[str, Any] | None
    """The JSON schema of its arguments (None: not known)."""
    body: Body
    """``returns``: returns values; ``error_result``: returns an error result it builds
    itself (``{$error: ...}``); ``raises``; ``exec``: a nested exec; ``python``: the user's
    code, run for real."""
    defer: bool = False
    function: Any = None
    """The user's Python function behind the tool (its body), when it is user code."""
    ref: str = ""
    """``pkg.module:attr`` of the user's tool, when it is one."""


def _body(spec: Any) -> Body:
    if spec.raises is not None:
        return "raises"
    if spec.exec is not None:
        return "exec"
    values = spec.returns if isinstance(spec.returns, list) else [spec.returns]
    if any(isinstance(v, dict) and set(v) == {"$error"} for v in values):
        return "error_result"
    if spec.python is not None and spec.returns is None:
        return "python"
    return "returns"


def _objects(scenario: Scenario) -> dict[str, Any]:
    # The runner's own objects: the scenario ran, so they are imported and checked already
    # (a scenario whose Python could not be resolved never ran, and has no tools here).
    try:
        return resolve_python(scenario)
    except ScenarioError:
        return {}


def _function(tool: Any) -> Any:
    source = getattr(tool, "source", None)
    if isinstance(source, dict):
        source = source.get("execute")
    return getattr(source, "__wrapped__", source)


def python_tools(scenario: Scenario) -> Iterator[tuple[str, Any, str]]:
    """``(name, tool, ref)`` for each of the user's tools the scenario uses: its registry's
    tools, then its ``python:`` tools (none when they do not import: the run reports that,
    with its line)."""
    from openprogram.tools import as_tool

    objects = _objects(scenario)
    registry = objects.get(scenario.registry) if scenario.registry else None
    for tool in registry.tools() if registry is not None else ():
        yield tool.name, tool, str(scenario.registry)
    for name, spec in scenario.tools.items():
        if spec.python is not None and spec.python in objects:
            yield name, as_tool(objects[spec.python]), spec.python


def tool_infos(scenario: Scenario) -> dict[str, ToolInfo]:
    """Every tool the scenario defines or names, by name (the file's own entries win over a
    registry's tool of the same name, as in the runner)."""
    infos: dict[str, ToolInfo] = {}
    user = {name: (tool, ref) for name, tool, ref in python_tools(scenario)}
    for name, (tool, ref) in user.items():
        infos[name] = ToolInfo(
            name=name,
            parameters=dict(tool.spec.parameters),
            body="python",
            defer=bool(tool.gates.defer),
            function=_function(tool),
            ref=ref,
        )
    for name, spec in scenario.tools.items():
        if spec.python is not None:
            known = infos.get(name)
            infos[name] = ToolInfo(
                name=name,
                parameters=known.parameters if known else None,
                body=_body(spec),
                defer=known.defer if known else False,
                function=known.function if known else None,
                ref=spec.python,
            )
            continue
        infos[name] = ToolInfo(
            name=name, parameters=dict(spec.parameters), body=_body(spec), defer=spec.defer
        )
    return infos


def exec_args_of(scenario: Scenario, parent_tool: str | None) -> ExecArgs | None:
    """The exec arguments of a run: the scenario's ``exec:`` for the outer run (None with
    ``call:``, whose exec is the user's code), a simulated tool's ``exec:`` for a nested one
    (None for the user's agentic functions)."""
    if parent_tool is None:  # a conversation's execs are several: none is the run's
        return scenario.exec if scenario.call is None and not scenario.conversation else None
    spec = scenario.tools.get(parent_tool)
    if spec is None or spec.python is not None:
        return None
    return spec.exec
