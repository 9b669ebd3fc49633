"""A scripted call is read alike from a plain dict (the fast path) and from any other
mapping: the short form, the long form, and the error for neither."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from openprogram_sim.models import TurnToolCall


@pytest.mark.parametrize(
    "given",
    [
        {"add": {"a": 1}},
        {"add": None},
        {"name": "add", "arguments": '{"a": 1', "id": "c7"},
        {"name": "add"},
    ],
)
def test_a_dict_and_a_mapping_give_the_same_call(given: dict) -> None:
    plain, other = TurnToolCall.coerce(given), TurnToolCall.coerce(MappingProxyType(given))
    assert plain == other
    assert plain.json_text == other.json_text


@pytest.mark.parametrize("bad", [{}, {"a": 1, "b": 2}])
def test_a_dict_of_neither_form_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError, match="must be"):
        TurnToolCall.coerce(bad)
