"""``@function`` and ``@agentic_function``: a Python function that stays callable as
itself and is also a tool the model can pick.

Example::

    @function
    def add(a: int, b: int) -> int:
        \"\"\"Add two integers.

        Args:
            a: The first.
            b: The second.
        \"\"\"
        return a + b

    add(2, 3)                              # 5: still the Python function
    runtime.exec("2+3?", tools=[add])      # the model sees add(a: integer, b: integer)

    @agentic_function
    def research(topic: str, runtime: Runtime) -> str:
        \"\"\"Research a topic and summarize it.\"\"\"
        return runtime.exec(f"Find out about {topic}.")   # a nested loop

Everything about the function (its schema, injected parameters, gating flags) is checked
and built once, when the decorator is applied.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    ParamSpec,
    TypedDict,
    TypeVar,
    Unpack,
    cast,
    overload,
)

import pydantic

from openprogram.errors import (
    AgenticRecursionError,
    ArgumentTypeError,
    NoRuntimeError,
    ToolDefinitionError,
)
from openprogram.tools._context import active_agentic_var, current_runtime, current_runtime_var
from openprogram.tools._gating import ToolGates
from openprogram.tools._schema import Signature, signature_of
from openprogram.tools._tool import Tool
from openprogram.tools._validation import ArgumentsError
from openprogram.tools.registry import ToolRegistry, default_registry
from openprogram.types import ToolSpec

if TYPE_CHECKING:
    from openprogram.runtime import Runtime

__all__ = [
    "AgenticOptions",
    "FunctionTool",
    "ToolOptions",
    "agentic_function",
    "function",
    "tool_from_callable",
]

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_MAX_DEPTH = 5
"""How many calls of one ``@agentic_function`` may be nested inside each other."""


def _noop_update(partial_result: Any) -> None:
    """Stands in for ``on_update`` when nobody listens, so tool code never checks."""


class FunctionTool(Generic[P, R]):
    """A decorated function. Calling it calls the function; ``.spec``/``.execute`` (and
    ``__openprogram_tool__``) make it a tool for ``exec(tools=[...])``."""

    __wrapped__: Callable[P, R]

    def __init__(
        self,
        fn: Callable[P, R],
        signature: Signature,
        gates: ToolGates,
        *,
        agentic: bool,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> None:
        functools.update_wrapper(self, fn)
        self.__wrapped__ = fn
        self.agentic = agentic
        """True for ``@agentic_function`` (runs with a runtime; guarded against runaway
        self-recursion)."""
        self.max_depth = max_depth
        self._signature = signature
        params = list(inspect.signature(fn).parameters.values())
        self._runtime_param = next((p for p in params if p.name == "runtime"), None)
        self._runtime_index = params.index(self._runtime_param) if self._runtime_param else -1
        self.__openprogram_tool__ = Tool(
            signature.spec, self._run, is_async=signature.is_async, source=self, gates=gates
        )

    @property
    def name(self) -> str:
        return self._signature.spec.name

    @property
    def spec(self) -> ToolSpec:
        """What the model sees: name, description, JSON Schema of the parameters."""
        return self._signature.spec

    @property
    def tool(self) -> Tool:
        return self.__openprogram_tool__

    @property
    def gates(self) -> ToolGates:
        return self.__openprogram_tool__.gates

    def __repr__(self) -> str:
        kind = "agentic_function" if self.agentic else "function"
        return f"<{kind} {self.name}>"

    # -- called from Python --------------------------------------------------------------

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        runtime = self._runtime_for(args, kwargs)
        return cast(R, self._invoke(runtime, args, kwargs))

    def _runtime_for(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Runtime | None:
        """The runtime of this call: passed explicitly, else the running one (injected)."""
        if self._runtime_param is None:
            return current_runtime() if self.agentic else None
        if "runtime" in kwargs:
            return cast("Runtime | None", kwargs["runtime"])
        if len(args) > self._runtime_index:
            return cast("Runtime | None", args[self._runtime_index])
        running = current_runtime()
        if running is not None:
            kwargs["runtime"] = running
        elif self._runtime_param.default is inspect.Parameter.empty:
            raise ArgumentTypeError(
                f"{self.name}() needs a runtime: pass runtime=Runtime(...), or call it from "
                "code running under Runtime.exec (a tool body), which supplies its own"
            )
        return running

    def _invoke(self, runtime: Runtime | None, args: tuple[Any, ...], kwargs: Any) -> Any:
        fn: Callable[..., Any] = self.__wrapped__
        if not self.agentic:
            return fn(*args, **kwargs)
        active = active_agentic_var.get()
        if active.count(self.name) >= self.max_depth:
            raise AgenticRecursionError(
                f"agentic function {self.name!r} is already running {self.max_depth} levels "
                f"deep (max_depth={self.max_depth}); finish with what you have instead of "
                "calling it again"
            )
        if self._signature.is_async:
            return self._ainvoke(runtime, active, args, kwargs)
        tokens = (active_agentic_var.set((*active, self.name)), current_runtime_var.set(runtime))
        try:
            return fn(*args, **kwargs)
        finally:
            current_runtime_var.reset(tokens[1])
            active_agentic_var.reset(tokens[0])

    async def _ainvoke(
        self, runtime: Runtime | None, active: tuple[str, ...], args: tuple[Any, ...], kwargs: Any
    ) -> Any:
        fn = cast(Callable[..., Awaitable[Any]], self.__wrapped__)
        tokens = (active_agentic_var.set((*active, self.name)), current_runtime_var.set(runtime))
        try:
            return await fn(*args, **kwargs)
        finally:
            current_runtime_var.reset(tokens[1])
            active_agentic_var.reset(tokens[0])

    # -- called by the loop --------------------------------------------------------------

    def execute(self, **arguments: Any) -> Any:
        """Run as the model would: validate (with lenient coercion) and inject; returns
        the function's value (an awaitable for an async function)."""
        args = self.tool.validator.validate(self.name, arguments)
        return self._run("", args, None, None)

    def _run(self, call_id: str, args: dict[str, Any], cancel: Any, on_update: Any) -> Any:
        kwargs = self._convert(args)
        inject = self._signature.inject
        runtime = current_runtime()
        if inject:
            if "runtime" in inject:
                if runtime is None and self._needs_runtime():
                    raise NoRuntimeError(
                        f"tool {self.name!r} needs a runtime and none is running; "
                        "offer it through Runtime.exec"
                    )
                kwargs["runtime"] = runtime
            for pname in inject & {"cancel", "signal"}:
                kwargs[pname] = cancel
            if "on_update" in inject:
                kwargs["on_update"] = on_update or _noop_update
            if "tool_call_id" in inject:
                kwargs["tool_call_id"] = call_id
        return self._invoke(runtime, (), kwargs)

    def _needs_runtime(self) -> bool:
        param = self._runtime_param
        return param is not None and param.default is inspect.Parameter.empty

    def _convert(self, args: dict[str, Any]) -> dict[str, Any]:
        """JSON values to the annotated Python types (pydantic models, enums, dates...);
        skipped when the annotations are plain JSON types."""
        model = self._signature.model
        if model is None:
            return dict(args)
        try:
            parsed = model.model_validate(args)
        except pydantic.ValidationError as exc:
            lines = [
                f"  - {'.'.join(map(str, e['loc'])) or 'root'}: {e['msg']}" for e in exc.errors()
            ]
            raise ArgumentsError(
                f'Validation failed for tool "{self.name}":\n' + "\n".join(lines)
            ) from None
        return {key: getattr(parsed, key) for key in args}


