"""Tool arguments from a tool's real JSON Schema, valid or invalid, as Hypothesis strategies.

Our own translation of the JSON Schema subset tool schemas use into strategies (no
third-party library between a schema and Hypothesis, so the project follows Hypothesis's
newest release):

- types ``integer``, ``number``, ``string``, ``boolean``, ``null``, ``array``, ``object``
  and lists of them (``type: [integer, "null"]`` and ``anyOf`` with a null branch are how a
  schema says nullable; OpenAPI's ``nullable`` is taken but draws no null, since the tool
  layer's validator ignores it); ``enum`` and ``const``; ``anyOf``, ``oneOf`` and
  ``allOf`` (merged: properties, ``required``, bounds, types);
- ``minimum``/``maximum``, ``exclusiveMinimum``/``exclusiveMaximum`` (numbers, or the old
  booleans) and ``multipleOf``; ``minLength``/``maxLength``; ``pattern`` (drawn by
  Hypothesis's ``from_regex``, whole matches; a pattern that repeats one character class,
  such as ``^[a-z0-9_]{3,16}$``, takes the length bounds without filtering);
  ``format`` ``date``, ``date-time``, ``time``, ``email``, ``uri``, ``uuid``, ``ipv4``,
  ``ipv6``, ``hostname``;
- ``items``, ``minItems``/``maxItems``, ``uniqueItems``; ``properties``, ``required``,
  ``additionalProperties`` (a boolean or a schema);
- ``$ref`` into ``$defs`` or ``definitions`` (a schema that refers to itself is refused);
- annotations (``title``, ``description``, ``$schema``, ``$comment``...) are ignored, and
  ``default`` and ``examples`` are drawn as values when they are instances.

Any other keyword raises :class:`UnsupportedSchema`, which names it and where it is.

- **Valid** arguments are instances of the schema. Objects that list ``properties`` and say
  nothing about other keys are drawn closed (no undeclared keys): still instances of the
  schema, and what a model sends. Every scalar mixes in the values where bugs live
  (:mod:`openprogram_sim.fuzz._values`: small integers, bounds and their neighbours, edge
  sizes, empty, whitespace and non-ASCII text, the user's literals), sampled plainest first
  so that a failing case shrinks toward them.
- **Invalid** arguments are what the tool layer rejects: one defect on an otherwise valid
  object (a property whose value breaks its own schema, a required key left out, an
  undeclared key where ``additionalProperties`` is false), or text that is not a JSON object
  (a ``str``: the scenario file's long call form sends it verbatim). The wrong values are
  chosen when the strategy is built, each one checked with the tool layer's own rule
  (``validate_tool_arguments``, with its lenient coercion: ``5`` where a string is wanted is
  not wrong); a drawn object is checked again and replaced by non-JSON text if the layer
  takes it after all. Nothing is filtered, so a user's test never trips Hypothesis's filter
  health check (except the rare ``pattern``, ``format`` or ``oneOf`` that needs it).

Strategies are built once per distinct schema and literals.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

import jsonschema
from hypothesis import strategies as st

from openprogram.errors import ToolSchemaError
from openprogram.tools import ArgumentsError, validate_tool_arguments
from openprogram_sim.fuzz import _values

__all__ = [
    "FORMATS",
    "RAW_ARGUMENTS",
    "SUPPORTED",
    "UnsupportedSchema",
    "arguments",
    "check_schema",
    "invalid_arguments",
    "valid_arguments",
]

RAW_ARGUMENTS = ("not json", "[1, 2]", "42", '{"q": ', "null")
"""Argument texts that are not a JSON object (sent verbatim; the tool layer rejects them)."""

_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$schema", "$id", "$comment",
     "deprecated", "readOnly", "writeOnly"}
)  # fmt: skip
SUPPORTED = frozenset(
    {"type", "enum", "const", "anyOf", "oneOf", "allOf", "nullable", "minimum", "maximum",
     "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
     "pattern", "format", "items", "minItems", "maxItems", "uniqueItems", "properties",
     "required", "additionalProperties", "$ref", "$defs", "definitions"}
) | _ANNOTATIONS  # fmt: skip
"""The keywords drawn from (annotations included); any other is refused."""

_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
_BY_KEYWORD = {  # the type a keyword implies when a schema names none
    "minimum": "number", "maximum": "number", "exclusiveMinimum": "number",
    "exclusiveMaximum": "number", "multipleOf": "number", "minLength": "string",
    "maxLength": "string", "pattern": "string", "format": "string", "items": "array",
    "minItems": "array", "maxItems": "array", "uniqueItems": "array",
    "properties": "object", "required": "object", "additionalProperties": "object",
}  # fmt: skip

# utf-8 and no NUL in free text: drawn text must survive a YAML regression file and an HTTP
# body (a NUL is among the values where bugs live, on purpose, inside "a\x00b")
_CHARS = st.characters(codec="utf-8", exclude_characters="\x00")
_KEYS = st.text(st.characters(codec="ascii", categories=["Ll", "Lu", "Nd"]), min_size=1,
                max_size=8)  # fmt: skip
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
    allow_infinity=False) | st.text(_CHARS, max_size=8)  # fmt: skip
_ANY_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=6,
)


class UnsupportedSchema(ValueError):
    """A schema uses a keyword (or a form of one) the strategies do not draw from."""

    def __init__(self, keyword: str, path: str, why: str = "") -> None:
        self.keyword = keyword
        self.path = path
        detail = f" ({why})" if why else ""
        super().__init__(
            f"{keyword!r} at {path} is not supported{detail}; fuzzing draws from types, enum, "
            "const, anyOf/oneOf/allOf, nullable, numeric bounds and multipleOf, string lengths, "
            f"pattern, the formats {', '.join(FORMATS)}, items and their bounds, properties, "
            "required, additionalProperties and $ref into $defs (docs/fuzzing.md)"
        )


# --------------------------------------------------------------------------- formats


def _date_time(value: dt.datetime, zulu: bool) -> str:
    """A naive ``value`` written in UTC, as ``...Z`` or ``...+00:00``."""
    return value.isoformat() + ("Z" if zulu else "+00:00")


_HOST_LABEL = r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?"
_HOSTNAME = st.from_regex(rf"{_HOST_LABEL}(\.{_HOST_LABEL}){{0,2}}\.[a-z]{{2,6}}", fullmatch=True)
_FIRST, _LAST = dt.datetime(1970, 1, 1), dt.datetime(2100, 1, 1)

FORMATS: dict[str, st.SearchStrategy[str]] = {
    "date": st.dates(dt.date(1900, 1, 1), dt.date(2100, 12, 31)).map(dt.date.isoformat),
    "date-time": st.builds(_date_time, st.datetimes(_FIRST, _LAST), st.booleans()),
    "time": st.times().map(lambda t: t.isoformat() + "Z"),
    "email": st.builds(
        lambda local, host: f"{local}@{host}",
        st.from_regex(r"[a-z0-9]{1,10}(\.[a-z0-9]{1,5})?", fullmatch=True),
        _HOSTNAME,
    ),
    "uri": st.builds(
        lambda host, path: f"https://{host}/{path}",
        _HOSTNAME,
        st.from_regex(r"([a-z0-9]{1,8}/?){0,3}", fullmatch=True),
    ),
    "uuid": st.uuids().map(str),
    "ipv4": st.ip_addresses(v=4).map(str),
    "ipv6": st.ip_addresses(v=6).map(str),
    "hostname": _HOSTNAME,
}
"""The string formats drawn, by name; any other ``format`` is refused."""


# --------------------------------------------------------------------------- helpers


def _canon(value: Any) -> Any:
    """A hashable key under which JSON-equal values are equal (``1`` and ``1.0``; not
    ``True`` and ``1``), for ``uniqueItems``."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, list):
        return ("l", tuple(_canon(v) for v in value))
    if isinstance(value, dict):
        return ("d", tuple(sorted((k, _canon(v)) for k, v in value.items())))
    return ("s", value)


