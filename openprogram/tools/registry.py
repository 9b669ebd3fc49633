"""The tool registry: tools by name, and the toolsets ``exec`` resolves from it.

``exec`` with neither ``tools=`` nor ``toolset=`` offers the registry's full toolset;
``toolset="none"`` offers nothing. A :class:`Runtime` takes ``registry=`` so tests (and
scenario runs) use a fresh registry instead of the process-wide default.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from openprogram.tools._tool import Tool, as_tool

__all__ = ["ToolRegistry", "default_registry"]


class ToolRegistry:
    """A name-keyed set of tools with named toolsets (``"full"`` and ``"none"`` built in)."""

    def __init__(self, tools: Iterable[Any] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._toolsets: dict[str, list[str]] = {}
        for entry in tools:
            self.register(entry)

    def register(self, entry: Any) -> Tool:
        """Add a tool (any accepted ``tools=`` entry); a tool of the same name is replaced."""
        tool = as_tool(entry)
        self._tools[tool.name] = tool
        return tool

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def define_toolset(self, name: str, tool_names: Iterable[str]) -> None:
        """Name a subset of the registry's tools."""
        if name in ("full", "none"):
            raise ValueError(f"toolset {name!r} is built in and cannot be redefined")
        self._toolsets[name] = list(tool_names)

    def toolset_names(self) -> list[str]:
        return ["full", "none", *self._toolsets]

    def resolve(self, toolset: str | None = None) -> list[Tool]:
        """The tools of ``toolset`` (default ``"full"``: every registered tool)."""
        if toolset is None or toolset == "full":
            return list(self._tools.values())
        if toolset == "none":
            return []
        names = self._toolsets.get(toolset)
        if names is None:
            raise ValueError(
                f"unknown toolset {toolset!r}; known toolsets: {', '.join(self.toolset_names())}"
            )
        return [self._tools[n] for n in names if n in self._tools]


default_registry = ToolRegistry()
"""The process-wide registry ``@function`` registers into by default."""