class ToolOptions(TypedDict, total=False):
    """The keywords of :func:`function` (all optional), stated once for both decorators and
    checked when the decorator is applied."""

    name: str | None
    """The tool's name (default: the function's)."""
    description: str | None
    """What the model reads (default: the docstring's summary)."""
    registry: ToolRegistry | None
    """Where to register it; ``None``: nowhere. Default: :data:`default_registry` for
    ``@function``, nowhere for ``@agentic_function``."""
    toolset: str | Iterable[str] | None
    """The named toolsets it belongs to."""
    expose: bool
    """``False``: never offered to the model (default ``True``)."""
    available_if: bool | Callable[[], bool] | None
    """Decided once, now: false (or a condition that raises) means never registered."""
    unsafe_in: str | Iterable[str]
    """Tool sources where it must not be offered."""
    check: Callable[[], bool] | None
    """Availability, asked per call."""
    requires_env: str | Iterable[str]
    """Environment variables that must be set for it to be offered (checked per call)."""
    defer: bool
    """``True``: offered only after ``tool_search`` loads it."""


class AgenticOptions(ToolOptions, total=False):
    """The keywords of :func:`agentic_function`: those of :func:`function`, and
    ``max_depth``."""

    max_depth: int
    """How deeply calls of this same function may nest (default 5)."""


_KEYWORDS = frozenset(ToolOptions.__annotations__)


def _checked(label: str, options: ToolOptions) -> None:
    """Refuse unknown keywords (``**options`` takes any at run time), naming the nearest
    known one."""
    for key in sorted(set(options) - _KEYWORDS):
        near = difflib.get_close_matches(key, _KEYWORDS, n=1)
        hint = (
            f"; did you mean {near[0]!r}?" if near else f"; known: {', '.join(sorted(_KEYWORDS))}"
        )
        raise ToolDefinitionError(f"{label}: unknown keyword {key!r}{hint}")
    check = options.get("check")
    if check is not None and not callable(check):
        raise ToolDefinitionError(
            f"{label}: check={check!r} must be a function returning True/False"
        )


def _gates(options: ToolOptions) -> ToolGates:
    return ToolGates(
        available=_evaluate(options.get("available_if")),
        expose=options.get("expose", True),
        toolsets=_names(options.get("toolset")),
        unsafe_in=_names(options.get("unsafe_in", ())),
        check=options.get("check"),
        requires_env=tuple(_names(options.get("requires_env", ()))),
        defer=options.get("defer", False),
    )


