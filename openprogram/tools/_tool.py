"""What the loop runs: a tool, its result, and the adapter from user entries.

The loop only ever sees :class:`Tool`: a spec, a compiled argument validator and one
``run`` coroutine with a fixed calling convention. Everything a user may pass in
``exec(tools=[...])`` (an ``@function``, an ``@agentic_function``, a
``{"spec": ..., "execute": ...}`` dict, any object with ``.spec`` and ``.execute``) is
adapted to it once by :func:`as_tool`; the signature inspection is cached per callable.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import types
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from openprogram.errors import ToolEntryError, ToolSchemaError
from openprogram.tools._context import current_runtime
from openprogram.tools._gating import ToolGates
from openprogram.tools._validation import ArgumentValidator, compile_validator
from openprogram.types import ImageContent, TextContent, ToolResultContent, ToolSpec

__all__ = ["Tool", "ToolResult", "UpdateCallback", "as_tool", "normalize_result"]

UpdateCallback = Callable[[Any], None]
"""Called by a tool with a partial result; becomes a ``tool_execution_update`` event."""


@dataclass(slots=True)
class ToolResult:
    """What a tool returns to the loop (any other return value is normalized to this)."""

    content: list[ToolResultContent]
    details: Any = None
    is_error: bool = False

    @classmethod
    def text(cls, text: str, *, is_error: bool = False, details: Any = None) -> ToolResult:
        return cls([TextContent(text)], details, is_error)


def normalize_result(value: Any) -> ToolResult:
    """A tool's return value as a :class:`ToolResult`: a string is the text, ``None`` is
    empty, other values are JSON-encoded (``str()`` when JSON cannot encode them)."""
    kind = type(value)  # the commonest kinds by their type first: no isinstance call
    if kind is int:
        return ToolResult([TextContent(str(value))])
    if kind is str or isinstance(value, str):
        return ToolResult([TextContent(value)])
    if isinstance(value, ToolResult):
        return value
    if kind is bool:
        return ToolResult([TextContent("true" if value else "false")])
    if kind is float:
        return ToolResult([TextContent(json.dumps(value))])
    if value is None:
        return ToolResult([TextContent("")])
    if isinstance(value, (TextContent, ImageContent)):
        return ToolResult([value])
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = str(value)
    return ToolResult([TextContent(text)])


RunFn = Callable[[str, dict[str, Any], "asyncio.Event | None", UpdateCallback | None], Any]


class Tool:
    """A tool in the loop's own shape.

    ``run(tool_call_id, args, cancel, on_update)`` returns the raw value (or an awaitable
    of it when ``is_async``); the loop normalizes it.
    """

    __slots__ = (
        "__weakref__",
        "gates",
        "is_async",
        "name",
        "run",
        "source",
        "spec",
        "validator",
    )

    def __init__(
        self,
        spec: ToolSpec,
        run: RunFn,
        *,
        is_async: bool,
        source: Any = None,
        gates: ToolGates | None = None,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.run = run
        self.is_async = is_async
        try:
            self.validator: ArgumentValidator = compile_validator(spec.parameters)
        except ValueError as exc:
            raise ToolSchemaError(f"tool {spec.name!r}: {exc}") from exc
        self.source = source
        """The user's entry this tool was adapted from."""
        self.gates = gates if gates is not None else _NO_GATES
        """Gating flags (expose, toolsets, defer, ...); see :mod:`openprogram.tools`."""

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


_NO_GATES = ToolGates()  # frozen: one shared by every tool without gates of its own

_INJECTABLE = {"tool_call_id", "cancel", "signal", "on_update", "runtime"}


@dataclass(slots=True)
class _CallShape:
    is_async: bool
    inject: frozenset[str]
    takes_kwargs: bool


_SHAPES: weakref.WeakKeyDictionary[Any, _CallShape] = weakref.WeakKeyDictionary()
_SHAPES_BY_CODE: dict[int, tuple[types.CodeType, _CallShape]] = {}
"""The shapes of plain functions by their code's identity: a dict lookup, where the weak
cache costs a microsecond (a tool dict built per run adapts its function every run)."""


