"""The user's tools a fuzz campaign or a strategy works on: names, schemas, and how a
scenario file names them.

A :class:`ToolTarget` is built from what a user has at hand: a ``ToolRegistry``, tool
objects (``@function``, ``@agentic_function``, ``{spec, execute}`` dicts, ``Tool``), their
``"package.module:attr"`` references, or the scenario file's own simulated tool
definitions (``{name: {parameters: ...}}``). Generated calls need only the names and
schemas; a generated *scenario* also needs references, since a scenario names the user's
Python by import path (``registry:`` or ``tools: {name: {python: ...}}``), so an object
defined where nothing can import it is refused with a message saying what to do.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from openprogram import ToolRegistry
from openprogram.errors import ToolEntryError
from openprogram.tools import Tool, as_tool
from openprogram_sim.scenario import import_ref, import_roots, ref_of

__all__ = ["ENV_PLACEHOLDER", "TargetError", "ToolInfo", "ToolTarget"]

ENV_PLACEHOLDER = "set-by-openprogram-fuzz"
"""The value generated scenarios give a gated tool's ``requires_env`` variables, so that
the tool is offered and runs."""


class TargetError(ValueError):
    """What was given is not a set of tools (the message says what is accepted)."""


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One tool as the generators see it."""

    name: str
    parameters: dict[str, Any]
    ref: str | None = None
    """``package.module:attr`` of the tool object, when importable."""
    agentic: bool = False
    """An ``@agentic_function``: its body may run a nested exec (which plays model turns)."""
    requires_env: tuple[str, ...] = ()
    simulated: dict[str, Any] | None = None
    """A scenario's own tool definition (the target is simulated tools, no Python)."""


@dataclass(frozen=True, slots=True)
class ToolTarget:
    """The tools, and how a generated scenario names them."""

    tools: tuple[ToolInfo, ...]
    registry_ref: str | None = None
    toolsets: tuple[str, ...] = ()
    """Named toolsets of the registry (built-ins aside), for ``exec: {toolset: ...}``."""
    pythonpath: tuple[str, ...] = field(default=())
    """Extra import folders (``--pythonpath``), absolute."""

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    def get(self, name: str) -> ToolInfo:
        return next(t for t in self.tools if t.name == name)

    @property
    def label(self) -> str:
        """How the CLI names the target."""
        if self.registry_ref:
            return self.registry_ref
        return ", ".join(t.ref or t.name for t in self.tools)

    @property
    def env(self) -> dict[str, str]:
        """The gated tools' variables, set so that every tool is offered."""
        return {v: ENV_PLACEHOLDER for t in self.tools for v in t.requires_env}

    def imported(self) -> list[Any]:
        """Import the objects the target names (a no-op where they are loaded already)."""
        roots = import_roots(None, self.pythonpath)
        refs = [self.registry_ref, *(t.ref for t in self.tools if t.simulated is None)]
        return [import_ref(ref, roots) for ref in refs if ref]

    def scenario_refs(self) -> dict[str, Any]:
        """The ``registry:``/``tools:`` keys a scenario over these tools holds; raises
        :class:`TargetError` when a tool cannot be named."""
        if self.registry_ref:
            return {"registry": self.registry_ref}
        tools: dict[str, Any] = {}
        for t in self.tools:
            if t.simulated is not None:
                tools[t.name] = dict(t.simulated)
            elif t.ref is None:
                raise TargetError(
                    f"tool {t.name!r} is not importable as 'package.module:name' (a scenario "
                    "names your tools by import path); define it at module level, or pass "
                    "the registry or the tool as a reference string"
                )
            else:
                tools[t.name] = {"python": t.ref}
        return {"tools": tools}

    # -- building ------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        *,
        registry: str | None = None,
        tools: Sequence[str] = (),
        pythonpath: Sequence[str | Path] = (),
    ) -> ToolTarget:
        """The target ``openprogram-sim fuzz --registry REF --tools REF,REF`` names, imported
        from the current directory, its pyproject's ``[tool.openprogram] pythonpath`` and
        ``pythonpath`` (raises :class:`~openprogram_sim.scenario._python.PythonRefError`
        for a reference that does not import)."""
        roots = import_roots(None, pythonpath)
        extra = tuple(str(Path(p).resolve()) for p in pythonpath)
        infos: list[ToolInfo] = []
        toolsets: tuple[str, ...] = ()
        if registry:
            value = import_ref(registry, roots)
            if not isinstance(value, ToolRegistry):
                raise TargetError(f"--registry {registry!r} is a {type(value).__name__}, not a "
                                  "ToolRegistry; pass tools with --tools")  # fmt: skip
            infos += [_info(t, ref_of(t.source)) for t in value.tools()]
            toolsets = _toolsets(value)
        for ref in tools:
            found = _entries(import_ref(ref, roots, module_ok=True), ref)
            infos += [_info(as_tool(obj), obj_ref) for obj, obj_ref in found]
        return cls._checked(infos, registry, toolsets, extra)

    @classmethod
    def of(cls, value: Any) -> ToolTarget:
        """The target for a strategy's argument: a registry, tool objects, reference strings,
        or the scenario's simulated tool definitions (``{name: {parameters: ...}}``)."""
        if isinstance(value, ToolTarget):
            return value
        if isinstance(value, str):
            obj = import_ref(value, import_roots(None), module_ok=True)
            if isinstance(obj, ToolRegistry):
                return cls._checked([_info(t, ref_of(t.source)) for t in obj.tools()],
                                    value, _toolsets(obj), ())  # fmt: skip
            return cls._checked([_info(as_tool(o), r) for o, r in _entries(obj, value)], None,
                                (), ())  # fmt: skip
        if isinstance(value, ToolRegistry):
            infos = [_info(t, ref_of(t.source)) for t in value.tools()]
            return cls._checked(infos, _registry_ref(value), _toolsets(value), ())
        if _is_definitions(value):
            infos = [_simulated(name, spec) for name, spec in value.items()]
            return cls._checked(infos, None, (), ())
        entries = [value] if _is_entry(value) else value
        if not isinstance(entries, Iterable) or isinstance(entries, (str, bytes, Mapping)):
            raise TargetError(f"{_short(value)} is not a registry, a tool or a list of tools")
        infos = []
        for entry in entries:
            try:
                infos.append(_info(as_tool(entry), ref_of(entry)))
            except ToolEntryError as exc:
                raise TargetError(str(exc)) from None
        return cls._checked(infos, None, (), ())

    @classmethod
    def _checked(
        cls,
        infos: list[ToolInfo],
        registry_ref: str | None,
        toolsets: tuple[str, ...],
        pythonpath: tuple[str, ...],
    ) -> ToolTarget:
        names = [t.name for t in infos]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise TargetError(f"two tools are named {', '.join(map(repr, twice))}; keep one")
        if not infos:
            raise TargetError("no tools: the registry or the list of tools is empty")
        return cls(tuple(infos), registry_ref, toolsets, pythonpath)