def _evenly(values: Sequence[Any]) -> st.SearchStrategy[Any]:
    """One of ``values``, each as likely (``sampled_from`` favours the first few, and a bug
    behind the fifth small integer is as likely as one behind the first); it shrinks toward
    the first."""
    pool = list(values)
    if len(pool) == 1:
        return st.just(pool[0])
    width = 1 if len(pool) <= 256 else 2
    scale = 8 * width

    def pick(raw: bytes) -> Any:
        return pool[(int.from_bytes(raw, "big") * len(pool)) >> scale]

    return st.binary(min_size=width, max_size=width).map(pick)


def _sample(values: Sequence[Any], general: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``general`` with ``values`` mixed in (half of the draws), the values first so that a
    failing case shrinks toward them."""
    if not values:
        return general
    return st.one_of(_evenly(values), general)


def _is_multiple(value: float, step: float) -> bool:
    """Both validators' rule (jsonschema: the float quotient; fastjsonschema: decimals)."""
    try:
        quotient = value / step
        exact = Decimal(repr(value)) / Decimal(repr(step))
    except (OverflowError, InvalidOperation, ZeroDivisionError):
        return False
    return math.isfinite(quotient) and int(quotient) == quotient and int(exact) == exact


def _pattern_parts(pattern: str) -> tuple[str, int, int | None] | None:
    """``(character class, least, most)`` for a pattern that is one class repeated and
    anchored at both ends (``^[a-z_]{3,16}$``, ``^\\d+$``, ``^.*$``); None for any other."""
    match = re.fullmatch(
        r"\^?(\[(?:\\.|[^\]\\])+\]|\\[dwsDWS]|\.)(\*|\+|\?|\{(\d+)(,(\d*))?\})\$?", pattern
    )
    if match is None or not pattern.startswith("^") or not pattern.endswith("$"):
        return None
    cls, quant, low, comma, high = match.groups()
    if quant == "*":
        return cls, 0, None
    if quant == "+":
        return cls, 1, None
    if quant == "?":
        return cls, 0, 1
    least = int(low)
    most = least if comma is None else (int(high) if high else None)
    return cls, least, most


# --------------------------------------------------------------------------- the builder


class _Builder:
    """Strategies for the schemas under one root (its ``$defs``), with ``literals`` mixed
    into every scalar they fit."""

    def __init__(self, root: Mapping[str, Any], literals: Sequence[Any]) -> None:
        self.root = root
        self.literals = tuple(literals)

    # -- checks and refs --------------------------------------------------------------

    def fits(self, schema: Mapping[str, Any], values: Iterable[Any]) -> list[Any]:
        """The ``values`` that are instances of ``schema`` (with formats checked)."""
        full = {**schema}
        for key in ("$defs", "definitions"):
            if key in self.root and key not in full:
                full[key] = self.root[key]
        checker = _checker(_key(full))
        # the tool layer checks formats that jsonschema (without its extras) lets through
        wrapper = {"type": "object", "properties": {"v": full}, "required": ["v"]}
        out = []
        for value in values:
            try:
                if checker.is_valid(value) and not _rejected(wrapper, {"v": value}):
                    out.append(value)
            except Exception:  # a value the validator cannot even look at is no instance
                continue
        return out

    def resolve(self, ref: Any, path: str) -> tuple[str, Mapping[str, Any]]:
        if not isinstance(ref, str):
            raise UnsupportedSchema("$ref", path, f"{ref!r} is not a string")
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix):
                defs = self.root.get(prefix[2:-1])
                name = ref.removeprefix(prefix)
                if isinstance(defs, Mapping) and name in defs:
                    target = defs[name]
                    if isinstance(target, bool):
                        target = {} if target else {"not": {}}
                    if isinstance(target, Mapping):
                        return ref, target
                raise UnsupportedSchema("$ref", path, f"{ref!r} names no definition")
        raise UnsupportedSchema("$ref", path, f"{ref!r} is not a reference into $defs")

    def mixed(
        self, schema: Mapping[str, Any], special: Sequence[Any], general: st.SearchStrategy[Any]
    ) -> st.SearchStrategy[Any]:
        """``general`` with the values where bugs live that fit (half of the draws), and the
        user's literals that fit (a third, when there are any)."""
        drawn = _sample(self.fits(schema, special), general)
        own = self.fits(schema, self.literals)
        return st.one_of(drawn, _evenly(own)) if own else drawn

    # -- the walk ----------------------------------------------------------------------

    def build(self, schema: Any, path: str, refs: tuple[str, ...] = ()) -> st.SearchStrategy[Any]:
        if schema is True:
            return _ANY_JSON
        if schema is False:
            return st.nothing()
        if not isinstance(schema, Mapping):
            raise UnsupportedSchema("schema", path, f"{schema!r} is not an object or a boolean")
        unknown = sorted(set(schema) - SUPPORTED)
        if unknown:
            raise UnsupportedSchema(unknown[0], path)
        if "$ref" in schema:
            ref, target = self.resolve(schema["$ref"], path)
            if ref in refs:
                raise UnsupportedSchema("$ref", path, f"{ref!r} refers to itself (recursion)")
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            merged = _merge([dict(target), rest], path) if _constraints(rest) else dict(target)
            return self.build(merged, path, (*refs, ref))
        if "allOf" in schema:
            parts = schema["allOf"]
            if not isinstance(parts, list) or not parts:
                raise UnsupportedSchema("allOf", path, "it must be a non-empty list")
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            resolved = [self.inline(p, f"{path}.allOf[{i}]", refs) for i, p in enumerate(parts)]
            return self.build(_merge([rest, *resolved], path), path, refs)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.branches(schema, key, path, refs)
        return self.plain(schema, path, refs)

    def inline(self, schema: Any, path: str, refs: tuple[str, ...]) -> dict[str, Any]:
        """``schema`` with its top-level ``$ref`` and ``allOf`` merged in (for ``allOf``)."""
        if schema is True:
            return {}
        if not isinstance(schema, Mapping):
            raise UnsupportedSchema("allOf", path, f"{schema!r} is not an object")
        out = dict(schema)
        if "$ref" in out:
            ref, target = self.resolve(out.pop("$ref"), path)
            if ref in refs:
                raise UnsupportedSchema("$ref", path, f"{ref!r} refers to itself (recursion)")
            out = _merge([self.inline(target, path, (*refs, ref)), out], path)
        if "allOf" in out:
            parts = out.pop("allOf")
            out = _merge([out, *(self.inline(p, path, refs) for p in parts)], path)
        return out

    def branches(
        self, schema: Mapping[str, Any], key: str, path: str, refs: tuple[str, ...]
    ) -> st.SearchStrategy[Any]:
        parts = schema[key]
        if not isinstance(parts, list) or not parts:
            raise UnsupportedSchema(key, path, "it must be a non-empty list")
        rest = {k: v for k, v in schema.items() if k != key}
        options = []
        for i, part in enumerate(parts):
            where = f"{path}.{key}[{i}]"
            branch = self.inline(part, where, refs)
            merged = _merge([rest, branch], where) if _constraints(rest) else branch
            options.append(self.build(merged, where, refs))
        drawn = st.one_of(options)
        if key == "oneOf" and not _disjoint(parts):
            only = [p if isinstance(p, Mapping) else {} for p in parts]
            root_defs = {k: self.root[k] for k in ("$defs", "definitions") if k in self.root}

            def exactly_one(value: Any) -> bool:
                return sum(bool(self.fits({**root_defs, **p}, [value])) for p in only) == 1

            drawn = drawn.filter(exactly_one)
        return drawn

    def plain(
        self, schema: Mapping[str, Any], path: str, refs: tuple[str, ...]
    ) -> st.SearchStrategy[Any]:
        """A schema without ``$ref``, ``allOf``, ``anyOf`` or ``oneOf``."""
        rest = {k: v for k, v in schema.items() if k not in ("enum", "const", "nullable")}
        if "const" in schema:
            return st.just(schema["const"])
        if "enum" in schema:
            enum = schema["enum"]
            if not isinstance(enum, list) or not enum:
                raise UnsupportedSchema("enum", path, "it must be a non-empty list")
            kept = self.fits({**rest, "enum": enum}, enum)
            if not kept:
                raise UnsupportedSchema("enum", path, "no value of it fits the rest of the schema")
            return st.sampled_from(kept)
        # OpenAPI's `nullable` is taken, but null is not drawn for it: JSON Schema validators
        # (the tool layer's among them) ignore it; `type: [X, "null"]` is the null they take
        return self.typed(rest, path, refs)

    def typed(
        self, schema: Mapping[str, Any], path: str, refs: tuple[str, ...]
    ) -> st.SearchStrategy[Any]:
        given = schema.get("type")
        if given is None:
            implied = list(dict.fromkeys(_BY_KEYWORD[k] for k in schema if k in _BY_KEYWORD))
            if not implied:
                return _sample(self.fits(schema, self.examples(schema)), _ANY_JSON)
            types = implied
        else:
            types = [given] if isinstance(given, str) else given
            if not isinstance(types, list) or not types or any(t not in _TYPES for t in types):
                raise UnsupportedSchema("type", path, f"{given!r} is not a JSON type or a list")
        drawn = [self.of_type(t, schema, path, refs) for t in types]
        if "integer" in types and "number" in types:  # integers are numbers already
            drawn.pop(types.index("integer"))
        examples = self.fits({**schema, "type": types}, self.examples(schema))
        return _sample(examples, st.one_of(drawn))

    def examples(self, schema: Mapping[str, Any]) -> list[Any]:
        """The schema's ``default`` and ``examples`` (kept where they are instances)."""
        given = schema.get("examples")
        found = list(given) if isinstance(given, list) else []
        if "default" in schema:
            found.insert(0, schema["default"])
        return found

    def of_type(
        self, kind: str, schema: Mapping[str, Any], path: str, refs: tuple[str, ...]
    ) -> st.SearchStrategy[Any]:
        if kind == "null":
            return st.none()
        if kind == "boolean":
            return st.booleans()
        if kind in ("integer", "number"):
            return self.number(kind, schema, path)
        if kind == "string":
            return self.string(schema, path)
        if kind == "array":
            return self.array(schema, path, refs)
        return self.object(schema, path, refs)

    # -- scalars ----------------------------------------------------------------------

    def number(self, kind: str, schema: Mapping[str, Any], path: str) -> st.SearchStrategy[Any]:
        low, ex_low = _bound(schema, "minimum", "exclusiveMinimum", path, low=True)
        high, ex_high = _bound(schema, "maximum", "exclusiveMaximum", path, low=False)
        step = schema.get("multipleOf")
        if step is not None and (isinstance(step, bool) or not isinstance(step, (int, float))
                                 or not step > 0):  # fmt: skip
            raise UnsupportedSchema("multipleOf", path, f"{step!r} is not a number > 0")
        if isinstance(step, float) and step.is_integer():
            step = int(step)
        ilow = None if low is None else (math.floor(low) + 1 if ex_low else math.ceil(low))
        ihigh = None if high is None else (math.ceil(high) - 1 if ex_high else math.floor(high))
        if ilow is not None and ihigh is not None and ilow > ihigh and kind == "integer":
            raise UnsupportedSchema("minimum", path, "no integer lies between the bounds")
        if isinstance(step, int):
            klow = None if ilow is None else -((-ilow) // step)
            khigh = None if ihigh is None else ihigh // step
            general: st.SearchStrategy[Any] = st.integers(klow, khigh).map(lambda k: k * step)
            special = _values.integers(ilow, ihigh, step)
            return self.mixed(schema, special, general)
        if step is not None:
            if kind == "integer":
                raise UnsupportedSchema("multipleOf", path, f"{step!r} on an integer")
            return self.float_multiples(float(step), low, high, schema, path)
        if kind == "integer":
            special = _values.integers(ilow, ihigh, None)
            return self.mixed(schema, special, st.integers(ilow, ihigh))
        floats = st.floats(low, high, exclude_min=ex_low and low is not None,
                           exclude_max=ex_high and high is not None, allow_nan=False,
                           allow_infinity=False)  # fmt: skip
        general = floats if ilow is not None and ihigh is not None and ilow > ihigh else (
            st.integers(ilow, ihigh) | floats)  # fmt: skip
        near = _values.numbers(low, high, exclude_low=ex_low, exclude_high=ex_high)
        return self.mixed(schema, near, general)

    def float_multiples(
        self, step: float, low: float | None, high: float | None, schema: Mapping[str, Any],
        path: str,
    ) -> st.SearchStrategy[Any]:  # fmt: skip
        """Multiples of a fractional ``step``: ``k * step`` where both validators agree it
        is one, else the nearest such multiple found when the strategy is built."""
        klow = None if low is None else math.ceil(low / step)
        khigh = None if high is None else math.floor(high / step)
        if klow is not None:
            ks = range(klow, klow + 200)  # upward from the low bound
        elif khigh is not None:
            ks = range(khigh, khigh - 200, -1)  # downward from the high bound (exclusive: past it)
        else:
            ks = range(0, 200)
        candidates = [round(k * step, 12) for k in ks]
        safe = self.fits(schema, [v for v in candidates if _is_multiple(v, step)])
        if not safe:
            raise UnsupportedSchema("multipleOf", path, f"no multiple of {step} fits the bounds")

        def multiple(k: int) -> float:
            value = round(k * step, 12)
            return value if _is_multiple(value, step) and self.fits(schema, [value]) else safe[0]

        return _sample(safe[:8], st.integers(klow, khigh).map(multiple))

    def string(self, schema: Mapping[str, Any], path: str) -> st.SearchStrategy[str]:
        low = _count(schema, "minLength", path) or 0
        high = _count(schema, "maxLength", path)
        if high is not None and high < low:
            raise UnsupportedSchema("maxLength", path, "it is below minLength")
        pattern, fmt = schema.get("pattern"), schema.get("format")
        if fmt is not None and fmt not in FORMATS:
            raise UnsupportedSchema("format", path, f"the format {fmt!r} is not drawn")
        if pattern is not None:
            if not isinstance(pattern, str):
                raise UnsupportedSchema("pattern", path, "it is not a string")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise UnsupportedSchema("pattern", path, f"not a Python regex: {exc}") from None
        general: st.SearchStrategy[str]
        if fmt is not None:
            general = FORMATS[fmt]
            if pattern is not None:
                general = general.filter(re.compile(pattern).search)
            if low or high is not None:
                general = general.filter(
                    lambda s: low <= len(s) and (high is None or len(s) <= high)
                )
        elif pattern is not None:
            general = _pattern_strategy(pattern, low, high)
        else:
            general = st.text(_CHARS, min_size=low, max_size=high)
        special = _values.strings(low, high)
        return self.mixed(schema, special, general)

    # -- containers -------------------------------------------------------------------

    def array(
        self, schema: Mapping[str, Any], path: str, refs: tuple[str, ...]
    ) -> st.SearchStrategy[list[Any]]:
        items = schema.get("items", True)
        if isinstance(items, list):
            raise UnsupportedSchema("items", path, "a list of schemas, draft 4's tuple form")
        item = self.build(items, f"{path}.items", refs)
        low = _count(schema, "minItems", path) or 0
        high = _count(schema, "maxItems", path)
        if high is not None and high < low:
            raise UnsupportedSchema("maxItems", path, "it is below minItems")
        unique = schema.get("uniqueItems") is True
        if item.is_empty:
            if low:
                raise UnsupportedSchema("items", path, "no item fits, yet minItems > 0")
            return st.just([])
        key = _canon if unique else None
        general = st.lists(item, min_size=low, max_size=high, unique_by=key)
        if unique:
            return general
        edges = [st.lists(item, min_size=n, max_size=n) for n in _values.sizes(low, high)
                 if n <= 64 and n != 0]  # fmt: skip
        return st.one_of(general, *edges) if edges else general

    def object(
        self, schema: Mapping[str, Any], path: str, refs: tuple[str, ...]
    ) -> st.SearchStrategy[dict[str, Any]]:
        props = schema.get("properties") or {}
        if not isinstance(props, Mapping):
            raise UnsupportedSchema("properties", path, "it is not an object")
        required = schema.get("required") or []
        if not isinstance(required, list) or not all(isinstance(k, str) for k in required):
            raise UnsupportedSchema("required", path, "it is not a list of names")
        extra = schema.get("additionalProperties")
        if extra is None:  # closed when it lists properties (see the module docstring)
            extra = not props
        values = {k: self.build(v, f"{path}.properties.{k}", refs) for k, v in props.items()}
        if extra is True or extra is False:
            extra_values = _ANY_JSON if extra else None
        else:
            extra_values = self.build(extra, f"{path}.additionalProperties", refs)
        for key in required:
            if key not in values:
                if extra_values is None:
                    raise UnsupportedSchema("required", path, f"{key!r} is required but not "
                                            "allowed (additionalProperties is false)")  # fmt: skip
                values[key] = extra_values
        for key in required:
            if values[key].is_empty:
                raise UnsupportedSchema("required", path, f"no value fits required {key!r}")
        needed = {k: values[k] for k in required}
        optional = {k: s for k, s in values.items() if k not in needed and not s.is_empty}
        fixed = st.fixed_dictionaries(needed, optional=optional)
        if extra_values is None or extra_values.is_empty:
            return fixed
        names = _KEYS.filter(lambda k: k not in values)
        more = st.dictionaries(names, extra_values, max_size=2)
        return st.builds(lambda a, b: {**b, **a}, fixed, more)


@lru_cache(maxsize=2048)
def _checker(key: str) -> Any:
    schema = json.loads(key)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _constraints(schema: Mapping[str, Any]) -> bool:
    return any(k not in _ANNOTATIONS for k in schema)


def _bound(
    schema: Mapping[str, Any], key: str, exclusive: str, path: str, *, low: bool
) -> tuple[float | None, bool]:
    """A numeric bound and whether it is excluded (draft 4's boolean form too)."""
    value, ex = schema.get(key), schema.get(exclusive)
    for name, given in ((key, value), (exclusive, ex)):
        if given is not None and not isinstance(given, (int, float)):
            raise UnsupportedSchema(name, path, f"{given!r} is not a number")
    if isinstance(ex, bool):  # draft 4: a flag on minimum/maximum
        return value, ex and value is not None
    if ex is None:
        return value, False
    if value is None:
        return ex, True
    tighter = max(value, ex) if low else min(value, ex)
    return tighter, tighter == ex


def _count(schema: Mapping[str, Any], key: str, path: str) -> int | None:
    value = schema.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UnsupportedSchema(key, path, f"{value!r} is not a count >= 0")
    return value


def _pattern_strategy(pattern: str, low: int, high: int | None) -> st.SearchStrategy[str]:
    parts = _pattern_parts(pattern)
    if parts is not None:
        cls, least, most = parts
        char = st.from_regex(f"^{cls}$", fullmatch=True, alphabet=_CHARS)
        size_low = max(low, least)
        size_high = most if high is None else (high if most is None else min(high, most))
        if size_high is None or size_low <= size_high:
            return st.text(char, min_size=size_low, max_size=size_high)
    drawn = st.from_regex(pattern, fullmatch=True, alphabet=_CHARS)
    if low or high is not None:
        return drawn.filter(lambda s: low <= len(s) and (high is None or len(s) <= high))
    return drawn


def _disjoint(parts: Sequence[Any]) -> bool:
    """Whether no value can match two of the ``oneOf`` branches, as far as their declared
    types (or ``const``/``enum`` values) tell."""
    seen: set[str] = set()
    for part in parts:
        if not isinstance(part, Mapping):
            return False
        kinds = part.get("type")
        if isinstance(kinds, str):
            kinds = [kinds]
        if not isinstance(kinds, list) or not kinds:
            return False
        names = set(kinds) | (
            {"number", "integer"} if {"number", "integer"} & set(kinds) else set()
        )
        if names & seen:
            return False
        seen |= names
    return True


_MAXIMA = ("maximum", "maxLength", "maxItems", "exclusiveMaximum")
_MINIMA = ("minimum", "minLength", "minItems", "exclusiveMinimum")


def _merge(parts: Sequence[Mapping[str, Any]], path: str) -> dict[str, Any]:
    """``allOf`` as one schema: properties merged per name, ``required`` joined, types
    intersected, the tighter of two bounds, enums intersected, and a part's
    ``additionalProperties: false`` keeping only its own properties; two different values
    of any other keyword are refused."""
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if key not in out:
                out[key] = value
            elif key not in _ANNOTATIONS and out[key] != value:
                out[key] = _merge_one(key, out[key], value, path)
    for part in parts:
        if part.get("additionalProperties") is False and "properties" in out:
            own = set(part.get("properties") or {})
            out["properties"] = {k: v for k, v in out["properties"].items() if k in own}
            lost = [k for k in out.get("required") or () if k not in own]
            if lost:
                raise UnsupportedSchema("allOf", path, f"{lost[0]!r} is required but one part "
                                        "closes the object without it")  # fmt: skip
    return out


def _merge_one(key: str, old: Any, value: Any, path: str) -> Any:
    if key == "properties" and isinstance(old, Mapping) and isinstance(value, Mapping):
        merged = dict(old)
        for name, sub in value.items():
            both = name in old and isinstance(old[name], Mapping) and isinstance(sub, Mapping)
            merged[name] = _merge([old[name], sub], f"{path}.properties.{name}") if both else sub
        return merged
    if key == "required" and isinstance(old, list) and isinstance(value, list):
        return list(dict.fromkeys([*old, *value]))
    if key == "type":
        a = {old} if isinstance(old, str) else set(old)
        b = {value} if isinstance(value, str) else set(value)
        common = a & b
        if ("integer" in a and "number" in b) or ("integer" in b and "number" in a):
            common.add("integer")  # an integer is a number
        if not common:
            raise UnsupportedSchema(
                "allOf", path, f"types {old!r} and {value!r} exclude each other"
            )
        return sorted(common)
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (old, value))
    if key in _MAXIMA and numeric:
        return min(old, value)
    if key in _MINIMA and numeric:
        return max(old, value)
    if key == "enum" and isinstance(old, list) and isinstance(value, list):
        return [v for v in old if v in value]
    if key == "additionalProperties" and False in (old, value):
        return False
    raise UnsupportedSchema("allOf", path, f"its parts give {key!r} two different values")


