"""Tool specs from Python functions: name, description and a JSON Schema of the parameters.

Everything here runs once, when a decorator is applied: the schema comes from the type
hints through pydantic, per-parameter descriptions from a Google-style ``Args:`` section,
and the parameters the runtime injects are left out of what the model sees. Mistakes
raise :class:`~openprogram.errors.ToolDefinitionError` naming the parameter and the fix.
"""

from __future__ import annotations

import copy
import enum
import inspect
import re
import types
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import pydantic
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from openprogram.errors import ToolDefinitionError
from openprogram.types import ToolSpec

__all__ = ["INJECTED", "Signature", "parse_docstring", "signature_of"]

INJECTED = frozenset({"runtime", "cancel", "signal", "on_update", "tool_call_id"})
"""Parameter names the runtime fills in; the model never sees them."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SECTION = re.compile(r"^([A-Z][A-Za-z ]*):\s*$")
_ARGS_HEADERS = ("Args", "Arguments", "Parameters")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True, slots=True)
class Signature:
    """What a decorator learned from a function, once."""

    spec: ToolSpec
    inject: frozenset[str]
    """Injected parameters the function declares."""
    model: type[BaseModel] | None
    """Converts JSON arguments to Python values (None when they are already the values)."""
    is_async: bool


def signature_of(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    localns: dict[str, Any] | None = None,
) -> Signature:
    """Build the spec and call plan of ``fn`` (see the module docstring). ``localns`` are
    the names visible where ``fn`` was defined (string annotations may use them)."""
    tool_name = _check_name(name if name is not None else getattr(fn, "__name__", ""), fn)
    summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
    params = _model_params(fn, tool_name)
    unknown = sorted(set(arg_docs) - set(params) - INJECTED)
    if unknown:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: the docstring's Args section documents {', '.join(unknown)}, "
            f"which {'is not a parameter' if len(unknown) == 1 else 'are not parameters'} of "
            f"{_qualname(fn)}; fix the name or remove the entry"
        )
    hints = _hints(fn, tool_name, localns)
    fields = _fields(tool_name, params, hints, arg_docs)
    model = pydantic.create_model(
        f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    schema = _json_schema(model)
    all_params = inspect.signature(fn).parameters
    return Signature(
        spec=ToolSpec(tool_name, description if description is not None else summary, schema),
        inject=frozenset(n for n in all_params if n in INJECTED),
        model=None if all(_is_plain(hints.get(n, Any)) for n in params) else model,
        is_async=inspect.iscoroutinefunction(fn),
    )


def _fields(
    tool_name: str,
    params: dict[str, inspect.Parameter],
    hints: dict[str, Any],
    arg_docs: dict[str, str],
) -> dict[str, Any]:
    """pydantic field definitions, one per parameter the model fills in."""
    fields: dict[str, Any] = {}
    for pname, param in params.items():
        annotation = hints.get(pname, Any)
        _check_annotation(tool_name, pname, annotation)
        default = ... if param.default is inspect.Parameter.empty else param.default
        doc = arg_docs.get(pname)
        # no description=None: it would hide one given in Annotated[..., Field(...)]
        fields[pname] = (annotation, Field(default, description=doc) if doc else Field(default))
    return fields


def _qualname(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def _check_name(name: str, fn: Callable[..., Any]) -> str:
    if not _NAME.match(name or ""):
        raise ToolDefinitionError(
            f"{_qualname(fn)}: {name!r} is not a valid tool name (1-64 letters, digits, '_' "
            "or '-', as providers require); pass name='...' to the decorator"
        )
    return name


def _model_params(fn: Callable[..., Any], tool_name: str) -> dict[str, inspect.Parameter]:
    """The parameters the model fills in; rejects shapes a keyword call cannot fill."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: cannot read its signature: {exc}") from exc
    out: dict[str, inspect.Parameter] = {}
    for pname, param in sig.parameters.items():
        problem = _param_problem(pname, param)
        if problem:
            raise ToolDefinitionError(f"tool {tool_name!r}, parameter {pname!r}: {problem}")
        if pname not in INJECTED:
            out[pname] = param
    return out


def _param_problem(pname: str, param: inspect.Parameter) -> str | None:
    kind = param.kind
    if kind is inspect.Parameter.VAR_POSITIONAL:
        return "the model passes arguments by name, so *args cannot be filled; use a list parameter"
    if kind is inspect.Parameter.VAR_KEYWORD:
        return "**kwargs has no schema the model can follow; declare each parameter, or a dict one"
    if kind is inspect.Parameter.POSITIONAL_ONLY:
        return "positional-only parameters cannot be passed by name; remove the '/'"
    if pname in ("self", "cls"):
        return "decorate a plain function, not a method (wrap the method in a function)"
    return None


