"""Our JSON-Schema strategies (``openprogram_sim.fuzz._schemas``), held by a property test:
for schemas drawn from the supported subset, every valid argument drawn is an instance of its
schema for ``jsonschema`` (formats checked) and is accepted by the tool layer, and every
invalid one is rejected by the tool layer's rule (``validate_tool_arguments``). Keywords
outside the subset are refused with the keyword and the place, and ``fuzz --registry`` says
which tool it leaves out and goes on with the others."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from openprogram.tools import ArgumentsError, validate_tool_arguments
from openprogram_sim.fuzz import ToolTarget, strategies
from openprogram_sim.fuzz._schemas import FORMATS, UnsupportedSchema, check_schema

# --------------------------------------------------------------------------- schemas

_NAMES = st.sampled_from(["a", "b", "city", "n", "limit", "q"])


def _bounds(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind}
    number = st.integers(-20, 20) if kind == "integer" else st.sampled_from([-2.5, 0, 1.5, 7])
    low, high = draw(number), draw(number)
    low, high = min(low, high), max(low, high) + 2
    if draw(st.booleans()):
        out["exclusiveMinimum" if draw(st.booleans()) else "minimum"] = low
    if draw(st.booleans()):
        out["exclusiveMaximum" if draw(st.booleans()) else "maximum"] = high
    if kind == "integer" and draw(st.booleans()):
        out["multipleOf"] = draw(st.sampled_from([1, 2, 3, 5]))
        out.pop("exclusiveMaximum", None), out.pop("maximum", None)
    if kind == "number" and draw(st.integers(0, 4)) == 0:
        out["multipleOf"] = draw(st.sampled_from([0.5, 0.25, 0.1]))
    return out


def _string(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string"}
    how = draw(st.sampled_from(["plain", "pattern", "format", "enum"]))
    if how == "pattern":
        out["pattern"] = draw(st.sampled_from(
            ["^[a-z]{2,5}$", "^[A-Z0-9_]+$", "^\\d{3}-\\d{4}$", "^(yes|no)$", "^[^@]+@x\\.io$"]
        ))  # fmt: skip
    elif how == "format":
        out["format"] = draw(st.sampled_from(sorted(FORMATS)))
    elif how == "enum":
        out["enum"] = draw(st.lists(st.sampled_from(["c", "f", "k", "", "é"]), min_size=1,
                                    max_size=3, unique=True))  # fmt: skip
    if how in ("plain", "pattern") and draw(st.booleans()):
        low = draw(st.integers(0, 3))
        out["minLength"] = low
        if draw(st.booleans()):
            out["maxLength"] = low + draw(st.integers(0, 6))
    if draw(st.integers(0, 3)) == 0:
        out["default"] = draw(st.sampled_from(["", "abc", "2026-01-01"]))
    return out


def _leaf(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["integer", "number", "string", "boolean", "null", "const"]))
    if kind in ("integer", "number"):
        out = _bounds(draw, kind)
    elif kind == "string":
        out = _string(draw)
    elif kind == "const":
        out = {"const": draw(st.sampled_from([0, "x", None, True]))}
    else:
        out = {"type": kind}
    if draw(st.integers(0, 5)) == 0:
        out["description"] = "A value, e.g. 3 or 'zz'."
    if draw(st.integers(0, 6)) == 0 and "type" in out:
        out = {**out, "type": [out["type"], "null"]}
    elif draw(st.integers(0, 6)) == 0:
        out["nullable"] = True
    return out


def _object(draw: st.DrawFn, children: st.SearchStrategy[Any]) -> dict[str, Any]:
    props = draw(st.dictionaries(_NAMES, children, max_size=3))
    out: dict[str, Any] = {"type": "object", "properties": props}
    if props:
        out["required"] = draw(st.lists(st.sampled_from(sorted(props)), unique=True))
    extra = draw(st.sampled_from(["absent", "false", "true", "schema"]))
    if extra != "absent":
        out["additionalProperties"] = {"false": False, "true": True,
                                       "schema": {"type": "integer"}}[extra]  # fmt: skip
    return out


def _array(draw: st.DrawFn, children: st.SearchStrategy[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "array", "items": draw(children)}
    low = draw(st.integers(0, 2))
    if draw(st.booleans()):
        out["minItems"] = low
    if draw(st.booleans()):
        out["maxItems"] = low + draw(st.integers(0, 3))
    if draw(st.integers(0, 3)) == 0:
        out["uniqueItems"] = True
        out["items"] = {"type": "integer", "minimum": 0}
    return out


def _combined(draw: st.DrawFn, children: st.SearchStrategy[Any]) -> dict[str, Any]:
    key = draw(st.sampled_from(["anyOf", "oneOf", "allOf"]))
    if key == "oneOf":  # branches of different types: each value matches exactly one
        return {"oneOf": [{"type": "string", "maxLength": 4}, {"type": "integer"},
                          {"type": "null"}][: draw(st.integers(1, 3))]}  # fmt: skip
    if key == "allOf":
        return {"allOf": [{"type": "integer", "minimum": draw(st.integers(-5, 5))},
                          {"maximum": 20}, {"description": "merged"}]}  # fmt: skip
    return {"anyOf": draw(st.lists(children, min_size=1, max_size=3))}


@st.composite
def _node(draw: st.DrawFn, depth: int) -> dict[str, Any]:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return _leaf(draw)
    children = _node(depth - 1)
    shape = draw(st.sampled_from(["object", "array", "combined", "ref"]))
    if shape == "object":
        return _object(draw, children)
    if shape == "array":
        return _array(draw, children)
    if shape == "combined":
        return _combined(draw, children)
    return {"$ref": "#/$defs/place"}


PLACE = {
    "type": "object",
    "properties": {"city": {"type": "string", "minLength": 1}, "zip": {"type": "string",
                                                                          "pattern": "^\\d{5}$"}},
    "required": ["city"],
}  # fmt: skip


@st.composite
def tool_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """A tool's parameters: an object of drawn properties, sometimes with ``$defs``."""
    root = _object(draw, _node(2))
    if draw(st.booleans()):
        root["$defs"] = {"place": PLACE}
    else:  # no $defs: no $ref may point into them
        root = _without_refs(root)
    return root