# --------------------------------------------------------------------------- invalid values

_WRONG: tuple[Any, ...] = (
    {"x": [1]}, [[1], 2], "many", 2.5, True, None, "", -1, 10**20, "a" * 300, [],
    "not-an-option", "!!", "2026-13-45",
)  # fmt: skip
"""Values wrong for most schemas; those the tool layer takes for a property are not kept."""


def _wrong_values(schema: Mapping[str, Any], key: str, sub: Any) -> list[Any]:
    """Values of property ``key`` the tool layer rejects whatever the other properties."""
    near: list[Any] = list(_WRONG)
    if isinstance(sub, Mapping):
        for name in ("minimum", "exclusiveMinimum"):
            if isinstance(sub.get(name), (int, float)) and not isinstance(sub[name], bool):
                near += [sub[name] - 1, sub[name] - 0.5]
        for name in ("maximum", "exclusiveMaximum"):
            if isinstance(sub.get(name), (int, float)) and not isinstance(sub[name], bool):
                near += [sub[name] + 1, sub[name] + 0.5]
        if isinstance(sub.get("maxLength"), int):
            near.append("a" * (sub["maxLength"] + 1))
        if isinstance(sub.get("minLength"), int) and sub["minLength"] > 0:
            near.append("a" * (sub["minLength"] - 1))
    alone = {"type": "object", "properties": {key: sub}}
    for name in ("$defs", "definitions"):
        if name in schema:
            alone[name] = schema[name]
    return [v for v in near if _rejected(alone, {key: v})]


