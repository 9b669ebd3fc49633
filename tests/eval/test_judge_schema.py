"""``expect.judge`` in the scenario schema: what the loader accepts and what it refuses,
each mistake with the file, the line and the fix; the JSON Schema editors use agrees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from openprogram_sim.errors import ScenarioError
from openprogram_sim.scenario import JudgeCriterion, json_schema, load_scenario

GOOD = """\
scenario: a judged answer
exec: {content: "Where is order 42?"}
model: [{text: "It has shipped."}]
expect:
  judge:
    model: openai:gpt-4o-mini
    criteria:
      - "The answer says where the order is."
      - {name: polite, text: "The answer is polite.", min_score: 4}
"""


def test_a_judge_loads_with_its_criteria_named(tmp_path: Path) -> None:
    scenario = load_scenario_text(GOOD, tmp_path)
    spec = scenario.expect.judge
    assert spec is not None
    assert spec.criteria == [
        JudgeCriterion(name="c1", text="The answer says where the order is."),
        JudgeCriterion(name="polite", text="The answer is polite.", min_score=4),
    ]
    assert (spec.model, spec.rubric, spec.base_url) == ("openai:gpt-4o-mini", "", None)
    assert [c.passes("pass", 1) for c in spec.criteria] == [True, False]
    assert [c.passes("fail", 4) for c in spec.criteria] == [False, True]


def load_scenario_text(text: str, folder: Path) -> Any:
    path = folder / "judged.yaml"
    path.write_text(text)
    return load_scenario(path)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8400/s/{sample}-judge/v1",
        "http://localhost:8080/v1",
        "https://[::1]:9000/v1",
    ],
)
def test_a_judge_on_this_machine_is_accepted(tmp_path: Path, url: str) -> None:
    text = GOOD.replace("    criteria:", f'    base_url: "{url}"\n    criteria:')
    spec = load_scenario_text(text, tmp_path).expect.judge
    assert spec.base_url == url


BAD = [
    (
        "    model: gpt-4o-mini\n",
        "6: (expect.judge.model) 'gpt-4o-mini' is not PROVIDER:MODEL (e.g. openai:gpt-4o-mini)",
    ),
    (
        "    model: openai:gpt-4o-mini\n    base_url: https://judge.example.com/v1\n",
        "7: (expect.judge.base_url) 'https://judge.example.com/v1' is not on this machine: a "
        "scenario file may point the judge only at a loopback address (127.0.0.1, localhost, "
        "::1), since the judge's key goes wherever it points; for another host set the "
        "adapter's variable (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL)",
    ),
    (
        "    model: openai:gpt-4o-mini\n    base_url: ftp://127.0.0.1/v1\n",
        "7: (expect.judge.base_url) 'ftp://127.0.0.1/v1' is not an http(s) URL",
    ),
    (
        "    model: openai:gpt-4o-mini\n    rubrik: be strict\n",
        "7: (expect.judge.rubrik) unknown key 'rubrik'; did you mean 'rubric'?",
    ),
]


@pytest.mark.parametrize(("head", "problem"), BAD, ids=["model", "remote", "scheme", "key"])
def test_a_bad_judge_is_refused_naming_the_file_and_line(
    tmp_path: Path, head: str, problem: str
) -> None:
    text = GOOD.replace("    model: openai:gpt-4o-mini\n", head)
    with pytest.raises(ScenarioError) as caught:
        load_scenario_text(text, tmp_path)
    assert f"{tmp_path / 'judged.yaml'}:{problem}" in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    ("criteria", "problem"),
    [
        ("[]", "7: (expect.judge.criteria) List should have at least 1 item"),
        (
            "[{name: a, text: x}, {name: a, text: y}]",
            "7: (expect.judge.criteria[1].name) criterion name 'a' is given twice; names are "
            "unique (a criterion given as text is named by its place: c1, c2...)",
        ),
        (
            "[{name: 'two words', text: x}]",
            "7: (expect.judge.criteria[0].name) criterion name 'two words' is not a name: up to "
            "64 letters, digits, _ . or -, starting with a letter or digit",
        ),
        (
            "[{name: a, text: x, min_score: 6}]",
            "7: (expect.judge.criteria[0].min_score) Input should be less than or equal to 5",
        ),
        (
            "[{name: a, txt: x}]",
            "7: (expect.judge.criteria[0].txt) unknown key 'txt'; did you mean 'text'?",
        ),
        ("['']", "7: (expect.judge.criteria[0]) String should have at least 1 character"),
    ],
    ids=["none", "twice", "name", "score", "key", "empty"],
)
def test_bad_criteria_are_refused_naming_the_file_and_line(
    tmp_path: Path, criteria: str, problem: str
) -> None:
    head, _, _ = GOOD.partition("    criteria:")
    with pytest.raises(ScenarioError) as caught:
        load_scenario_text(f"{head}    criteria: {criteria}\n", tmp_path)
    assert f"{tmp_path / 'judged.yaml'}:{problem}" in str(caught.value), str(caught.value)


def test_a_conversation_step_cannot_hold_a_judge(tmp_path: Path) -> None:
    text = """\
scenario: two execs
conversation:
  - exec: {content: "Hi"}
    expect:
      judge: {model: openai:gpt-4o-mini, criteria: ["It greets."]}
model: [{text: "Hello."}]
"""
    with pytest.raises(ScenarioError) as caught:
        load_scenario_text(text, tmp_path)
    assert (
        f"{tmp_path / 'judged.yaml'}:4: (conversation[0].expect) judge: belongs to the "
        "top-level expect: (it reads the whole conversation's final text and tool calls), "
        "not to a step's"
    ) in str(caught.value)


def test_the_json_schema_takes_a_judge_and_refuses_a_bad_one() -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(json_schema())

    def problems(**changes: Any) -> list[str]:
        doc = yaml.safe_load(GOOD)
        doc["expect"]["judge"].update(changes)
        return [e.message for e in validator.iter_errors(doc)]

    assert problems() == []
    assert problems(base_url="http://127.0.0.1:8400/s/{sample}-judge/v1", rubric="Strict.") == []
    for bad in (
        {"model": "gpt-4o-mini"},
        {"base_url": "https://judge.example.com/v1"},
        {"criteria": []},
        {"criteria": [{"name": "a"}]},
        {"criteria": [{"name": "a", "text": "x", "min_score": 0}]},
        {"criteria": [{"name": "two words", "text": "x"}]},
        {"rubrik": "x"},
    ):
        assert problems(**bad) != [], bad
