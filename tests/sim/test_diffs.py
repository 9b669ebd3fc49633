"""Diffs of nested and long values: down to the differing key or index, long values cut
around the difference on both sides, the trace around the closest actual event, and the
hints ($subset, schema defaults). The same text in the CLI, in ``assert_events`` and in the
report's record."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram_sim.play import check_outcome, run_scenario
from openprogram_sim.report import format_verdict, scenario_record
from openprogram_sim.scenario import parse_scenario
from openprogram_sim.trace import assert_events, show_pair

NOTES = """\
scenario: a note is saved
tools:
  add_note:
    description: Save a note.
    parameters:
      type: object
      properties:
        title: {type: string}
        body: {type: string}
        priority: {type: string, default: normal}
        where: {type: object, properties: {city: {type: string}, shop: {type: object}}}
      required: [title, body]
    returns: "saved"
  search:
    parameters: {type: object, properties: {q: {type: string}}}
    returns: "3 results"
exec:
  content: "Note that I must buy stamps."
model:
  - tool_calls: [{search: {q: stamps}}, {search: {q: post office}}]
  - tool_calls:
      - add_note:
          title: stamps
          body: "buy stamps at the post office"
          where: {city: Lyon, shop: {name: La Poste, street: rue de la République, hours: 9-18}}
  - text: "Saved."
"""

LONG = (
    "The weather in Paris today is sunny with a high of 21°C and a light breeze from the "
    "west, turning cloudy in the evening."
)


def failure_of(expect: str, base: str = NOTES) -> str:
    verdict = check_outcome(run_scenario(parse_scenario(base + expect, "notes.yaml")))
    assert not verdict.passed
    (failure,) = verdict.failures
    return failure.detail


def rows(detail: str) -> dict[str, list[str]]:
    """The side-by-side table: field (or path) -> its expected, actual and flag cells."""
    lines = detail.splitlines()
    head = next(
        i for i, line in enumerate(lines) if line.split() == ["field", "expected", "actual"]
    )
    header = lines[head]
    starts = [header.index("expected"), header.index("actual")]
    table: dict[str, list[str]] = {}
    for line in lines[head + 1 :]:
        if not line.startswith("  ") or line.startswith("   "):
            break
        cells = [line[: starts[0]], line[starts[0] : starts[1]], line[starts[1] :]]
        name, expected, rest = (c.strip() for c in cells)
        actual, _, flag = rest.partition("  <- ")
        table[name] = [expected, actual.strip(), flag]
    return table


def test_a_nested_dict_differing_deep_down_names_the_path_and_shows_both_values_whole() -> None:
    detail = failure_of(
        """\
expect:
  events:
    - tool_execution_start:
        tool_name: add_note
        args:
          title: stamps
          body: "buy stamps at the post office"
          where: {city: Lyon, shop: {name: La Poste, street: rue de la Paix, hours: 9-18}}
"""
    )
    table = rows(detail)
    assert table["args.where.shop.street"] == [
        '"rue de la Paix"',
        '"rue de la République"',
        "differs",
    ]
    assert set(table) == {"tool_name", "args.where.shop.street"}  # equal keys are not rows
    assert "hint:" not in detail


def test_two_long_strings_with_a_common_prefix_show_the_difference_on_both_sides() -> None:
    base = NOTES.replace('returns: "3 results"', f"returns: {json.dumps(LONG)}")
    detail = failure_of(
        f"""\
expect:
  events:
    - tool_execution_end: {{tool_name: search, result: {json.dumps(LONG.replace("21", "23"))}}}
""",
        base,
    )
    expected, actual, flag = rows(detail)["result"]
    assert "23°C" in expected and "21°C" in actual
    assert expected != actual and len(expected) <= 40 and len(actual) <= 40
    assert expected.startswith("…") and actual.startswith("…")  # the common start is cut
    assert flag == f"differs ({len(LONG)} characters expected, {len(LONG)} actual)"


def test_a_list_differing_at_one_index_names_the_index() -> None:
    detail = failure_of(
        """\
expect:
  events:
    - message_end: {role: assistant, tool_calls: [search, add_note]}
