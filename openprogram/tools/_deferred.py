"""Deferred loading: tools whose schemas are held back until the model asks for them.

A deferred tool (``defer=True``) is part of the run and callable by name from the start,
but its schema is not sent to the provider. The model finds it through ``tool_search``
(``select:a,b`` for exact names, or keywords); the result text carries the full schema,
so the tool is callable in the same round, and from the next pass of the loop it is in the
provider's tool list. The provider list is computed once per pass so the prompt prefix
stays stable (prompt caching) within one.

The loaded set belongs to one run: it is created by the outermost exec and shared with the
execs nested in it, never global.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from openprogram.tools._tool import Tool
from openprogram.types import ToolSpec

__all__ = ["SEARCH_TOOL_NAME", "Deferral", "current_loaded_var"]

SEARCH_TOOL_NAME = "tool_search"
MAX_RESULTS = 20

current_loaded_var: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar(
    "_current_loaded", default=None
)
"""Names loaded by ``tool_search`` in the running (outermost) exec (None outside one)."""


@dataclass(slots=True)
class Deferral:
    """The deferred tools of one exec and the run's loaded set."""

    deferred: dict[str, Tool]
    loaded: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, tools: Sequence[Tool], loaded: set[str]) -> Deferral | None:
        """None when no tool is deferred (nothing to hold back)."""
        deferred = {t.name: t for t in tools if t.gates.defer}
        return cls(deferred, loaded) if deferred else None

    def provider_tools(self) -> Callable[[list[Tool]], list[ToolSpec]]:
        """The ``LoopConfig.provider_tools`` hook: every spec but unloaded deferred ones."""

        def specs(tools: list[Tool]) -> list[ToolSpec]:
            return [t.spec for t in tools if t.name not in self.deferred or t.name in self.loaded]

        return specs

    def search_tool(self) -> Tool:
        """The ``tool_search`` tool over this exec's deferred tools."""
        names = ", ".join(sorted(self.deferred))
        spec = ToolSpec(
            SEARCH_TOOL_NAME,
            f"Load tools that are available but not yet in your tool list "
            f"({len(self.deferred)}: {names}). Pass query 'select:name1,name2' to load "
            "exact names, or keywords to search names and descriptions ('+word' requires "
            "the word in the name). Loaded tools can be called right away.",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "select:a,b or keywords"},
                    "max_results": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_RESULTS,
                        "default": 5,
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        )

        def run(call_id: str, args: dict[str, object], cancel: object, on_update: object) -> str:
            limit = args.get("max_results", 5)
            return self.search(str(args["query"]), limit if isinstance(limit, int) else 5)

        return Tool(spec, run, is_async=False, source=self)

    def search(self, query: str, max_results: int = 5) -> str:
        """Load the matching deferred tools; returns the text the model sees."""
        text = query.strip()
        if text.lower().startswith("select:"):
            wanted = [n.strip() for n in text[len("select:") :].split(",") if n.strip()]
            found = [self.deferred[n] for n in wanted if n in self.deferred]
            missing = [n for n in wanted if n not in self.deferred]
        else:
            found = self._rank(text)[: max(1, min(MAX_RESULTS, max_results))]
            missing = []
        self.loaded.update(t.name for t in found)
        return self._report(query, found, missing)

    def _rank(self, query: str) -> list[Tool]:
        terms = [t.lower() for t in query.split()]
        required = [t[1:] for t in terms if t.startswith("+") and len(t) > 1]
        words = [t.lstrip("+") for t in terms if t.lstrip("+")]
        scored: list[tuple[int, str]] = []
        for name, tool in self.deferred.items():
            lowered = name.lower()
            if any(r not in lowered for r in required):
                continue
            description = tool.spec.description.lower()
            score = sum((10 if w in lowered else 0) + (2 if w in description else 0) for w in words)
            if score:
                scored.append((score, name))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [self.deferred[name] for _, name in scored]

    def _report(self, query: str, found: list[Tool], missing: list[str]) -> str:
        available = ", ".join(sorted(self.deferred))
        if not found:
            return f"No deferred tool matches {query!r}. Deferred tools: {available}."
        lines = [f"Loaded {len(found)} tool(s); call them now:"]
        for tool in found:
            schema = json.dumps(tool.spec.parameters, ensure_ascii=False, sort_keys=True)
            lines.append(f"- {tool.name}: {tool.spec.description}\n  parameters: {schema}")
        if missing:
            lines.append(f"Not found: {', '.join(missing)} (deferred tools: {available}).")
        return "\n".join(lines)