def _without_refs(node: Any) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            return {"type": "boolean"}
        return {k: _without_refs(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_without_refs(v) for v in node]
    return node


def _instance(schema: dict[str, Any], value: Any) -> bool:
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value)


def _layer_accepts(schema: dict[str, Any], value: Any) -> bool:
    try:
        validate_tool_arguments("tool", schema, value)
    except ArgumentsError:
        return False
    return True


MANY = settings(max_examples=300, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])  # fmt: skip


@MANY
@given(tool_schemas(), st.data())
def test_every_valid_draw_is_an_instance_and_every_invalid_one_is_rejected(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    valid = data.draw(strategies.tool_arguments(schema, valid=True), label="valid")
    assert _instance(schema, valid), (schema, valid)
    assert _layer_accepts(schema, valid), (schema, valid)
    invalid = data.draw(strategies.tool_arguments(schema, valid=False), label="invalid")
    assert not _layer_accepts(schema, invalid), (schema, invalid)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_each_format_draws_strings_both_validators_take(fmt: str) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}},
              "required": ["v"]}  # fmt: skip

    @settings(max_examples=150, deadline=None, database=None)
    @given(strategies.tool_arguments(schema))
    def check(arguments: dict[str, Any]) -> None:
        assert _instance(schema, arguments) and _layer_accepts(schema, arguments), arguments

    check()


def _draws(strategy: st.SearchStrategy[Any], n: int = 300) -> list[Any]:
    out: list[Any] = []

    @settings(max_examples=n, derandomize=True, deadline=None, database=None)
    @given(strategy)
    def collect(value: Any) -> None:
        out.append(value)

    collect()
    return out


@pytest.mark.parametrize(
    "bounds",
    [{"exclusiveMaximum": -0.5}, {"maximum": -3.5}, {"exclusiveMinimum": 0.5}, {"minimum": 2.5},
     {"minimum": -1.25, "maximum": 1.25}, {}],
)  # fmt: skip
def test_fractional_multiples_are_found_below_a_high_bound_as_above_a_low_one(
    bounds: dict[str, float],
) -> None:
    """A fractional ``multipleOf`` with only a high bound has its multiples below it (they
    were searched upward from the bound, found none, and the schema was refused)."""
    prop = {"type": ["number", "null"], "multipleOf": 0.5, **bounds}
    schema = {"type": "object", "properties": {"a": prop}, "required": ["a"]}
    drawn = [a["a"] for a in _draws(strategies.tool_arguments(schema), 100)]
    numbers = [v for v in drawn if v is not None]
    assert numbers, drawn
    assert all(_instance(schema, {"a": v}) for v in numbers), numbers


