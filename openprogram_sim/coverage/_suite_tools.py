"""The tools a suite's scenarios use, as the starter scenarios name them
(:func:`suite_tools`): a simulated tool is copied with its schema; the user's own tool is
named by its import path (``python:``). The arguments are ones the suite already sends that
tool, else built from its schema.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from openprogram_sim.coverage._toolbox import python_tools
from openprogram_sim.scenario import Scenario, ref_of

__all__ = ["FALLBACK", "SuiteTool", "arguments_valid", "suite_tools"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteTool:
    """A tool the suite uses, as a starter names it."""

    name: str
    description: str
    parameters: dict[str, Any]
    args: dict[str, Any]
    """Arguments the suite sends it (or built from its schema)."""
    python: str | None = None
    """``pkg.module:attr`` when it is the user's own tool."""

    def entry(self, **behaviour: Any) -> dict[str, Any]:
        """Its ``tools:`` entry, with a body (``returns:`` by default)."""
        body = behaviour or {"returns": f"{self.name} result"}
        if self.python is not None:
            return {"python": self.python, **body}
        spec: dict[str, Any] = {"parameters": self.parameters, **body}
        return {"description": self.description, **spec} if self.description else spec

    def simulated(self, **behaviour: Any) -> dict[str, Any]:
        """A simulated copy with its schema (for what a ``python:`` entry cannot say)."""
        body = behaviour or {"returns": f"{self.name} result"}
        spec = {"description": self.description, "parameters": self.parameters, **body}
        return {k: v for k, v in spec.items() if v != ""}


def _sent_args(scenarios: Sequence[Scenario], name: str) -> dict[str, Any] | None:
    for scenario in scenarios:
        turns = scenario.model if isinstance(scenario.model, list) else []
        for turn in turns:
            for call in turn.tool_calls:
                if "name" in call:
                    called, args = call["name"], call.get("arguments", {})
                else:
                    ((called, args),) = call.items()
                if called == name and isinstance(args, dict):
                    return dict(args)
    return None


def arguments_valid(name: str, schema: dict[str, Any], args: Any) -> bool:
    from openprogram.tools import ArgumentsError, validate_tool_arguments

    try:
        validate_tool_arguments(name, schema, args)
    except ArgumentsError:
        return False
    return True


def _args(scenarios: Sequence[Scenario], name: str, schema: dict[str, Any]) -> dict[str, Any]:
    from openprogram_sim.models import example_arguments

    sent = _sent_args(scenarios, name)
    if sent is not None and arguments_valid(name, schema, sent):
        return sent
    return example_arguments(schema)


def _ref_of(tool: Any, fallback: str, registry: str | None) -> str | None:
    """``module:name`` the user's tool is importable as (a registry's tools have none of
    their own in the scenario)."""
    if ":" in fallback and fallback != registry:
        return fallback
    return ref_of(getattr(tool, "source", None))


def suite_tools(scenarios: Iterable[Scenario]) -> list[SuiteTool]:
    """The tools the suite's scenarios use, most used first: simulated tools that return a
    value (each with the definition the suite gives it most often), and the user's own
    tools."""
    loaded = list(scenarios)
    uses: Counter[str] = Counter()
    definitions: dict[str, Counter[str]] = {}
    found: dict[str, SuiteTool] = {}
    for scenario in loaded:
        for name, spec in scenario.tools.items():
            plain = spec.raises is None and spec.exec is None and not spec.defer
            if spec.python is None and plain and name != "tool_search":
                uses[name] += 1
                shape = json.dumps([spec.description, spec.parameters], sort_keys=True)
                definitions.setdefault(name, Counter())[shape] += 1
        for name, tool, ref in python_tools(scenario):
            own = _ref_of(tool, ref, scenario.registry)
            if own is None or tool.gates.defer or getattr(tool.source, "agentic", False):
                continue
            uses[name] += 1
            schema = dict(tool.spec.parameters)
            found.setdefault(
                name,
                SuiteTool(
                    name=name,
                    description=tool.spec.description,
                    parameters=schema,
                    args=_args(loaded, name, schema),
                    python=own,
                ),
            )
    for name, shapes in definitions.items():
        if name in found:
            continue
        description, parameters = json.loads(shapes.most_common(1)[0][0])
        found[name] = SuiteTool(
            name=name,
            description=description,
            parameters=parameters,
            args=_args(loaded, name, parameters),
        )
    return [found[name] for name, _ in uses.most_common()]


FALLBACK = SuiteTool(
    name="lookup",
    description="Look a word up.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    args={"q": "tides"},
)
"""The tool a starter uses when the suite has none of its own."""
