"""Every malformed scenario file gets an error naming the file, the line and the fix."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from openprogram_sim.errors import ScenarioError
from openprogram_sim.scenario import json_schema, load_scenario, parse_scenario

GOOD = """\
scenario: search once
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}}
    returns: "3 results"
exec:
  content: "Find it."
  tools: [search]
model:
  - tool_calls: [{search: {q: a}}]
  - text: "Found."
expect:
  result: "Found."
  events:
    - tool_execution_end: {tool_name: search, is_error: false}
"""


def errors_of(text: str, name: str = "case.yaml") -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(textwrap.dedent(text), name)
    return [str(i) for i in info.value.issues]


def test_the_good_file_loads() -> None:
    scenario = parse_scenario(GOOD, "good.yaml")
    assert scenario.scenario == "search once"
    assert scenario.exec.tools == ["search"]
    assert scenario.path == "good.yaml"


def test_unknown_key_names_the_line_and_the_closest_valid_key() -> None:
    text = GOOD.replace("  tools: [search]", "  tools: [search]\n  max_iteration: 3")
    assert errors_of(text) == [
        "case.yaml:9: (exec.max_iteration) unknown key 'max_iteration'; did you mean "
        "'max_iterations'?"
    ]


def test_unknown_top_level_key_without_a_close_match_lists_the_keys() -> None:
    errors = errors_of(GOOD + "zzz: 1\n")
    assert len(errors) == 1
    assert errors[0].startswith("case.yaml:16: (zzz) unknown key 'zzz'; allowed keys: scenario, ")


def test_wrong_type_names_the_value() -> None:
    text = GOOD.replace('content: "Find it."', 'content: "Find it."\n  max_iterations: lots')
    assert errors_of(text) == [
        "case.yaml:8: (exec.max_iterations) Input should be a valid integer, unable to parse "
        'string as an integer (got "lots")'
    ]


def test_a_bad_enum_value_lists_the_choices() -> None:
    text = GOOD.replace('  - text: "Found."', '  - text: "Found."\n    stop_reason: done')
    assert errors_of(text) == [
        "case.yaml:12: (model[1].stop_reason) Input should be 'stop', 'length', 'toolUse', "
        "'error' or 'aborted' (got \"done\")"
    ]


def test_a_tool_named_in_exec_tools_must_be_defined() -> None:
    text = GOOD.replace("tools: [search]", "tools: [search, serch, fetch]")
    assert errors_of(text) == [
        "case.yaml:8: (exec.tools[1]) exec.tools names tool 'serch', which is not defined; "
        "did you mean 'search'?",
        "case.yaml:8: (exec.tools[2]) exec.tools names tool 'fetch', which is not defined; "
        "define it under `tools:`",
    ]


def test_a_model_turn_may_call_an_undefined_tool() -> None:
    """That is how the unknown-tool path is tested: not a loading error."""
    scenario = parse_scenario(GOOD.replace("{search: {q: a}}", "{nosuch: {}}"))
    assert scenario.model[0].tool_calls == [{"nosuch": {}}]  # type: ignore[index]


def test_a_bad_regex_is_reported_at_load_time() -> None:
    text = GOOD.replace("is_error: false}", 'is_error: false, result: {$regex: "3 (results"}}')
    assert errors_of(text) == [
        "case.yaml:15: (expect.events[0].tool_execution_end.result) bad regex '3 (results': "
        "missing ) at position 10; escape special characters such as "
        "( [ . with \\"
    ]


def test_unknown_event_type_and_field_suggest_the_right_names() -> None:
    text = GOOD.replace(
        "    - tool_execution_end: {tool_name: search, is_error: false}",
        "    - tool_execution_ended: {}\n    - tool_execution_end: {tool: search}",
    )
    assert errors_of(text) == [
        "case.yaml:15: (expect.events[0].tool_execution_ended) unknown event "
        "'tool_execution_ended'; did you mean 'tool_execution_end'?",
        "case.yaml:16: (expect.events[1].tool_execution_end.tool) tool_execution_end has no "
        "field 'tool'; did you mean 'tool_name'?",
    ]


def test_unknown_matcher_operator() -> None:
    text = GOOD.replace('result: "Found."', 'result: {$regexp: "Fo+"}')
    assert errors_of(text) == [
        "case.yaml:13: (expect.result) unknown matcher '$regexp'; use one of $regex, $contains, "
        "$subset, $in, $json, $any"
    ]


def test_missing_required_keys() -> None:
    assert errors_of("scenario: x\nmodel: []\n") == [
        "case.yaml:1: give exec: (the Runtime.exec call), call: (your entry point) or "
        "conversation: (several execs on one history)"
    ]


def test_a_tool_with_two_behaviours_and_a_steering_point_missing() -> None:
    text = GOOD.replace('returns: "3 results"', 'returns: "3 results"\n    raises: boom')
    text += "steering:\n  - text: hi\n"
    assert errors_of(text) == [
        "case.yaml:3: (tools.search) a tool has one behaviour; it gives returns and raises: "
        "keep one (outcomes: [{returns: ...}, {raises: ...}] mixes both, call by call)",
        "case.yaml:18: (steering[0]) give exactly one of after_tool or after_round",
    ]


def test_malformed_tool_call_in_a_turn() -> None:
    text = GOOD.replace("{search: {q: a}}", "{search: {q: a}, other: {}}")
    errors = errors_of(text)
    assert len(errors) == 1
    assert errors[0].startswith("case.yaml:10: (model[0]) tool call {")
    assert "must be {tool_name: arguments} (one key)" in errors[0]


def test_yaml_syntax_errors_and_non_mappings() -> None:
    assert errors_of("scenario: [unclosed\n") == [
        "case.yaml:2: not valid YAML: did not find expected ',' or ']'"  # libyaml's words
    ]
    assert errors_of("- just\n- a list\n") == [
        "case.yaml:1: a scenario file is a mapping with `scenario:`, `exec:`, `model:` and "
        "`expect:` keys"
    ]


def test_several_mistakes_are_reported_together_in_line_order(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text(GOOD.replace("tools: [search]", "tools: [serch]").replace("result:", "reslt:"))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    lines = [i.line for i in info.value.issues]
    assert (lines == sorted(lines) and len(lines) == 1) or len(lines) == 2
    assert str(info.value).startswith(f"invalid scenario ({len(lines)} problem")
    assert all(str(path) in str(i) for i in info.value.issues)


def test_missing_file() -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario("/nonexistent/x.yaml")


def test_json_schema_covers_every_key() -> None:
    schema = json_schema()
    json.dumps(schema)
    assert set(schema["properties"]) == {
        "scenario", "description", "tags", "system_prompt", "registry", "env", "tools", "history",
        "toolsets", "exec", "call", "args", "model", "steering", "follow_ups", "abort",
        "timeout", "setup", "teardown", "fixtures", "expect", "conversation", "seed", "wire",
    }  # fmt: skip
    assert schema["properties"]["model"]["oneOf"] == [
        {"type": "array", "items": {"$ref": "#/$defs/ModelTurn"}},
        {"$ref": "#/$defs/CassetteModel"},
    ]
    cassette = schema["$defs"]["CassetteModel"]
    assert cassette["required"] == ["cassette"]
    assert {"cassette", "model", "ignore", "faults", "timing"} == set(cassette["properties"])
    assert schema["required"] == ["scenario", "model"]
    assert schema["oneOf"] == [
        {"required": ["exec"]},
        {"required": ["call"]},
        {"required": ["conversation"]},
    ]
    defs = schema["$defs"]
    assert {"returns", "raises", "exec", "defer"} <= set(defs["ToolDef"]["properties"])
    assert {"events", "events_mode", "not_events", "counts", "requests", "raises"} <= set(
        defs["Expect"]["properties"]
    )
    assert defs["ExecArgs"]["additionalProperties"] is False


ROOT = Path(__file__).resolve().parents[2]


def test_the_published_schema_file_is_the_current_schema() -> None:
    published = json.loads((ROOT / "schema" / "scenario.schema.json").read_text())
    assert published == json.loads(json.dumps(json_schema())), (
        "regenerate it: openprogram-sim schema -o schema/scenario.schema.json"
    )


def test_the_schema_names_every_event_and_types_its_fields() -> None:
    import jsonschema
    import yaml

    validator = jsonschema.Draft202012Validator(json_schema())
    library = sorted((ROOT / "scenarios").rglob("*.yaml"))
    assert len(library) >= 60
    for path in library:
        assert list(validator.iter_errors(yaml.safe_load(path.read_text()))) == [], path
        assert path.read_text().startswith("# yaml-language-server: $schema="), path

    def problems(event: dict[str, object]) -> list[str]:
        doc = yaml.safe_load(GOOD)
        doc["expect"]["events"] = [event]
        return [e.message for e in validator.iter_errors(doc)]

    assert problems({"tool_execution_end": {"is_error": {"$regex": "t"}}}) == []
    assert problems({"tool_execution_end": {"is_error": "maybe"}}) != []
    assert problems({"tool_execution_end": {"tool_nmae": "x"}}) != []
    assert problems({"tool_execution_ends": {}}) != []
    assert problems({"agent_end": {"reason": "done"}}) != []


def test_field_values_of_the_wrong_type_are_caught_at_load() -> None:
    text = GOOD.replace("{tool_name: search, is_error: false}", "{tool_name: 3, is_error: maybe}")
    assert errors_of(text) == [
        "case.yaml:15: (expect.events[0].tool_execution_end.tool_name) tool_name is a string; "
        "got 3",
        "case.yaml:15: (expect.events[0].tool_execution_end.is_error) is_error is a boolean; "
        "got 'maybe'",
    ]


def test_every_mistake_of_a_file_is_reported_at_once() -> None:
    text = (
        GOOD.replace("tools: [search]", "tools: [serch]")
        .replace('content: "Find it."', "content: [not, text]")
        .replace("tool_execution_end:", "tool_execution_ends:")
    )
    assert errors_of(text) == [
        'case.yaml:7: (exec.content) Input should be a valid string (got ["not", "text"])',
        "case.yaml:8: (exec.tools[0]) exec.tools names tool 'serch', which is not defined; "
        "did you mean 'search'?",
        "case.yaml:15: (expect.events[0].tool_execution_ends) unknown event "
        "'tool_execution_ends'; did you mean 'tool_execution_end'?",
    ]


def test_a_cassette_model_loads_and_its_mistakes_name_their_lines() -> None:
    block = '  - tool_calls: [{search: {q: a}}]\n  - text: "Found."'
    text = GOOD.replace(block, "  cassette: rec.yaml\n  model: anthropic:claude-sonnet-4-5")
    scenario = parse_scenario(text, "case.yaml")
    assert scenario.model.cassette == "rec.yaml"
    assert scenario.model.model == "anthropic:claude-sonnet-4-5"
    bad = GOOD.replace(block, "  cassette: rec.yaml\n  faults: [{turn: 1}]\n  timming: recorded")
    assert errors_of(bad) == [
        "case.yaml:11: (model.faults[0]) give exactly one of cut_after: N or status: CODE",
        "case.yaml:12: (model.timming) unknown key 'timming'; did you mean 'timing'?",
    ]


def test_a_scenario_dumps_and_loads_back_without_warnings() -> None:
    text = GOOD.replace(
        "  tools: [search]", "  tools: [search]\n  tool_choice: {type: function, name: search}"
    )
    scenario = parse_scenario(text, "")
    data = scenario.model_dump()  # warnings are errors in this suite
    assert data["exec"]["tool_choice"] == {"type": "function", "name": "search"}
    assert type(scenario).model_validate(data) == scenario


def test_turns_are_the_scripts_turns_seeded_and_a_cassette_is_refused() -> None:
    scenario = parse_scenario(
        textwrap.dedent(
            """
            scenario: seeded turns
            exec: {content: go}
            seed: 7
            model:
              - one_of:
                  - {weight: 1, text: a}
                  - {weight: 1, text: b}
              - text: done
                wire: {status: 429}
            """
        )
    )
    turns = scenario.turns()
    assert turns == [turn for turn, _ in scenario.script()]
    assert [t.seed for t in turns] == [7, None]
    assert [fault.status for _, fault in scenario.script()] == [None, 429]
    cassette = parse_scenario(
        "scenario: replayed\nexec: {content: go}\nmodel: {cassette: run.cassette.yaml}\n"
    )
    with pytest.raises(TypeError, match="model: names a cassette, not a list of turns"):
        cassette.turns()