def test_a_pattern_that_repeats_one_class_keeps_its_length_bounds_unfiltered() -> None:
    prop = {"type": "string", "pattern": "^[a-z_]+$", "minLength": 3, "maxLength": 5}
    schema = {"type": "object", "properties": {"s": prop}, "required": ["s"]}
    drawn = [a["s"] for a in _draws(strategies.tool_arguments(schema))]
    assert all(re.fullmatch("[a-z_]{3,5}", s) for s in drawn), drawn
    assert {len(s) for s in drawn} == {3, 4, 5}


def test_default_and_examples_are_drawn_as_values() -> None:
    prop = {"type": "integer", "default": 417, "examples": [9001]}
    schema = {"type": "object", "properties": {"n": prop}, "required": ["n"]}
    drawn = {a["n"] for a in _draws(strategies.tool_arguments(schema))}
    assert {417, 9001} <= drawn


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "string", "not": {"const": "x"}}}},
            "'not' at root.properties.a is not supported",
        ),
        (
            {"type": "object", "patternProperties": {"^x": {}}},
            "'patternProperties' at root is not supported",
        ),
        (
            {"type": "object", "properties": {"d": {"type": "string", "format": "iri"}}},
            "'format' at root.properties.d is not supported (the format 'iri' is not drawn)",
        ),
        (
            {
                "type": "object",
                "properties": {"t": {"$ref": "#/$defs/tree"}},
                "$defs": {
                    "tree": {
                        "type": "object",
                        "properties": {
                            "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}}
                        },
                    }
                },
            },
            "'$ref' at root.properties.t.properties.kids.items is not supported ('#/$defs/tree' "
            "refers to itself (recursion))",
        ),
        (
            {"type": "object", "properties": {"p": {"$ref": "#/$defs/nope"}}},
            "'$ref' at root.properties.p is not supported ('#/$defs/nope' names no definition)",
        ),
        (
            {"type": "object", "properties": {"p": {"type": "string", "pattern": "(["}}},
            "'pattern' at root.properties.p is not supported (not a Python regex",
        ),
    ],
)
def test_what_is_not_supported_is_refused_naming_the_keyword_and_the_place(
    schema: dict[str, Any], message: str
) -> None:
    with pytest.raises(UnsupportedSchema) as raised:
        check_schema(schema)
    assert message in str(raised.value)
    with pytest.raises(InvalidArgument) as public:
        strategies.tool_arguments(schema)
    assert str(public.value) == f"schema: {raised.value}"


TOOLS = '''
from openprogram import ToolRegistry, function

registry = ToolRegistry()

@function(registry=registry)
def fine(n: int) -> int:
    """Fine.

    Args:
        n: A number.
    """
    return n

def exotic_execute(args):
    return "ok"

registry.register({
    "spec": {
        "name": "exotic",
        "description": "Takes a value that is not 'x'.",
        "parameters": {"type": "object", "properties": {"v": {"not": {"const": "x"}}}},
    },
    "execute": exotic_execute,
})
'''


def _write_tools(folder: Path, module: str) -> None:
    (folder / f"{module}.py").write_text(textwrap.dedent(TOOLS))


def test_a_tool_with_a_refused_schema_is_left_out_and_named(tmp_path: Path) -> None:
    _write_tools(tmp_path, "refused_tools_a")
    target = ToolTarget.load(registry="refused_tools_a:registry", pythonpath=[str(tmp_path)])
    assert target.names == ["fine"]
    [(name, why)] = target.skipped
    assert name == "exotic"
    assert why.startswith(
        "tool 'exotic' is not fuzzed: 'not' at root.properties.v is not supported; fuzzing "
        "draws from types, enum, const"
    )


@pytest.mark.slow
def test_fuzz_registry_names_the_tool_and_keyword_and_fuzzes_the_others(tmp_path: Path) -> None:
    _write_tools(tmp_path, "refused_tools_b")
    command = [sys.executable, "-m", "openprogram_sim.cli", "fuzz", "--registry",
               "refused_tools_b:registry", "--pythonpath", str(tmp_path), "--examples", "20",
               "--no-write"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "tool 'exotic' is not fuzzed: 'not' at root.properties.v is not supported" in output
    assert "over refused_tools_b:registry (fine)" in output
    assert "no invariant or tool contract broken in 20 runs" in output