"""
    )
    assert rows(detail)["tool_calls[1]"] == ['"add_note"', '"search"', "differs"]


def test_a_not_found_shows_the_trace_around_the_event_with_the_most_matching_fields() -> None:
    # three tool_execution_end events: search (2 of 3 fields differ), search (1 differs), and
    # add_note at #18 (only args.where.city differs): that one is the closest
    detail = failure_of(
        """\
expect:
  events:
    - tool_execution_end:
        tool_name: add_note
        is_error: false
        args:
          title: stamps
          body: "buy stamps at the post office"
          where: {city: Paris, shop: {name: La Poste, street: rue de la République, hours: 9-18}}
"""
    )
    lines = detail.splitlines()
    assert lines[0] == "expected event 1 of 1 did not match: not found in the trace"
    assert lines[2] == "trace around the closest actual tool_execution_end:"
    window = [line for line in lines[3:] if re.match(r" *>? *#\d+ ", line)]
    numbers = [int(re.search(r"#(\d+)", line).group(1)) for line in window]  # type: ignore[union-attr]
    marked = next(line for line in window if line.lstrip().startswith(">"))
    assert "tool_execution_end" in marked and "add_note(" in marked
    closest = int(re.search(r"#(\d+)", marked).group(1))  # type: ignore[union-attr]
    assert numbers == list(range(closest - 3, closest + 4)) or numbers[-1] < closest + 4
    assert 0 not in numbers  # not the start of the trace
    assert f"closest actual tool_execution_end: #{closest}" in detail
    assert rows(detail)["args.where.city"] == ['"Paris"', '"Lyon"', "differs"]


def test_of_two_events_with_one_differing_field_the_closest_differs_in_fewer_places() -> None:
    trace = [
        {"type": "tool_execution_end", "tool_name": "t", "args": {"a": 1, "b": 2, "c": 3}},
        {"type": "tool_execution_end", "tool_name": "t", "args": {"a": 1, "b": 2, "c": 4}},
    ]
    expected = [{"tool_execution_end": {"tool_name": "t", "args": {"a": 0, "b": 2, "c": 4}}}]
    try:
        assert_events(trace, expected)
    except AssertionError as exc:
        text = str(exc)
    else:
        raise AssertionError("assert_events passed")
    assert "closest actual tool_execution_end: #1" in text
    assert "> #1 " in text


def test_extra_keys_in_the_actual_dict_hint_subset_and_the_hint_is_a_fix() -> None:
    expect = """\
expect:
  events:
    - tool_execution_start: {tool_name: add_note, args: {title: stamps, body: "buy stamps at the post office"}}
"""  # noqa: E501
    detail = failure_of(expect)
    assert rows(detail)["args.where"][:2] == ["(absent)", rows(detail)["args.where"][1]]
    hint = detail[detail.index("hint: ") :].splitlines()
    assert hint[0] == (
        "hint: the actual args also has where, which the expected mapping does not name (a mapping"
    )
    assert hint[1] == "  must name every key); with $subset it matches:"
    suggested = hint[2].strip()
    assert suggested.startswith("args: ")
    # the suggested line, put in the expectation, makes it pass
    fields = yaml.safe_load(suggested)
    fixed = {"tool_name": "add_note", **fields}
    scenario = NOTES + "expect:\n  events:\n    - tool_execution_start: " + json.dumps(fixed) + "\n"
    assert check_outcome(run_scenario(parse_scenario(scenario, "fixed.yaml"))).passed


def test_a_subset_hint_for_a_nested_mapping_wraps_only_that_mapping() -> None:
    detail = failure_of(
        """\
expect:
  events:
    - tool_execution_start:
        tool_name: add_note
        args:
          $subset: {where: {city: Lyon, shop: {name: La Poste}}}
"""
    )
    assert rows(detail)["args.where.shop.street"][0] == "(absent)"
    suggestion = detail.splitlines()[-1].strip()
    assert suggestion == (
        'args: {"$subset": {"where": {"city": "Lyon", "shop": {"$subset": {"name": "La Poste"}}}}}'
    )


def test_an_expected_key_with_a_schema_default_hints_that_events_carry_the_raw_arguments() -> None:
    detail = failure_of(
        """\
expect:
  events:
    - tool_execution_start:
        tool_name: add_note
        args: {$subset: {title: stamps, priority: normal}}
