"""The JSON Schema of scenario files, for editors (``openprogram-sim schema``, the published
``schema/scenario.schema.json``): the pydantic models' schema, with every event name and its
fields typed, matchers described, and ``exec``/``call``/``conversation`` as the top levels."""

from __future__ import annotations

from typing import Any

from openprogram_sim.scenario._schema import JudgeCriterion, Scenario
from openprogram_sim.trace import EVENT_FIELDS, field_schema, rules_json_schema

__all__ = ["json_schema"]


_MATCHER = {
    "type": "object",
    "description": "A matcher: {$regex: ...}, {$contains: ...}, {$subset: {...}}, {$in: [...]},"
    " {$json: true|false} or {$any: true}.",
    "minProperties": 1,
    "maxProperties": 1,
    "additionalProperties": False,
    "properties": {
        "$regex": {"type": "string"},
        "$contains": {},
        "$subset": {"type": "object"},
        "$in": {"type": "array"},
        "$json": {"type": "boolean"},
        "$any": {"const": True},
    },
}


def _expected_event() -> dict[str, Any]:
    events = {
        name: {
            "type": "object",
            "additionalProperties": False,
            "properties": {field: field_schema(field) for field in fields},
        }
        for name, fields in EVENT_FIELDS.items()
    }
    return {
        "type": "object",
        "description": "One expected event: {event_type: {field: value or matcher}}.",
        "minProperties": 1,
        "maxProperties": 1,
        "additionalProperties": False,
        "properties": events,
    }


def _fill_placeholders(node: Any) -> None:
    """Point the placeholders pydantic emitted (it cannot reference a definition of ours)
    at the definitions added above."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, dict) and set(value) == {"x-placeholder"}:
                node[key] = {"$ref": f"#/$defs/{value['x-placeholder']}"}
            else:
                _fill_placeholders(value)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            if isinstance(item, dict) and set(item) == {"x-placeholder"}:
                node[i] = {"$ref": f"#/$defs/{item['x-placeholder']}"}
            else:
                _fill_placeholders(item)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of scenario files, for editors: every key, every event name and its
    fields with their types; ``model`` as a list of turns or a cassette."""
    schema = Scenario.model_json_schema()
    schema["properties"].pop("path", None)
    defs = schema["$defs"]
    schema["properties"]["model"] = {
        "oneOf": [
            {"type": "array", "items": {"$ref": "#/$defs/ModelTurn"}},
            {"$ref": "#/$defs/CassetteModel"},
        ],
        "description": "One turn per model call, in call order across nesting levels; or "
        "{cassette: FILE, model: PROVIDER:MODEL}, a recorded session replayed through the "
        "real adapter.",
    }
    # one top level
    schema["oneOf"] = [{"required": [k]} for k in ("exec", "call", "conversation")]
    choice = defs["ModelChoice"]["properties"]
    for key in ("one_of", "wire"):  # an option holds neither (its validator refuses them)
        choice.pop(key, None)
    defs["Matcher"] = _MATCHER
    defs["JudgeCriterion"] = JudgeCriterion.model_json_schema()  # criteria: text or this
    defs["ExpectedEvent"] = _expected_event()
    defs.update(rules_json_schema())  # PropertyRule: each rule, described with an example
    _fill_placeholders(schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "openprogram scenario"
    return schema
