"""``expect.model_calls`` as a range, ``{min: N, max: M}``: checked by ``openprogram-sim
run`` (passing and failing, with the file and line), judged under ``eval`` where a number
is not applicable; the schema (pydantic and JSON Schema) accepting and refusing it."""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest
import yaml
from _support import run_cli

from openprogram_sim.errors import ScenarioError
from openprogram_sim.eval import EvalOptions, evaluate
from openprogram_sim.play import serve_scenario
from openprogram_sim.scenario import json_schema, load_scenario

TWO_CALLS = """\
scenario: one lookup, then the answer (two model calls)
tools:
  lookup_order:
    parameters: {{type: object, properties: {{order_id: {{type: string}}}}, required: [order_id]}}
    returns: "order 42: shipped"
exec: {{content: "Where is order 42?", tools: [lookup_order]}}
model:
  - tool_calls: [{{lookup_order: {{order_id: "42"}}}}]
  - text: "Order 42 has shipped."
expect:
  model_calls: {calls}
"""


def scenario(tmp_path: Path, name: str, calls: str) -> str:
    (tmp_path / name).write_text(TWO_CALLS.format(calls=calls))
    return name


@pytest.mark.parametrize("calls", ["{min: 1, max: 4}", "{min: 2}", "{max: 2}", "{min: 2, max: 2}"])
def test_a_range_that_holds_passes_under_run(tmp_path: Path, calls: str) -> None:
    done = run_cli("run", scenario(tmp_path, "s.yaml", calls), cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    assert done.stdout.startswith("PASS  s.yaml")


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        ("{min: 3}", "at least 3"),
        ("{max: 1}", "at most 1"),
        ("{min: 3, max: 5}", "between 3 and 5"),
        ("3", None),
    ],
)
def test_a_range_that_does_not_hold_fails_under_run_naming_the_line(
    tmp_path: Path, calls: str, expected: str | None
) -> None:
    done = run_cli("run", scenario(tmp_path, "s.yaml", calls), cwd=tmp_path)
    assert done.returncode == 1
    title = (
        f"the model was called 2 times, expected {expected}"
        if expected
        else "the model was called 2 times, expected 3"
    )
    assert f"- {title}\n  at s.yaml:11\n" in done.stdout, done.stdout


def test_under_eval_a_range_is_judged_and_a_number_is_not_applicable(tmp_path: Path) -> None:
    holds = tmp_path / "holds.yaml"
    events = "  events: [{tool_execution_end: {tool_name: lookup_order}}]\n"
    holds.write_text(TWO_CALLS.format(calls="{min: 1, max: 3}") + events)
    breaks = tmp_path / "breaks.yaml"
    breaks.write_text(TWO_CALLS.format(calls="{max: 1}"))
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text(TWO_CALLS.format(calls="5"))  # a number pins a script: not applicable
    key = "sk-" + "placeholder-range-" + "0123456789abcdefghij"
    results = {}
    with mock.patch.dict(os.environ, {"CI": "", "OPENAI_API_KEY": key}):
        for path in (holds, breaks, pinned):
            with serve_scenario(path) as server:
                options = EvalOptions(
                    model="openai:gpt-4o-mini",
                    base_url=server.url + "/s/{sample}/v1",
                    samples=2,
                    out=tmp_path / "eval",
                )
                results[path.stem] = evaluate(load_scenario(path), options)
    assert [s.checks for s in results["holds"].samples] == [{"model_calls": True}] * 2
    assert results["holds"].not_applicable == ["events"]  # the range is judged, not listed
    assert [s.checks for s in results["breaks"].samples] == [{"model_calls": False}] * 2
    assert results["breaks"].samples[0].failures == [
        f"the model was called 2 times, expected at most 1\nat {breaks}:11"
    ]
    assert results["pinned"].not_applicable == ["model_calls"]
    assert [s.checks for s in results["pinned"].samples] == [{"exec": True}] * 2


@pytest.mark.parametrize(
    ("calls", "problem"),
    [
        ("{min: 3, max: 1}", "(expect.model_calls) min: 3 is above max: 1; the range is empty"),
        ("{mn: 3}", "(expect.model_calls.mn) unknown key 'mn'; did you mean 'min'?"),
        ("{}", "(expect.model_calls) a range gives min:, max: or both, e.g. {min: 1, max: 4}"),
        ("{min: -1}", "(expect.model_calls.min) Input should be greater than or equal to 0"),
        ("two", "(expect.model_calls) Input should be a valid integer"),
    ],
)
def test_a_bad_range_is_refused_naming_the_file_and_line(
    tmp_path: Path, calls: str, problem: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(TWO_CALLS.format(calls=calls))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert f"{path}:11: {problem}" in str(caught.value), str(caught.value)


def test_the_json_schema_takes_a_number_or_a_range() -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(json_schema())

    def problems(calls: object) -> list[str]:
        doc = yaml.safe_load(TWO_CALLS.format(calls="2"))
        doc["expect"]["model_calls"] = calls
        return [e.message for e in validator.iter_errors(doc)]

    for good in (2, {"min": 1, "max": 4}, {"min": 1}, {"max": 4}):
        assert problems(good) == [], good
    for bad in ("two", {}, {"mn": 1}, {"min": -1}, {"min": 1.5}):
        assert problems(bad) != [], bad