def _rejected(schema: Mapping[str, Any], value: Any) -> bool:
    try:
        validate_tool_arguments("tool", dict(schema), value)
    except ArgumentsError:
        return True
    except ToolSchemaError:
        return False
    return False


def _defects(
    schema: Mapping[str, Any], valid: st.SearchStrategy[Any]
) -> list[st.SearchStrategy[Any]]:
    """One strategy per defect the schema allows, plainest first: each draws a valid object
    with that one defect."""
    given = schema.get("properties")
    props: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    required = [k for k in schema.get("required") or () if isinstance(k, str)]
    out: list[st.SearchStrategy[Any]] = []
    for key in required:  # a required key left out

        def without(args: Any, key: str = key) -> Any:
            return {k: v for k, v in args.items() if k != key} if isinstance(args, dict) else args

        out.append(valid.map(without))
    for key, sub in sorted(props.items()):  # one property breaks its own schema
        wrong = _wrong_values(schema, key, sub)
        if wrong:

            def broken(pair: tuple[Any, Any], key: str = key) -> Any:
                args, bad = pair
                return {**args, key: bad} if isinstance(args, dict) else args

            out.append(st.tuples(valid, st.sampled_from(wrong)).map(broken))
    if schema.get("additionalProperties") is False:  # a key the tool does not take
        extra = next(n for n in ("extra", "extra_1", "extra_2", "_extra") if n not in props)
        out.append(valid.map(lambda d: {**d, extra: 1} if isinstance(d, dict) else d))
    return out