def _hints(
    fn: Callable[..., Any], tool_name: str, localns: dict[str, Any] | None
) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, localns=localns, include_extras=True)
    except Exception as exc:  # NameError for a forward reference, TypeError for a bad hint
        raise ToolDefinitionError(
            f"tool {tool_name!r}: cannot resolve its type hints ({type(exc).__name__}: {exc}); "
            "define or import every annotated type before the decorated function"
        ) from exc


def _check_annotation(tool_name: str, pname: str, annotation: Any) -> None:
    try:
        TypeAdapter(annotation).json_schema()
    except Exception as exc:  # pydantic raises several types; all mean "no JSON schema"
        shown = getattr(annotation, "__name__", None) or repr(annotation)
        raise ToolDefinitionError(
            f"tool {tool_name!r}, parameter {pname!r}: annotation {shown} has no JSON Schema "
            f"({type(exc).__name__}); use a JSON-compatible type (str, int, float, bool, list, "
            "dict, Literal, an Enum, a TypedDict or a pydantic model), or, if the runtime "
            f"should supply it, name it one of {', '.join(sorted(INJECTED))}"
        ) from exc


def _json_schema(model: type[BaseModel]) -> dict[str, Any]:
    with warnings.catch_warnings():
        # a default JSON cannot express is left out of the schema; that is all we want
        warnings.simplefilter("ignore", pydantic.json_schema.PydanticJsonSchemaWarning)
        schema = model.model_json_schema()
    schema = _strip_titles(schema)
    defs = schema.pop("$defs", None)
    if defs:
        try:
            schema = _inline(schema, defs, ())
        except RecursionError:  # recursive model: keep the references
            schema["$defs"] = defs
    schema.setdefault("properties", {})
    return cast(dict[str, Any], schema)


_SCHEMA_MAPS = ("properties", "$defs", "patternProperties")


def _strip_titles(node: Any) -> Any:
    """Drop pydantic's generated ``title`` keys (noise for the model), not properties
    that happen to be named "title"."""
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _strip_titles(v) for k, v in value.items()}
        else:
            out[key] = _strip_titles(value)
    return out


def _inline(node: Any, defs: dict[str, Any], stack: tuple[str, ...]) -> Any:
    """Replace local ``$ref``s by their definitions: several providers reject ``$ref``."""
    if isinstance(node, list):
        return [_inline(v, defs, stack) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        key = ref.removeprefix("#/$defs/")
        if key in stack:
            raise RecursionError(key)
        merged = {**copy.deepcopy(defs[key]), **{k: v for k, v in node.items() if k != "$ref"}}
        return _inline(merged, defs, (*stack, key))
    return {k: _inline(v, defs, stack) for k, v in node.items()}


_PLAIN = (str, int, float, bool, type(None), Any, list, dict)


def _is_plain(annotation: Any) -> bool:
    """True when validated JSON is already the Python value (no conversion needed)."""
    if annotation in _PLAIN:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _is_plain(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return not any(isinstance(a, enum.Enum) for a in typing.get_args(annotation))
    if origin in (list, dict, typing.Union, types.UnionType):
        return all(_is_plain(a) for a in typing.get_args(annotation))
    return False


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph (joined into one line) and the ``Args:`` descriptions.

    >>> parse_docstring("Add numbers.\\n\\nArgs:\\n    a: the first\\n    b (int): the second")
    ('Add numbers.', {'a': 'the first', 'b': 'the second'})
    """
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line):
            break
        summary.append(line.strip())
    return " ".join(summary), _args_section(lines)


def _args_section(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    inside = False
    indent = 0
    current: str | None = None
    for line in lines:
        header = _SECTION.match(line)
        if header:
            inside = header.group(1) in _ARGS_HEADERS
            indent, current = 0, None
            continue
        if not inside or not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        entry = _ARG_LINE.match(line.strip())
        if entry and (indent == 0 or depth <= indent):
            indent = depth
            current = entry.group(1).lstrip("*")
            out[current] = entry.group(2).strip()
        elif current is not None:  # continuation line of the current entry
            out[current] = f"{out[current]} {line.strip()}".strip()
    return out
