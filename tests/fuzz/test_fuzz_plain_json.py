"""The quick walk that lets ``check_trace`` skip its JSON round trip: it says "plain" only
for what a round trip gives back unchanged, wherever in the trace the odd value sits."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram_sim.fuzz import check_trace, run_generated
from openprogram_sim.fuzz._trace_invariants import _ENTRY_KEYS, _plain_json, _plain_trace
from openprogram_sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]


def _reference(value: Any) -> bool:
    """The definition, written the slow and obvious way."""
    if type(value) is dict:
        return all(type(k) is str for k in value) and all(map(_reference, value.values()))
    if type(value) is list:
        return all(map(_reference, value))
    if type(value) is float:
        return not math.isnan(value)
    return type(value) in (str, int, bool) or value is None


class _Text(str):
    pass


_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=5)
    | st.builds(_Text, st.text(max_size=3))
    | st.tuples(st.integers())
    | st.sets(st.integers(), max_size=2)
)
_keys = st.text(max_size=3) | st.integers() | st.none() | st.booleans()
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_the_walk_says_plain_exactly_as_its_definition(value: Any) -> None:
    assert _plain_json(value) is _reference(value)
    if _plain_json(value):
        assert json.loads(json.dumps(value)) == value


_entries = st.lists(
    st.dictionaries(st.sampled_from(sorted(_ENTRY_KEYS)) | _keys, _values, max_size=6) | _values,
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(_entries)
def test_the_trace_walk_says_plain_exactly_as_its_definition(value: Any) -> None:
    """The walk over trace entries (field names as keys, looked at value by value) agrees
    with the definition on trace-shaped values and on anything else."""
    assert _plain_trace(value) is _reference(value)
    if _plain_trace(value):
        assert json.loads(json.dumps(value)) == value


@pytest.fixture(scope="module")
def trace() -> list[dict[str, Any]]:
    outcome = run_generated(load_scenario(ROOT / "scenarios" / "basics" / "one_pick.yaml"))
    assert check_trace(outcome.trace) == []
    return outcome.trace


def _deepest_message(trace: list[dict[str, Any]]) -> dict[str, Any]:
    """A tool call's arguments: a dict inside an event in the middle of the trace."""
    event = next(e for e in trace if e["type"] == "tool_execution_start")
    assert isinstance(event["args"], dict) and trace.index(event) < len(trace) - 1
    return event["args"]


@pytest.mark.parametrize(
    ("planted", "said"),
    [
        ((1, 2), "does not survive a JSON round trip"),
        (float("nan"), "does not survive a JSON round trip"),
        ({1: "an int key"}, "does not survive a JSON round trip"),
        ([{"deeper": {"x": (3,)}}], "does not survive a JSON round trip"),
        ({"not", "json"}, "not JSON-serializable"),
    ],
    ids=["tuple", "nan", "int-key", "tuple-deep-in-a-list", "set"],
)
def test_an_odd_value_deep_in_an_event_is_caught(
    trace: list[dict[str, Any]], planted: Any, said: str
) -> None:
    broken = copy.deepcopy(trace)
    _deepest_message(broken)["extra"] = planted
    assert any(said in problem for problem in check_trace(broken))
    # and as the value of an entry's own field
    broken = copy.deepcopy(trace)
    broken[len(broken) // 2]["text"] = planted
    assert any(said in problem for problem in check_trace(broken))


@pytest.mark.parametrize(
    "planted", [float("inf"), -0.0, True, None, "", [], {}, [[{"a": [1, 2.5, None]}]]]
)
def test_plain_values_deep_in_an_event_pass(trace: list[dict[str, Any]], planted: Any) -> None:
    fine = copy.deepcopy(trace)
    _deepest_message(fine)["extra"] = planted
    assert check_trace(fine) == []