# --------------------------------------------------------------------------- the public face


def _key(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True, default=repr)


@lru_cache(maxsize=512)
def _valid(key: str, literals: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    schema = json.loads(key)
    return _Builder(schema, literals).build(schema, "root")


@lru_cache(maxsize=512)
def _invalid(key: str, literals: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    schema = json.loads(key)
    valid = _valid(key, literals)
    defects = _defects(schema, valid) if not valid.is_empty else []
    raw = st.sampled_from(RAW_ARGUMENTS)
    if not defects:
        return raw

    def checked(candidate: Any) -> Any:
        # the lenient validator may take it after all (or a combination keyword may):
        # not a defect, so non-JSON text instead, which is always rejected
        return candidate if _rejected(schema, candidate) else RAW_ARGUMENTS[0]

    return st.one_of(raw, st.one_of(defects).map(checked), st.one_of(defects).map(checked))


def check_schema(schema: Mapping[str, Any]) -> None:
    """Raise :class:`UnsupportedSchema` when ``schema`` uses what the strategies do not
    draw from (building the strategy is the check)."""
    _valid(_key(schema), ())


def valid_arguments(
    schema: Mapping[str, Any], literals: Sequence[Any] = ()
) -> st.SearchStrategy[Any]:
    """Instances of ``schema`` (closed objects, see the module docstring), with the values
    where bugs live and ``literals`` (numbers and strings a user wrote) mixed in where they
    fit; raises :class:`UnsupportedSchema`."""
    return _valid(_key(schema), tuple(literals))


def invalid_arguments(
    schema: Mapping[str, Any], literals: Sequence[Any] = ()
) -> st.SearchStrategy[Any]:
    """Arguments the tool layer rejects: an object with one defect, or non-JSON text."""
    return _invalid(_key(schema), tuple(literals))


def arguments(
    schema: Mapping[str, Any], valid: bool | None, literals: Sequence[Any] = ()
) -> st.SearchStrategy[Any]:
    """Valid (``True``), invalid (``False``) or either (``None``: mostly valid ones) arguments
    for ``schema``; nothing is checked here (the public strategies check their input)."""
    if valid is True:
        return valid_arguments(schema, literals)
    if valid is False:
        return invalid_arguments(schema, literals)
    good = valid_arguments(schema, literals)
    return st.one_of(good, good, invalid_arguments(schema, literals))