"""
    )
    assert rows(detail)["args.priority"] == ['"normal"', "(absent)", "differs"]
    assert detail.splitlines()[-2:] == [
        'hint: the call has no args.priority (add_note\'s schema defaults it to "normal"): '
        "events carry",
        "  the arguments the model sent, not the schema's defaults; leave it out of the "
        "expected args",
    ]


def test_a_missing_key_without_a_schema_default_has_no_default_hint() -> None:
    detail = failure_of(
        """\
expect:
  events:
    - tool_execution_start: {tool_name: add_note, args: {$subset: {title: stamps, tags: [a]}}}
"""
    )
    assert rows(detail)["args.tags"] == ['["a"]', "(absent)", "differs"]
    assert "hint:" not in detail


def test_a_request_and_the_result_differ_down_to_the_key_and_around_the_difference() -> None:
    said = "Forecast: " + LONG
    base = NOTES.replace('  - text: "Saved."', f"  - text: {json.dumps(said)}")
    verdict = check_outcome(
        run_scenario(
            parse_scenario(
                base
                + f"""\
expect:
  result: {json.dumps(said.replace("evening", "night"))}
  requests:
    - {{round: 2, last_message: {{role: toolResult, text: "3 results!"}}}}
""",
                "notes.yaml",
            )
        )
    )
    result, request = verdict.failures
    assert request.detail == '  last_message.text: expected "3 results!", actual "3 results"'
    expected, actual = (line.split(": ", 1)[1].strip() for line in result.detail.splitlines())
    assert len(said) > 120  # too long for a line: both cut at the same place, before "night"
    assert expected.startswith("…") and expected.endswith('cloudy in the night."')
    assert actual.startswith("…") and actual.endswith('cloudy in the evening."')
    assert expected[:20] == actual[:20]


def test_the_report_record_carries_the_same_diff_as_the_cli() -> None:
    verdict = check_outcome(
        run_scenario(
            parse_scenario(
                NOTES
                + """\
expect:
  events:
    - tool_execution_start: {tool_name: add_note, args: {title: stamps, body: "buy stamps"}}
""",
                "notes.yaml",
            )
        )
    )
    record = scenario_record(verdict, id="notes", path="notes.yaml")
    assert record["failure"] == format_verdict(verdict)
    assert re.search(
        r'\n +args\.body +"buy stamps" +"buy stamps at the post office" +<- differs\n',
        record["failure"],
    )
    assert "hint: the actual args also has where" in record["failure"]


TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=120)
VALUE: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=5),
    max_leaves=8,
)


@settings(max_examples=100, deadline=None)
@given(VALUE, VALUE, st.integers(min_value=8, max_value=80))
def test_two_different_values_never_show_alike_and_stay_within_the_width(
    a: Any, b: Any, width: int
) -> None:
    shown_a, shown_b = show_pair(a, b, width)
    assert len(shown_a) <= width and len(shown_b) <= width
    text_a = json.dumps(a, ensure_ascii=False)
    text_b = json.dumps(b, ensure_ascii=False)
    if text_a != text_b:
        assert shown_a != shown_b, (text_a, text_b)
    if len(text_a) <= width:
        assert shown_a == text_a  # a value that fits is shown whole


@settings(max_examples=100, deadline=None)
@given(TEXT, TEXT, TEXT)
def test_a_long_common_prefix_is_cut_and_what_differs_stays_in_view(
    prefix: str, x: str, y: str
) -> None:
    a, b = "p" * 50 + prefix + x, "p" * 50 + prefix + y
    if a == b:
        return
    shown_a, shown_b = show_pair(a, b, 40)
    text_a, text_b = json.dumps(a, ensure_ascii=False), json.dumps(b, ensure_ascii=False)
    at = next(i for i in range(len(text_a) + 1) if text_a[i : i + 1] != text_b[i : i + 1])
    # the first differing character is shown on each side that has one
    for text, shown in ((text_a, shown_a), (text_b, shown_b)):
        if at < len(text):
            body = shown.strip("…")
            spans = [k for k in range(len(text)) if text.startswith(body, k)]
            assert any(k <= at < k + len(body) for k in spans), (text, shown, at)