def _call_shape(fn: Callable[..., Any]) -> _CallShape:
    # A plain function with nothing set on it (no __wrapped__, __signature__ or marker) has
    # the shape of its code: closures made again and again (a tool per run) share it.
    key: Any = fn
    if type(fn) is types.FunctionType and not fn.__dict__:
        key = fn.__code__
        known = _SHAPES_BY_CODE.get(id(key))
        if known is not None and known[0] is key:
            return known[1]
    try:
        return _SHAPES[key]
    except (KeyError, TypeError):
        pass
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    params = sig.parameters if sig is not None else {}
    shape = _CallShape(
        is_async=inspect.iscoroutinefunction(fn)
        or (
            inspect.iscoroutinefunction(type(fn).__call__)
            and not inspect.isfunction(fn)
            and not inspect.ismethod(fn)
        ),
        inject=frozenset(n for n in params if n in _INJECTABLE),
        takes_kwargs=any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()),
    )
    # not weak-referenceable (e.g. a bound builtin): recomputed next time
    with contextlib.suppress(TypeError):
        _SHAPES[key] = shape
    if type(key) is types.CodeType:
        if len(_SHAPES_BY_CODE) > 4096:  # bounded; the weak cache still answers
            _SHAPES_BY_CODE.clear()
        _SHAPES_BY_CODE[id(key)] = (key, shape)  # holding the code keeps its id unique
    return shape


def _runner(execute: Callable[..., Any]) -> tuple[RunFn, bool]:
    """Wrap a user ``execute(**args)`` into the loop's calling convention."""
    shape = _call_shape(execute)
    inject = shape.inject
    if not inject:

        def run(call_id: str, args: dict[str, Any], cancel: Any, on_update: Any) -> Any:
            return execute(**args)

        return run, shape.is_async

    def run_injected(call_id: str, args: dict[str, Any], cancel: Any, on_update: Any) -> Any:
        extra: dict[str, Any] = {}
        if "tool_call_id" in inject:
            extra["tool_call_id"] = call_id
        if "cancel" in inject:
            extra["cancel"] = cancel
        if "signal" in inject:
            extra["signal"] = cancel
        if "on_update" in inject:
            extra["on_update"] = on_update
        if "runtime" in inject:
            extra["runtime"] = current_runtime()
        return execute(**args, **extra)

    return run_injected, shape.is_async


_ACCEPTED = (
    "an @function or @agentic_function, a {'spec': ..., 'execute': ...} dict, "
    "or an object with .spec and .execute"
)


def as_tool(entry: Any) -> Tool:
    """Adapt one ``tools=`` entry; raises :class:`~openprogram.errors.ToolEntryError` (a
    ``TypeError``) naming the entry and the accepted kinds for anything else (a tool name
    string included)."""
    if isinstance(entry, Tool):
        return entry
    if type(entry) is not dict:  # a dict holds no tool of its own (nor any attribute)
        own = getattr(entry, "__openprogram_tool__", None)
        if isinstance(own, Tool):
            return own
    if type(entry) is dict or isinstance(entry, Mapping):
        if "spec" in entry and "execute" in entry and callable(entry["execute"]):
            kept = _adapted_before(entry)
            if kept is not None:
                return kept
            spec = ToolSpec.coerce(entry["spec"], entry=entry)
            run, is_async = _runner(entry["execute"])
            tool = Tool(spec, run, is_async=is_async, source=entry, gates=_dict_gates(entry))
            _keep_adapted(entry, tool)
            return tool
        raise ToolEntryError(
            f"tool entry {_short(entry)} is a dict without both 'spec' and a callable "
            f"'execute'; a tool entry must be {_ACCEPTED}"
        )
    if not isinstance(entry, (str, bytes)) and hasattr(entry, "spec"):
        execute = getattr(entry, "execute", None)
        if callable(execute):
            spec = ToolSpec.coerce(entry.spec, entry=entry)
            run, is_async = _runner(execute)
            return Tool(spec, run, is_async=is_async, source=entry)
    hint = ""
    if isinstance(entry, str):
        hint = (
            " (tool names are not accepted here: pass the tool object, "
            "or use toolset=/tools_allow=)"
        )
    raise ToolEntryError(
        f"tool entry {_short(entry)} is not a tool{hint}; a tool entry must be {_ACCEPTED}"
    )


