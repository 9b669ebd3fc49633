"""The user's tools a fuzz campaign or a strategy works on: names, schemas, and how a
scenario file names them.

A :class:`ToolTarget` is built from what a user has at hand: a ``ToolRegistry``, tool
objects (``@function``, ``@agentic_function``, ``{spec, execute}`` dicts, ``Tool``), their
``"package.module:attr"`` references, or the scenario file's own simulated tool
definitions (``{name: {parameters: ...}}``). Generated calls need only the names and
schemas; a generated *scenario* also needs references, since a scenario names the user's
Python by import path (``registry:`` or ``tools: {name: {python: ...}}``), so an object
defined where nothing can import it is refused with a message saying what to do.

A target also carries what generated arguments mix in: each tool's *literals*, the numbers
and quoted strings of its description and parameter descriptions, and the values the
user's own scenario files pass to it (the ``scenarios/`` folders beside the tools' module,
up to the project's ``pyproject.toml``, and any given to :meth:`ToolTarget.load`). A tool
whose schema uses what the strategies cannot draw (:mod:`openprogram_sim.fuzz._schemas`)
is left out and listed in :attr:`ToolTarget.skipped` with the keyword; a target whose
every tool is left out is refused.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from openprogram import ToolRegistry
from openprogram.errors import ToolEntryError
from openprogram.tools import Tool, as_tool
from openprogram_sim.fuzz import _schemas, _values
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
    literals: tuple[int | float | str, ...] = ()
    """Numbers and strings from the tool's docstring and the user's scenario files, mixed
    into its generated arguments where they fit the schema."""


@dataclass(frozen=True, slots=True)
class ToolTarget:
    """The tools, and how a generated scenario names them."""

    tools: tuple[ToolInfo, ...]
    registry_ref: str | None = None
    toolsets: tuple[str, ...] = ()
    """Named toolsets of the registry (built-ins aside), for ``exec: {toolset: ...}``."""
    pythonpath: tuple[str, ...] = field(default=())
    """Extra import folders (``--pythonpath``), absolute."""
    skipped: tuple[tuple[str, str], ...] = ()
    """``(tool, why)`` for each tool left out: its schema uses a keyword the strategies do
    not draw from (``why`` names it and where it is)."""

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
        scenarios: Sequence[str | Path] = (),
    ) -> ToolTarget:
        """The target ``openprogram-sim fuzz --registry REF --tools REF,REF`` names, imported
        from the current directory, its pyproject's ``[tool.openprogram] pythonpath`` and
        ``pythonpath`` (raises :class:`~openprogram_sim.scenario._python.PythonRefError`
        for a reference that does not import). The literals of scenario files (files or
        folders in ``scenarios``, and the ``scenarios/`` folders beside the tools' modules)
        are mixed into the generated arguments."""
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
        infos = _with_scenario_literals(infos, [*scenarios, *_scenario_folders(infos, registry)])
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
        kept: list[ToolInfo] = []
        skipped: list[tuple[str, str]] = []
        for info in infos:
            try:
                _schemas.check_schema(info.parameters)
            except _schemas.UnsupportedSchema as exc:
                skipped.append((info.name, f"tool {info.name!r} is not fuzzed: {exc}"))
            else:
                kept.append(info)
        if not kept:
            raise TargetError("no tool can be fuzzed: " + "; ".join(why for _, why in skipped))
        return cls(tuple(kept), registry_ref, toolsets, pythonpath, tuple(skipped))


def _info(tool: Tool, ref: str | None) -> ToolInfo:
    parameters = dict(tool.spec.parameters)
    return ToolInfo(
        name=tool.name,
        parameters=parameters,
        ref=ref or ref_of(tool.source),
        agentic=bool(getattr(tool.source, "agentic", False)),
        requires_env=tuple(tool.gates.requires_env),
        literals=tuple(_values.literals_in_text("\n".join(_descriptions(tool.spec.description,
                                                                          parameters)))),
    )  # fmt: skip


def _descriptions(description: Any, schema: Any) -> Iterator[str]:
    """The tool's description and every ``description`` in its schema."""
    if isinstance(description, str):
        yield description
    if isinstance(schema, Mapping):
        for key, value in schema.items():
            if key == "description" and isinstance(value, str):
                yield value
            else:
                yield from _descriptions(None, value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _descriptions(None, item)


_MAX_SCENARIO_FILES = 500
_MAX_SCENARIO_BYTES = 1_000_000


def _scenario_folders(infos: Sequence[ToolInfo], registry: str | None) -> list[Path]:
    """The ``scenarios/`` folders beside the modules of ``infos`` and ``registry``: in the
    module's folder and each one above it, up to the first that holds a ``pyproject.toml``
    (at most four levels)."""
    modules = {ref.partition(":")[0] for ref in (registry, *(t.ref for t in infos)) if ref}
    found: list[Path] = []
    for name in sorted(modules):
        file = getattr(sys.modules.get(name), "__file__", None)
        if not file:
            continue
        folder = Path(file).resolve().parent
        for _ in range(4):
            if (folder / "scenarios").is_dir() and folder / "scenarios" not in found:
                found.append(folder / "scenarios")
            if (folder / "pyproject.toml").exists() or folder.parent == folder:
                break
            folder = folder.parent
    return found


def _scenario_files(paths: Sequence[str | Path]) -> Iterator[Path]:
    count = 0
    for given in paths:
        path = Path(given)
        files = [path] if path.is_file() else sorted(path.rglob("*.y*ml")) if path.is_dir() else []
        for file in files:
            if file.suffix in (".yaml", ".yml") and count < _MAX_SCENARIO_FILES:
                count += 1
                yield file


def _with_scenario_literals(infos: list[ToolInfo], paths: Sequence[str | Path]) -> list[ToolInfo]:
    """``infos`` with the values scenario files under ``paths`` pass to each tool added to
    its literals (a file that does not read as YAML is passed over: it is not ours)."""
    by_tool: dict[str, list[Any]] = {}
    for file in _scenario_files(paths):
        try:
            if file.stat().st_size > _MAX_SCENARIO_BYTES:
                continue
            document = yaml.safe_load(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        for name, values in _values.literals_in_scenario(document).items():
            by_tool.setdefault(name, []).extend(values)
    out = []
    for info in infos:
        extra = by_tool.get(info.name)
        if extra:
            merged = tuple(dict.fromkeys([*info.literals, *extra]))
            info = replace(info, literals=merged)
        out.append(info)
    return out


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