def _definer_locals(depth: int) -> dict[str, Any]:
    """The local names of the frame that applied the decorator, ``depth`` frames up (1:
    the caller): with ``from __future__ import annotations`` a function defined inside
    another function may annotate with that function's local types."""
    try:
        return dict(sys._getframe(depth).f_locals)
    except ValueError:  # no such frame (called from the top of the interpreter)
        return {}


def _names(value: str | Iterable[str] | None) -> frozenset[str]:
    if value is None:
        return frozenset()
    return frozenset([value] if isinstance(value, str) else value)


def _evaluate(available_if: bool | Callable[[], bool] | None) -> bool:
    """The ``available_if`` verdict, taken once; a condition that raises means "not
    available" (e.g. an optional dependency that fails to import)."""
    if available_if is None:
        return True
    if not callable(available_if):
        return bool(available_if)
    try:
        return bool(available_if())
    except Exception:
        return False


def _decorate(
    fn: Any,
    *,
    agentic: bool,
    options: ToolOptions,
    max_depth: int = DEFAULT_MAX_DEPTH,
    localns: dict[str, Any] | None = None,
) -> FunctionTool[Any, Any]:
    label = "@agentic_function" if agentic else "@function"
    if isinstance(fn, FunctionTool):
        raise ToolDefinitionError(f"{label}: {fn!r} is already decorated; decorate it once")
    if not inspect.isfunction(fn):
        raise ToolDefinitionError(
            f"{label} applies to a function, got {fn!r}; options are keywords: "
            f"{label}(name='...', description='...')"
        )
    name, description = options.get("name"), options.get("description")
    decorated = FunctionTool(
        fn,
        signature_of(fn, name=name, description=description, localns=localns),
        _gates(options),
        agentic=agentic,
        max_depth=max_depth,
    )
    target = options.get("registry", None if agentic else default_registry)
    if target is not None and not isinstance(target, ToolRegistry):
        raise ToolDefinitionError(f"{label}: registry={target!r} is not a ToolRegistry")
    if target is not None and decorated.gates.available:
        target.register(decorated)
    return decorated


def _decorator(fn: Any, options: ToolOptions, *, agentic: bool, max_depth: int) -> Any:
    """What ``@function``/``@agentic_function`` return: the tool for a bare use, else the
    decorator to apply (the options checked already, before any function is seen)."""
    label = "@agentic_function" if agentic else "@function"
    _checked(label, options)

    def apply(target: Any, localns: dict[str, Any] | None = None) -> FunctionTool[Any, Any]:
        where = localns if localns is not None else _definer_locals(2)
        return _decorate(
            target, agentic=agentic, options=options, max_depth=max_depth, localns=where
        )

    return apply if fn is None else apply(fn, _definer_locals(3))


@overload
def function(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def function(
    **options: Unpack[ToolOptions],
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def function(fn: Any = None, /, **options: Unpack[ToolOptions]) -> Any:
    """Make a Python function a tool and register it (in ``registry``, by default
    :data:`~openprogram.tools.registry.default_registry`; ``registry=None``: nowhere).

    Works bare (``@function``) and with the keywords of :class:`ToolOptions`.
    ``name``/``description`` override the function's name and docstring summary. Gating:
    ``available_if`` (decided now; False means never registered), ``expose=False`` (never
    offered), ``toolset`` (membership of named toolsets), ``unsafe_in`` (sources where it
    must not be offered), ``check`` and ``requires_env`` (availability, checked per call),
    ``defer=True`` (offered only after ``tool_search`` loads it). Parameters named
    ``runtime``, ``cancel``/``signal``, ``on_update`` and ``tool_call_id`` are supplied by
    the runtime, not the model.
    """
    return _decorator(fn, options, agentic=False, max_depth=DEFAULT_MAX_DEPTH)


@overload
def agentic_function(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def agentic_function(
    **options: Unpack[AgenticOptions],
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def agentic_function(fn: Any = None, /, **options: Unpack[AgenticOptions]) -> Any:
    """Mark a function whose body may call ``runtime.exec`` (open a nested loop).

    Called from Python it runs with a runtime: its ``runtime`` parameter is the one
    passed, else the runtime of the exec running now. Passed in ``exec(tools=[...])``
    the model sees one pickable function; picking it runs the body. It is registered
    only when ``registry=`` is given. ``max_depth`` (default 5) bounds how deeply calls of
    this same function may nest (a model re-picking it from its own nested loop); the
    other keywords are those of :func:`function` (see :class:`AgenticOptions`).
    """
    max_depth = options.pop("max_depth", DEFAULT_MAX_DEPTH)
    if not isinstance(max_depth, int) or max_depth < 1:
        raise ToolDefinitionError(f"@agentic_function: max_depth={max_depth!r} must be >= 1")
    return _decorator(fn, options, agentic=True, max_depth=max_depth)


def tool_from_callable(fn: Callable[..., Any]) -> Tool:
    """A tool for a plain (undecorated) function, registered nowhere (used by
    ``choices=``, which accepts plain functions too)."""
    decorated = _decorate(fn, agentic=True, options={})
    return decorated.tool