_ADAPTED: dict[int, tuple[dict[str, Any], Any, Any, tuple[Any, Any, Any, Any], Tool]] = {}
"""Tools adapted from plain ``{"spec": ..., "execute": ...}`` dicts, by the dict's identity,
with what the adaptation read from it: the same dict passed again (a module-level tool
dict given to every exec) is adapted once, while a dict or spec changed since is adapted
anew. Bounded; holding the dict keeps its id from being reused."""


def _spec_read(spec: Any) -> tuple[Any, Any, Any, Any] | None:
    """What adapting ``spec`` reads (compared by identity on the next use); None: a spec
    whose adaptation is not kept."""
    if type(spec) is dict:
        return (
            spec.get("name"),
            spec.get("description"),
            spec.get("parameters", _ABSENT),
            spec.get("input_schema", _ABSENT),
        )
    return (spec, None, None, None) if type(spec) is ToolSpec else None


_ABSENT: Any = object()


def _adapted_before(entry: Any) -> Tool | None:
    """The tool adapted from ``entry`` before, when nothing it was built from changed."""
    kept = _ADAPTED.get(id(entry))
    if kept is None or kept[0] is not entry or len(entry) != 2:
        return None
    spec = entry["spec"]
    if spec is not kept[1] or entry["execute"] is not kept[2]:
        return None
    now, then = _spec_read(spec), kept[3]
    if (
        now is None
        or now[0] is not then[0]
        or now[1] is not then[1]
        or now[2] is not then[2]
        or now[3] is not then[3]
    ):
        return None
    return kept[4]


def _keep_adapted(entry: Any, tool: Tool) -> None:
    """Keep the tool of a plain two-key tool dict (no gate keys) for :func:`_adapted_before`."""
    if type(entry) is not dict or len(entry) != 2:
        return
    read = _spec_read(entry["spec"])
    if read is None:
        return
    if len(_ADAPTED) > 4096:  # bounded, as the validator cache
        _ADAPTED.clear()
    _ADAPTED[id(entry)] = (entry, entry["spec"], entry["execute"], read, tool)


def _short(entry: Any) -> str:
    text = repr(entry)
    return text if len(text) <= 80 else text[:77] + "..."


_GATE_KEYS = ("expose", "toolsets", "unsafe_in", "check", "requires_env", "defer")


def _dict_gates(entry: Mapping[str, Any]) -> ToolGates | None:
    """Gating flags given as keys of a tool dict (``{"spec":..., "execute":..., "defer":
    True}``); ``toolset`` is accepted as a one-name ``toolsets``."""
    for key in _GATE_KEYS:
        if key in entry:
            break
    else:
        if "toolset" not in entry:
            return None  # the common dict: no gate keys (checked without building a dict)
    given = {k: entry[k] for k in _GATE_KEYS if k in entry}
    if "toolset" in entry:
        given["toolsets"] = [entry["toolset"]]
    if not given:
        return None
    for key in ("toolsets", "unsafe_in", "requires_env"):
        value = given.get(key)
        if isinstance(value, str):
            given[key] = [value]
    return ToolGates(
        expose=bool(given.get("expose", True)),
        toolsets=frozenset(given.get("toolsets", ())),
        unsafe_in=frozenset(given.get("unsafe_in", ())),
        check=given.get("check"),
        requires_env=tuple(given.get("requires_env", ())),
        defer=bool(given.get("defer", False)),
    )
