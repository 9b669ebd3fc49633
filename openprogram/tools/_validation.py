"""Argument validation: JSON Schema with the lenient coercion real models need.

A validator is compiled once per distinct schema (fastjsonschema turns the schema into
Python code) and cached. The hot path is one compiled check of the raw arguments (for a
flat schema of scalar properties, a shorter one made the same way: see
:func:`_fast_check`); only when that fails do we coerce ("3" -> 3, "true" -> True, a
scalar where a string is wanted) and, if the coerced arguments still fail, collect every
failing path with jsonschema for an error text the model can act on.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import fastjsonschema

if TYPE_CHECKING:
    import jsonschema

from openprogram.errors import OpenProgramError, ToolSchemaError

__all__ = ["ArgumentsError", "ArgumentValidator", "compile_validator", "validate_tool_arguments"]


class ArgumentsError(OpenProgramError, ValueError):
    """The model's arguments do not fit the tool's schema; ``str(e)`` is the text the
    model sees."""


_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (dict, "object"),
    (list, "array"),
    (type(None), "null"),
)


def _json_type(value: Any) -> str:
    for py, name in _JSON_TYPES:
        if isinstance(value, py):
            return name
    return "unknown"


def _types(schema: dict[str, Any]) -> list[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return [t]
    if isinstance(t, list):
        return [x for x in t if isinstance(x, str)]
    enum = schema.get("enum")
    if isinstance(enum, list):  # an untyped enum: its values say what is wanted
        return list(dict.fromkeys(_json_type(v) for v in enum))
    return []


def _accepts_type(schema: dict[str, Any], value: Any) -> bool:
    types = _types(schema)
    kind = _json_type(value)
    return kind in types or (kind == "integer" and "number" in types)


def _coerce(value: Any, schema: Any) -> Any:
    """Coerce ``value`` toward ``schema`` where a model plausibly meant it; never fails."""
    if not isinstance(schema, dict):
        return value
    variants = [v for k in ("anyOf", "oneOf") for v in schema.get(k, ()) if isinstance(v, dict)]
    if variants:
        return _coerce_variants(value, variants)
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        return _coerce(value, all_of[0])
    if isinstance(value, dict):
        props = schema.get("properties")
        if isinstance(props, dict):
            return {k: _coerce(v, props.get(k)) for k, v in value.items()}
        return value
    if isinstance(value, list):
        items = schema.get("items")
        return [_coerce(v, items) for v in value] if isinstance(items, dict) else value
    types = _types(schema)
    if not types:
        return value
    if isinstance(value, str):
        return _from_string(value, types, schema)
    return _from_scalar(value, types)


def _coerce_variants(value: Any, variants: list[dict[str, Any]]) -> Any:
    """``anyOf``/``oneOf`` (e.g. ``int | None``): a variant that takes the value's JSON
    type as is wins; otherwise the first variant the value coerces toward."""
    for variant in variants:
        if _accepts_type(variant, value):
            return _coerce(value, variant)
    for variant in variants:
        out = _coerce(value, variant)
        if out is not value:
            return out
    return value


def _from_string(value: str, types: list[str], schema: dict[str, Any]) -> Any:
    s = value.strip()
    if "integer" in types:
        with contextlib.suppress(ValueError):
            return int(s)
        with contextlib.suppress(ValueError, OverflowError):
            num = float(s)
            if num.is_integer():  # "3.0" where an integer is wanted
                return int(num)
    if "number" in types:
        with contextlib.suppress(ValueError):
            num = float(s)
            integral = num.is_integer() and "." not in s and "e" not in s.lower()
            return int(num) if integral else num
    if "boolean" in types and s.lower() in _TRUE | _FALSE:
        return s.lower() in _TRUE
    if ("object" in types or "array" in types) and s[:1] in ("{", "["):
        with contextlib.suppress(ValueError):
            return _coerce(json.loads(s), schema)
    if "null" in types and s.lower() in ("null", "none", ""):
        return None
    return value


def _from_scalar(value: Any, types: list[str]) -> Any:
    if isinstance(value, bool):
        if "boolean" not in types and "string" in types:
            return "true" if value else "false"
        return value
    if "string" in types and isinstance(value, (int, float)):
        return str(value)
    if "integer" in types and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "root"


class ArgumentValidator:
    """A compiled validator for one parameters schema."""

    __slots__ = ("_check", "_fast", "_fill", "_full", "_schema")

    def __init__(self, schema: dict[str, Any]) -> None:
        self._schema = schema
        try:
            # use_default=False: checking must never write into the model's own arguments
            # (they are the history sent back to the provider, and what events show).
            self._check: Callable[[Any], Any] = fastjsonschema.compile(schema, use_default=False)
            self._fill: Callable[[Any], Any] | None = (
                fastjsonschema.compile(schema) if _has_defaults(schema) else None
            )
        except (fastjsonschema.JsonSchemaDefinitionException, TypeError, ValueError) as exc:
            raise ToolSchemaError(f"invalid JSON Schema for tool parameters: {exc}") from exc
        self._full: jsonschema.protocols.Validator | None = None
        self._fast = _fast_check(schema)

    def _with_defaults(self, args: dict[str, Any], *, copied: bool) -> dict[str, Any]:
        """The arguments the tool receives: schema defaults filled in, on a copy."""
        if self._fill is None:
            return args
        filled: dict[str, Any] = self._fill(args if copied else copy.deepcopy(args))
        return filled

    def validate(self, tool_name: str, args: Any) -> dict[str, Any]:
        """Return the arguments to pass to the tool (coerced if needed) or raise
        :class:`ArgumentsError` with a text for the model."""
        if not isinstance(args, dict):
            raise ArgumentsError(
                f'Validation failed for tool "{tool_name}": arguments must be a JSON object, '
                f"got {type(args).__name__}.\n\nReceived arguments:\n{_dump(args)}"
            )
        fast = self._fast
        if fast is not None and fast(args):
            return args  # flat schemas with no defaults: nothing to fill in
        try:
            self._check(args)
            return self._with_defaults(args, copied=False)
        except fastjsonschema.JsonSchemaValueException:
            pass
        coerced = _coerce(copy.deepcopy(args), self._schema)
        try:
            self._check(coerced)
            return self._with_defaults(coerced, copied=True)
        except fastjsonschema.JsonSchemaValueException:
            pass
        if self._full is None:
            # imported on the first arguments that fail: a run whose arguments fit never
            # pays for it (about 10,000 objects and 40 modules, jsonschema's and what it
            # imports: attrs, referencing, rpds)
            import jsonschema.validators

            cls = jsonschema.validators.validator_for(self._schema)
            self._full = cls(self._schema)
        errors = sorted(self._full.iter_errors(coerced), key=lambda e: list(map(str, e.path)))
        lines = [f"  - {_path(e)}: {e.message}" for e in errors] or ["  - root: invalid"]
        raise ArgumentsError(
            f'Validation failed for tool "{tool_name}":\n'
            + "\n".join(lines)
            + f"\n\nReceived arguments:\n{_dump(args)}"
        )


_SCALAR_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}
_FLAT_KEYS = {"type", "properties", "required", "additionalProperties", "description", "title"}
_PROP_KEYS = {"type", "description", "title"}


def _scalar_kinds(prop: Any) -> tuple[type, ...] | None:
    if not isinstance(prop, dict) or not set(prop) <= _PROP_KEYS:
        return None
    names = prop.get("type")
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(n in _SCALAR_TYPES for n in names):
        return None
    return tuple(t for n in names for t in _SCALAR_TYPES[n])


def _flat(schema: dict[str, Any]) -> tuple[dict[str, tuple[type, ...]], list[str], bool] | None:
    """A flat schema's types by property, its required names and whether it is closed
    (``additionalProperties: false``); ``None`` for any other schema."""
    if schema.get("type") != "object" or not set(schema) <= _FLAT_KEYS:
        return None
    props = schema.get("properties") or {}
    required = schema.get("required") or []
    if not isinstance(props, dict) or not isinstance(required, list):
        return None
    if not all(type(name) is str for name in [*props, *required]):
        return None
    kinds = {name: _scalar_kinds(prop) for name, prop in props.items()}
    if any(k is None for k in kinds.values()):
        return None
    closed = schema.get("additionalProperties", True) is False
    return kinds, required, closed  # type: ignore[return-value]


def _fast_check(schema: dict[str, Any]) -> Callable[[dict[str, Any]], bool] | None:
    """For the common flat schema (an object of scalar-typed properties), a check that
    accepts only what the full validator accepts (it may reject more: the caller then
    takes the full path). ``None`` when the schema is not flat.

    The check is made as code, as fastjsonschema makes the full one: for ``{"a":
    integer, "b": string}``, both required, it reads ``type(args.get('a', absent)) is
    int and type(args.get('b', absent)) is str and (len(args) == 2 or rest(args))``,
    where ``rest`` checks every argument in a loop (optional ones were given). The code
    holds only ``repr()`` of the property names (string literals) and names of its own;
    a property name that is not a string gets no fast check."""
    flat = _flat(schema)
    if flat is None:
        return None
    kinds, required, closed = flat

    def rest(args: dict[str, Any]) -> bool:
        """Every argument given is typed as its property says (or allowed unnamed)."""
        for name, value in args.items():
            allowed = kinds.get(name)
            if allowed is None:
                if closed:
                    return False
                continue
            # exact types: bool is an int in Python, but not an integer in JSON Schema
            if type(value) not in allowed:
                return False
        return True

    needed = list(dict.fromkeys(required))
    # absent: what is read for a required argument not given (its type, object, is no
    # JSON type)
    names: dict[str, Any] = {"rest": rest, "absent": object()}
    terms = []
    for i, name in enumerate(needed):
        allowed = kinds.get(name)
        if allowed is None:  # required without a schema of its own
            terms.append(f"{name!r} in args")
        elif len(allowed) == 1:
            names[f"t{i}"] = allowed[0]
            terms.append(f"type(args.get({name!r}, absent)) is t{i}")
        else:
            names[f"t{i}"] = frozenset(allowed)
            terms.append(f"type(args.get({name!r}, absent)) in t{i}")
    terms.append(f"(len(args) == {len(needed)} or rest(args))")
    source = "def check(args):\n    return " + " and ".join(terms) + "\n"
    exec(compile(source, "<openprogram fast argument check>", "exec"), names)
    check: Callable[[dict[str, Any]], bool] = names["check"]
    return check


def _has_defaults(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "default" in schema or any(_has_defaults(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_defaults(v) for v in schema)
    return False


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


_KEY = json.JSONEncoder(sort_keys=True, default=str)
"""``json.dumps(schema, sort_keys=True, default=str)``, without building an encoder per
call (an equal schema of a fresh dict, as every generated scenario's, misses by identity)."""

_CACHE: dict[str, ArgumentValidator] = {}
_BY_ID: dict[int, tuple[dict[str, Any], ArgumentValidator]] = {}


def compile_validator(schema: dict[str, Any]) -> ArgumentValidator:
    """The cached validator for ``schema`` (compiled on first use).

    Looked up first by the schema object's identity (the same dict passed again costs a
    dict lookup), then by its canonical JSON (an equal schema shares the validator)."""
    hit = _BY_ID.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    key = _KEY.encode(schema)
    found = _CACHE.get(key)
    if found is None:
        found = _CACHE[key] = ArgumentValidator(schema)
    if len(_BY_ID) > 4096:  # bound the identity cache; the JSON cache still hits
        _BY_ID.clear()
    _BY_ID[id(schema)] = (schema, found)  # holding `schema` keeps its id from being reused
    return found


def validate_tool_arguments(tool_name: str, schema: dict[str, Any], args: Any) -> dict[str, Any]:
    """Validate ``args`` against ``schema`` with lenient coercion.

    Returns the arguments to pass to the tool; raises :class:`ArgumentsError` whose text
    lists each failing path and the arguments received::

        >>> validate_tool_arguments("add", {"type": "object",
        ...     "properties": {"a": {"type": "integer"}}}, {"a": "3"})
        {'a': 3}
    """
    return compile_validator(schema).validate(tool_name, args)
