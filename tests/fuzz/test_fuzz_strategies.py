"""The public strategies: their names, their argument checks, and that what they draw is
what they say (valid scenarios that survive YAML, arguments the validator accepts or
rejects, the turn kinds asked for)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from openprogram.tools._validation import ArgumentsError, compile_validator
from openprogram_sim.fuzz import _generate as _strategies
from openprogram_sim.fuzz import strategies
from openprogram_sim.scenario import Scenario, parse_scenario

FAST = settings(max_examples=60, derandomize=True, deadline=None, database=None)


PUBLIC = json.loads((Path(__file__).parent / "public_names.json").read_text())
"""The pinned ``__all__`` of each fuzz face, sorted; change it on purpose."""


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_names_are_pinned(name: str) -> None:
    assert sorted(importlib.import_module(name).__all__) == PUBLIC[name]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: strategies.toolboxes(min_tools=3, max_tools=1), "min_tools=3 is greater"),
        (lambda: strategies.toolboxes(max_tools=99), "max_tools=99 must be between 0 and 8"),
        (lambda: strategies.toolboxes(behaviours=["returns", "sing"]), "'sing'"),
        (lambda: strategies.toolboxes(behaviours=[]), "behaviours is empty"),
        (lambda: strategies.model_turns(kinds="text"), "must be a collection"),
        (lambda: strategies.model_turns(max_calls=0), "max_calls=0 must be between 1 and 16"),
        (lambda: strategies.model_turns({}, unknown=False), "tools is empty and unknown=False"),
        (lambda: strategies.tool_calls({"name": {}}), "other than 'name'"),
        (
            lambda: strategies.exec_args(max_iterations=["3"]),
            "each value is an int, None or a non-empty range",
        ),
        (lambda: strategies.scenario_dicts(kinds=["text", "hang"]), "cannot abort"),
        (lambda: strategies.scenarios(min_turns=5, max_turns=2), "min_turns=5 is greater"),
        (lambda: strategies.steering(max_points=True), "must be an int"),
        (lambda: strategies.tool_arguments({"type": "string"}), "of type object"),
    ],
)
def test_bad_arguments_fail_when_the_strategy_is_built(build: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()


@FAST
@given(strategies.scenario_dicts())
def test_a_generated_case_is_a_scenario_file(data: dict[str, Any]) -> None:
    scenario = Scenario.model_validate(data)
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    loaded = parse_scenario(text, "generated.yaml")  # the loader's semantic checks too
    dump = {"exclude": {"path"}, "warnings": False}
    assert loaded.model_dump(**dump) == scenario.model_dump(**dump)
    assert not any(t.fault == "hang" for t in scenario.model)  # type: ignore[union-attr]


@FAST
@given(st.data())
def test_arguments_are_valid_or_invalid_as_asked(data: st.DataObject) -> None:
    schema = data.draw(st.sampled_from(_strategies.SCHEMAS))
    validator = compile_validator(schema)
    validator.validate("t", data.draw(strategies.tool_arguments(schema)))
    bad = data.draw(strategies.tool_arguments(schema, valid=False))
    if isinstance(bad, str):
        return  # text that is not a JSON object: the loop never gets as far as validating
    with pytest.raises(ArgumentsError):
        validator.validate("t", bad)


@FAST
@given(strategies.model_turns({"s": {"parameters": _strategies.SCHEMAS[1]}}, kinds=["hang"]))
def test_model_turns_draw_the_kinds_asked_for(turn: dict[str, Any]) -> None:
    assert turn["fault"] == "hang"


@FAST
@given(strategies.scenarios(max_turns=3, max_iterations=[0, -1], menus=["empty"]))
def test_scenario_options_reach_the_scenario(scenario: Scenario) -> None:
    assert scenario.exec.max_iterations in (0, -1)
    assert scenario.exec.tools == []