def _info(tool: Tool, ref: str | None) -> ToolInfo:
    return ToolInfo(
        name=tool.name,
        parameters=dict(tool.spec.parameters),
        ref=ref or ref_of(tool.source),
        agentic=bool(getattr(tool.source, "agentic", False)),
        requires_env=tuple(tool.gates.requires_env),
    )


def _simulated(name: Any, spec: Any) -> ToolInfo:
    if not isinstance(name, str) or not name or name == "name":
        raise TargetError(f"tool name {name!r} must be a non-empty str other than 'name'")
    if not isinstance(spec, Mapping):
        raise TargetError(f"tools[{name!r}]={spec!r} must be a tool definition (a dict)")
    parameters = spec.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(parameters, Mapping):
        raise TargetError(f"tools[{name!r}].parameters must be a JSON Schema (a dict)")
    nested = "exec" in spec and spec.get("exec") is not None
    return ToolInfo(name, dict(parameters), agentic=nested, simulated=dict(spec))


def _toolsets(registry: ToolRegistry) -> tuple[str, ...]:
    return tuple(n for n in registry.toolset_names() if n not in ("full", "none"))


def _is_entry(value: Any) -> bool:
    if isinstance(value, Tool) or hasattr(value, "__openprogram_tool__"):
        return True
    if isinstance(value, Mapping):
        return "spec" in value and callable(value.get("execute"))
    return hasattr(value, "spec") and callable(getattr(value, "execute", None))


def _is_definitions(value: Any) -> bool:
    """A scenario's ``tools:`` mapping (every value a dict, none a tool entry)."""
    return (
        isinstance(value, Mapping)
        and not _is_entry(value)
        and all(isinstance(v, Mapping) and not _is_entry(v) for v in value.values())
    )


def _entries(value: Any, ref: str) -> list[tuple[Any, str | None]]:
    """The tool objects ``ref`` names: the object itself, or a module's tools."""
    if isinstance(value, ModuleType):
        found: list[tuple[Any, str | None]] = []
        for attr, obj in sorted(vars(value).items()):
            if hasattr(obj, "__openprogram_tool__") and getattr(obj, "__module__", None) == (
                value.__name__
            ):
                found.append((obj, f"{value.__name__}:{attr}"))
        if not found:
            raise TargetError(f"{ref!r} has no tools (@function or @agentic_function)")
        return found
    if not _is_entry(value):
        raise TargetError(f"{ref!r} is a {type(value).__name__}, not a tool")
    return [(value, ref)]


def _registry_ref(registry: ToolRegistry) -> str | None:
    """``module:name`` of a module-level attribute holding ``registry`` (a registry has no
    name of its own: the loaded modules are searched), else None."""
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or mod_name.startswith(("openprogram", "_")):
            continue
        for attr, value in list(getattr(mod, "__dict__", {}).items()):
            if value is registry and not attr.startswith("_"):
                return f"{mod_name}:{attr}"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
