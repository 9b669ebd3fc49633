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

import functools
import inspect
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, cast, overload

import pydantic

from openprogram.errors import (
    AgenticRecursionError,
    ArgumentTypeError,
    NoRuntimeError,
    ToolDefinitionError,
)
from openprogram.tools._context import _active_agentic, _current_runtime, current_runtime
from openprogram.tools._gating import ToolGates
from openprogram.tools._schema import Signature, signature_of
from openprogram.tools._tool import Tool
from openprogram.tools._validation import ArgumentsError
from openprogram.tools.registry import ToolRegistry, default_registry
from openprogram.types import ToolSpec

if TYPE_CHECKING:
    from openprogram.runtime import Runtime

__all__ = ["FunctionTool", "agentic_function", "function", "tool_from_callable"]

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_MAX_DEPTH = 5
"""How many calls of one ``@agentic_function`` may be nested inside each other."""


class _DefaultRegistry:
    def __repr__(self) -> str:
        return "DEFAULT"


_DEFAULT = _DefaultRegistry()
RegistryArg = ToolRegistry | None | _DefaultRegistry


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
        active = _active_agentic.get()
        if active.count(self.name) >= self.max_depth:
            raise AgenticRecursionError(
                f"agentic function {self.name!r} is already running {self.max_depth} levels "
                f"deep (max_depth={self.max_depth}); finish with what you have instead of "
                "calling it again"
            )
        if self._signature.is_async:
            return self._ainvoke(runtime, active, args, kwargs)
        tokens = (_active_agentic.set((*active, self.name)), _current_runtime.set(runtime))
        try:
            return fn(*args, **kwargs)
        finally:
            _current_runtime.reset(tokens[1])
            _active_agentic.reset(tokens[0])

    async def _ainvoke(
        self, runtime: Runtime | None, active: tuple[str, ...], args: tuple[Any, ...], kwargs: Any
    ) -> Any:
        fn = cast(Callable[..., Awaitable[Any]], self.__wrapped__)
        tokens = (_active_agentic.set((*active, self.name)), _current_runtime.set(runtime))
        try:
            return await fn(*args, **kwargs)
        finally:
            _current_runtime.reset(tokens[1])
            _active_agentic.reset(tokens[0])

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


def _gates(
    fn: Callable[..., Any],
    *,
    available_if: bool | Callable[[], bool] | None,
    expose: bool,
    toolset: str | Iterable[str] | None,
    unsafe_in: str | Iterable[str],
    check: Callable[[], bool] | None,
    requires_env: str | Iterable[str],
    defer: bool,
) -> ToolGates:
    if check is not None and not callable(check):
        raise ToolDefinitionError(
            f"{fn.__qualname__}: check={check!r} must be a function returning True/False"
        )
    return ToolGates(
        available=_evaluate(available_if),
        expose=expose,
        toolsets=_names(toolset),
        unsafe_in=_names(unsafe_in),
        check=check,
        requires_env=tuple(_names(requires_env)),
        defer=defer,
    )


def _definer_locals() -> dict[str, Any]:
    """The local names of the frame that applied the decorator (two frames up): with
    ``from __future__ import annotations`` a function defined inside another function
    may annotate with that function's local types."""
    try:
        return dict(sys._getframe(2).f_locals)
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
    name: str | None,
    description: str | None,
    registry: RegistryArg,
    max_depth: int,
    gate_options: dict[str, Any],
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
    decorated = FunctionTool(
        fn,
        signature_of(fn, name=name, description=description, localns=localns),
        _gates(fn, **gate_options),
        agentic=agentic,
        max_depth=max_depth,
    )
    target = (default_registry if not agentic else None) if registry is _DEFAULT else registry
    if target is not None and not isinstance(target, ToolRegistry):
        raise ToolDefinitionError(f"{label}: registry={target!r} is not a ToolRegistry")
    if target is not None and decorated.gates.available:
        target.register(decorated)
    return decorated


