"""Tool arguments from a tool's real JSON Schema, valid or invalid, by ``hypothesis-jsonschema``.

Any schema a tool may have (numbers with bounds, enums, nested objects, arrays, ``anyOf``,
string formats, ``$ref`` into ``$defs``) is handed to
:func:`hypothesis_jsonschema.from_schema`; nothing here knows a keyword's meaning, so what
is drawn is as faithful as that library.

- **Valid** arguments are instances of the schema. Objects that list ``properties`` and say
  nothing about other keys are drawn closed (no undeclared keys): still instances of the
  schema, and what a model sends, where the open form mostly draws junk keys a Python tool
  cannot take.
- **Invalid** arguments are what the tool layer rejects: one defect on an otherwise
  well-formed object (a property whose value breaks its own schema, a required key left
  out, an undeclared key where ``additionalProperties`` is false), or text that is not a
  JSON object (a ``str``: the scenario file's long call form sends it verbatim). Each
  defect is drawn from the schema rewritten to demand it, and the result is checked with
  the tool layer's own rule (``validate_tool_arguments``, the one the seed names): what it
  accepts after its lenient coercion (``5`` where a string is wanted) is not invalid, so
  the draw falls back to non-JSON text, which is always rejected. Nothing is filtered, so
  a user's test never trips Hypothesis's filter health check.

Strategies are built once per distinct schema (building one canonicalises the schema,
which costs far more than a draw).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from openprogram.tools import ArgumentsError, validate_tool_arguments

__all__ = ["RAW_ARGUMENTS", "arguments", "invalid_arguments", "valid_arguments"]

RAW_ARGUMENTS = ("not json", "[1, 2]", "42", '{"q": ', "null")
"""Argument texts that are not a JSON object (sent verbatim; the tool layer rejects them)."""

_OPEN_KEYS = ("additionalProperties", "patternProperties", "unevaluatedProperties")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "prefixItems")


def _closed(schema: Any) -> Any:
    """``schema`` with every object that lists ``properties`` (and says nothing about other
    keys) closed to them. ``allOf`` branches are left open: closing each would make their
    intersection refuse the other branches' keys."""
    if not isinstance(schema, dict) or "allOf" in schema:
        return schema
    out = dict(schema)
    if isinstance(out.get("properties"), dict) and not any(k in out for k in _OPEN_KEYS):
        out["additionalProperties"] = False
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: _closed(sub) for name, sub in out[key].items()}
    for key in _SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_closed(sub) for sub in out[key]]
    for key in ("items", "additionalItems"):  # never under `not`: it would flip the meaning
        if isinstance(out.get(key), dict):
            out[key] = _closed(out[key])
    return out


def _build(schema: Any) -> st.SearchStrategy[Any]:
    # utf-8 and no NUL: drawn text must survive a YAML regression file and an HTTP body
    return from_schema(_closed(schema), codec="utf-8", allow_x00=False)


def _key(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True, default=repr)


@lru_cache(maxsize=512)
def _valid(key: str) -> st.SearchStrategy[Any]:
    return _build(json.loads(key))


def _defects(schema: dict[str, Any]) -> list[tuple[str, st.SearchStrategy[Any]]]:
    """``(name, strategy)`` per defect the schema allows, plainest first: each draws an
    object with that one defect and no undeclared key besides (empty strategies, for a
    schema that cannot have the defect, are left out)."""
    given = schema.get("properties")
    props: dict[str, Any] = given if isinstance(given, dict) else {}
    required = [k for k in schema.get("required") or () if isinstance(k, str)]
    out: list[tuple[str, st.SearchStrategy[Any]]] = []
    for key in required:  # a required key left out (its schema `false`: it must be absent)
        rest = [k for k in required if k != key]
        out.append((f"missing {key}", _build({**schema, "properties": {**props, key: False},
                                                 "required": rest})))  # fmt: skip
    for key, sub in sorted(props.items()):  # one property breaks its own schema
        demand = sorted({*required, key})
        broken = {**schema, "properties": {**props, key: {"not": sub}}, "required": demand}
        out.append((f"bad {key}", _build(broken)))
    if schema.get("additionalProperties") is False:  # a key the tool does not take
        extra = next(n for n in ("extra", "extra_1", "extra_2", "_extra") if n not in props)
        out.append((f"extra {extra}", _valid(_key(schema)).map(lambda d: {**d, extra: 1})))
    return [(name, s) for name, s in out if not s.is_empty]


@lru_cache(maxsize=512)
def _invalid(key: str) -> st.SearchStrategy[Any]:
    schema = json.loads(key)
    defects = [s for _, s in _defects(schema)]
    raw = st.sampled_from(RAW_ARGUMENTS)

    @st.composite
    def invalid_arguments(draw: st.DrawFn) -> Any:
        if not defects or draw(st.integers(0, 3)) == 0:
            return draw(raw)
        candidate = draw(st.sampled_from(defects).flatmap(lambda s: s))
        try:
            validate_tool_arguments("tool", schema, candidate)
        except ArgumentsError:
            return candidate
        return draw(raw)  # the lenient validator takes it after all: not a defect

    return invalid_arguments()


def valid_arguments(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Instances of ``schema`` (closed objects, see the module docstring)."""
    return _valid(_key(schema))


def invalid_arguments(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Arguments the tool layer rejects: an object with one defect, or non-JSON text."""
    return _invalid(_key(schema))


def arguments(schema: Mapping[str, Any], valid: bool | None) -> st.SearchStrategy[Any]:
    """Valid (``True``), invalid (``False``) or either (``None``: mostly valid ones) arguments
    for ``schema``; nothing is checked here (the public strategies check their input)."""
    if valid is True:
        return valid_arguments(schema)
    if valid is False:
        return invalid_arguments(schema)
    return st.one_of(valid_arguments(schema), valid_arguments(schema), invalid_arguments(schema))
