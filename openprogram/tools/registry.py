"""The tool registry: tools by name, toolset presets, and gated selection.

``exec`` with neither ``tools=`` nor ``toolset=`` offers the registry's full toolset
(every exposed tool that passes the gating layers, see :mod:`openprogram.tools._gating`);
``toolset="none"`` offers nothing. A :class:`Runtime` takes ``registry=`` so tests and
scenario runs use a fresh registry instead of the process-wide :data:`default_registry`.

Example::

    registry = ToolRegistry()
    registry.define_toolset("research", ["search", "fetch"])
    registry.select(toolset="research", deny=["fetch"]).names   # ["search"]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from openprogram.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    ToolDefinitionError,
    UnknownToolsetError,
)
from openprogram.tools._gating import Selection, ToolPolicy, select_tools
from openprogram.tools._tool import Tool, as_tool

__all__ = ["BUILTIN_TOOLSETS", "RegistrySnapshot", "ToolRegistry", "default_registry"]

BUILTIN_TOOLSETS = ("full", "none")
"""``"full"``: every exposed tool; ``"none"``: no tool."""


@dataclass(slots=True)
class _Toolset:
    names: list[str] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RegistrySnapshot:
    """A registry's contents at one moment (see :meth:`ToolRegistry.snapshot`)."""

    tools: dict[str, Tool]
    toolsets: dict[str, _Toolset]


class ToolRegistry:
    """A name-keyed set of tools with named toolsets (``"full"`` and ``"none"`` built in)."""

    def __init__(self, tools: Iterable[Any] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._toolsets: dict[str, _Toolset] = {}
        for entry in tools:
            self.register(entry)

    # -- tools ---------------------------------------------------------------------------

    def register(self, entry: Any, *, replace: bool = False) -> Tool:
        """Add a tool (any accepted ``tools=`` entry) and return it.

        A different tool under a name already taken raises
        :class:`~openprogram.errors.ToolDefinitionError`, unless ``replace=True`` or both
        come from the same Python function (a module reloaded).
        """
        tool = as_tool(entry)
        old = self._tools.get(tool.name)
        if old is not None and old is not tool and not replace and not _same_origin(old, tool):
            raise ToolDefinitionError(
                f"tool name {tool.name!r} is already registered (by {_origin_text(old)}); "
                "pass name='...' to the decorator to register this one under another name, "
                "use another registry (registry=ToolRegistry()), or unregister the old one"
            )
        self._tools[tool.name] = tool
        return tool

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def tools(self) -> list[Tool]:
        """Every registered tool, ungated, in registration order."""
        return list(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    # -- toolsets ------------------------------------------------------------------------

    def define_toolset(
        self, name: str, tool_names: Iterable[str] = (), *, includes: Iterable[str] = ()
    ) -> None:
        """Name a set of tools: ``tool_names`` plus every tool of the ``includes`` sets
        (and every tool that declares membership with ``@function(toolset=name)``)."""
        if name in BUILTIN_TOOLSETS:
            raise InvalidArgumentError(f"toolset {name!r} is built in and cannot be redefined")
        for label, value in (("tool_names", tool_names), ("includes", includes)):
            if isinstance(value, str):
                raise ArgumentTypeError(f"{label}={value!r} must be a list of names, not a string")
        self._toolsets[name] = _Toolset(list(tool_names), list(includes))

    def toolset_names(self, extra: Sequence[Tool] = ()) -> list[str]:
        """Known toolsets: built-in, defined, and declared by registered tools (or by
        ``extra`` tools)."""
        declared = [n for t in (*self._tools.values(), *extra) for n in sorted(t.gates.toolsets)]
        return list(dict.fromkeys([*BUILTIN_TOOLSETS, *self._toolsets, *declared]))

    def toolset_members(self, name: str, extra: Sequence[Tool] = ()) -> frozenset[str]:
        """The names in toolset ``name`` (includes expanded); raises
        :class:`~openprogram.errors.UnknownToolsetError` listing the known toolsets."""
        if name == "full":
            return frozenset(t.name for t in (*self._tools.values(), *extra))
        if name == "none":
            return frozenset()
        if name not in self.toolset_names(extra):
            raise UnknownToolsetError(
                f"unknown toolset {name!r}; known toolsets: {', '.join(self.toolset_names(extra))}"
                " (define one with registry.define_toolset(name, [...]) or "
                "@function(toolset=name))"
            )
        return frozenset(self._expand(name, extra, set()))

    def _expand(self, name: str, extra: Sequence[Tool], seen: set[str]) -> set[str]:
        if name in seen:  # a cycle of includes adds nothing new
            return set()
        seen.add(name)
        found = self._toolsets.get(name, _Toolset())
        out = set(found.names)
        out.update(t.name for t in (*self._tools.values(), *extra) if name in t.gates.toolsets)
        for inner in found.includes:
            if inner in BUILTIN_TOOLSETS or inner not in self.toolset_names(extra):
                out |= self.toolset_members(inner, extra)  # built in, or raises for unknown
            else:
                out |= self._expand(inner, extra, seen)
        return out

    # -- selection -----------------------------------------------------------------------

    def select(
        self,
        tools: Sequence[Any] | None = None,
        *,
        toolset: str | None = None,
        source: str | None = None,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Selection:
        """Run the gating layers over ``tools`` (default: every registered tool) and say
        what is offered and what each layer dropped."""
        policy = ToolPolicy.of(toolset, source, allow, deny)
        return self.select_policy(self.tools() if tools is None else tools, policy, environ)

    def select_policy(
        self, tools: Sequence[Any], policy: ToolPolicy, environ: Mapping[str, str] | None = None
    ) -> Selection:
        """:meth:`select` with a ready :class:`ToolPolicy`."""
        adapted = [as_tool(entry) for entry in tools]
        return select_tools(adapted, policy, self.toolset_members, environ)

    def resolve(self, toolset: str | None = None) -> list[Tool]:
        """The tools ``exec(toolset=toolset)`` offers from this registry (gated)."""
        return self.select(toolset=toolset).tools

    # -- isolation -----------------------------------------------------------------------

    def snapshot(self) -> RegistrySnapshot:
        """Save the contents (for tests that register into a shared registry)."""
        return RegistrySnapshot(dict(self._tools), dict(self._toolsets))

    def restore(self, snapshot: RegistrySnapshot) -> None:
        """Put back the contents saved by :meth:`snapshot`."""
        self._tools = dict(snapshot.tools)
        self._toolsets = dict(snapshot.toolsets)

    def clear(self) -> None:
        self._tools.clear()
        self._toolsets.clear()


def _origin(tool: Tool) -> tuple[str, str] | None:
    fn = getattr(tool.source, "__wrapped__", None)
    if fn is None:
        return None
    return getattr(fn, "__module__", ""), getattr(fn, "__qualname__", "")


def _same_origin(old: Tool, new: Tool) -> bool:
    origin = _origin(new)
    return origin is not None and origin == _origin(old)


def _origin_text(tool: Tool) -> str:
    origin = _origin(tool)
    return f"{origin[0]}.{origin[1]}" if origin else repr(tool.source)


default_registry = ToolRegistry()
"""The process-wide registry ``@function`` registers into by default."""
