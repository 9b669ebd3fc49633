"""A conversation file under pytest: one item, each exec's failures titled by the exec."""

from __future__ import annotations

import pytest

TALK = """\
scenario: two user turns
conversation:
  - exec: {content: "Hi", tools: []}
    expect: {result: "Hello."}
  - exec: {content: "And you?", tools: []}
    expect: {result: "Fine."}
model:
  - text: "Hello."
  - text: "Tired."
"""


def test_a_conversation_is_one_item_whose_failure_names_the_exec(pytester: pytest.Pytester) -> None:
    (pytester.path / "scenarios").mkdir()
    (pytester.path / "scenarios" / "talk.yaml").write_text(TALK)
    result = pytester.runpytest_inprocess("--openprogram-scenarios", "scenarios")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "scenario failed: two user turns",
            "  exec returned: 'Tired.'",
            "- exec 2: exec returned something else",
            "  at scenarios/talk.yaml:6",
            '    expected: "Fine."',
            '    actual:   "Tired."',
        ]
    )