@overload
def function(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def function(
    *,
    name: str | None = None,
    description: str | None = None,
    registry: RegistryArg = _DEFAULT,
    toolset: str | Iterable[str] | None = None,
    expose: bool = True,
    available_if: bool | Callable[[], bool] | None = None,
    unsafe_in: str | Iterable[str] = (),
    check: Callable[[], bool] | None = None,
    requires_env: str | Iterable[str] = (),
    defer: bool = False,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def function(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    registry: RegistryArg = _DEFAULT,
    toolset: str | Iterable[str] | None = None,
    expose: bool = True,
    available_if: bool | Callable[[], bool] | None = None,
    unsafe_in: str | Iterable[str] = (),
    check: Callable[[], bool] | None = None,
    requires_env: str | Iterable[str] = (),
    defer: bool = False,
) -> Any:
    """Make a Python function a tool and register it (in ``registry``, by default
    :data:`~openprogram.tools.registry.default_registry`; ``registry=None``: nowhere).

    Works bare (``@function``) and with options. ``name``/``description`` override the
    function's name and docstring summary. Gating: ``available_if`` (decided now; False
    means never registered), ``expose=False`` (never offered), ``toolset`` (membership of
    named toolsets), ``unsafe_in`` (sources where it must not be offered), ``check`` and
    ``requires_env`` (availability, checked per call), ``defer=True`` (offered only after
    ``tool_search`` loads it). Parameters named ``runtime``, ``cancel``/``signal``,
    ``on_update`` and ``tool_call_id`` are supplied by the runtime, not the model.
    """
    gate_options = {
        "available_if": available_if,
        "expose": expose,
        "toolset": toolset,
        "unsafe_in": unsafe_in,
        "check": check,
        "requires_env": requires_env,
        "defer": defer,
    }

    def apply(target: Any, localns: dict[str, Any] | None = None) -> FunctionTool[Any, Any]:
        return _decorate(
            target,
            agentic=False,
            name=name,
            description=description,
            registry=registry,
            max_depth=DEFAULT_MAX_DEPTH,
            gate_options=gate_options,
            localns=localns if localns is not None else _definer_locals(),
        )

    return apply if fn is None else apply(fn, _definer_locals())


@overload
def agentic_function(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def agentic_function(
    *,
    name: str | None = None,
    description: str | None = None,
    registry: ToolRegistry | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
    toolset: str | Iterable[str] | None = None,
    expose: bool = True,
    available_if: bool | Callable[[], bool] | None = None,
    unsafe_in: str | Iterable[str] = (),
    check: Callable[[], bool] | None = None,
    requires_env: str | Iterable[str] = (),
    defer: bool = False,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def agentic_function(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    registry: ToolRegistry | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
    toolset: str | Iterable[str] | None = None,
    expose: bool = True,
    available_if: bool | Callable[[], bool] | None = None,
    unsafe_in: str | Iterable[str] = (),
    check: Callable[[], bool] | None = None,
    requires_env: str | Iterable[str] = (),
    defer: bool = False,
) -> Any:
    """Mark a function whose body may call ``runtime.exec`` (open a nested loop).

    Called from Python it runs with a runtime: its ``runtime`` parameter is the one
    passed, else the runtime of the exec running now. Passed in ``exec(tools=[...])``
    the model sees one pickable function; picking it runs the body. It is registered
    only when ``registry=`` is given. ``max_depth`` bounds how deeply calls of this same
    function may nest (a model re-picking it from its own nested loop); the other
    options are those of :func:`function`.
    """
    if not isinstance(max_depth, int) or max_depth < 1:
        raise ToolDefinitionError(f"@agentic_function: max_depth={max_depth!r} must be >= 1")
    gate_options = {
        "available_if": available_if,
        "expose": expose,
        "toolset": toolset,
        "unsafe_in": unsafe_in,
        "check": check,
        "requires_env": requires_env,
        "defer": defer,
    }

    def apply(target: Any, localns: dict[str, Any] | None = None) -> FunctionTool[Any, Any]:
        return _decorate(
            target,
            agentic=True,
            name=name,
            description=description,
            registry=registry,
            max_depth=max_depth,
            gate_options=gate_options,
            localns=localns if localns is not None else _definer_locals(),
        )

    return apply if fn is None else apply(fn, _definer_locals())


def tool_from_callable(fn: Callable[..., Any]) -> Tool:
    """A tool for a plain (undecorated) function, registered nowhere (used by
    ``choices=``, which accepts plain functions too)."""
    decorated = _decorate(
        fn,
        agentic=True,
        name=None,
        description=None,
        registry=None,
        max_depth=DEFAULT_MAX_DEPTH,
        gate_options=dict.fromkeys(("available_if", "check", "toolset"))
        | {"expose": True, "unsafe_in": (), "requires_env": (), "defer": False},
    )
    return decorated.tool
