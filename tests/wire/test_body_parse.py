"""The server reads a request's body as ``json.loads`` does, whichever parser reads it.

With the ``fast`` extra, orjson reads a body first and ``json`` reads what orjson refuses.
What the two may disagree on is tried here: integers past 64 bits (orjson makes them
floats), NaN and infinities, lone surrogates, a byte-order mark, deep nesting, and bytes
that are no JSON at all.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram_sim.wire import _app

pytest.importorskip("orjson", reason="the fast extra (orjson) is not installed")

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # unbounded: past 64 bits too
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),  # NaN and the infinities included
    st.text(),  # lone surrogates included
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


def _same(raw: bytes) -> None:
    # repr tells 1 from 1.0 and True, -0.0 from 0.0, and shows NaN (which equals nothing)
    assert repr(_app._parse(raw)) == repr(_app._parse_json(raw)), raw


@settings(max_examples=500, deadline=None)
@given(value=_VALUES, ascii_only=st.booleans(), indent=st.sampled_from([None, 1]))
def test_a_body_reads_as_json_reads_it(value: Any, ascii_only: bool, indent: int | None) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    raw = text.encode("utf-8", "surrogatepass")
    _same(raw)
    _same(b" " + raw + b"\n")
    _same(b'{"model": "m", "stream": true, "messages": ' + raw + b"}")


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=40))
def test_bytes_that_are_no_json_read_as_json_reads_them(raw: bytes) -> None:
    _same(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"n": 18446744073709551616}',  # past 64 bits: orjson would give a float
        b'{"n": -9223372036854775809}',
        b'{"n": 1234567890123456789012345678901234567890}',
        b'{"n": 9223372036854775807}',  # the largest 64-bit integer: orjson reads it exactly
        b'{"x": NaN, "y": Infinity}',
        b'{"x": 1e400}',
        b'{"s": "\\ud800"}',
        b"\xef\xbb\xbf{}",
        b"[" * 1100 + b"]" * 1100,
        b'{"a": 1, "a": 2}',
        b'{"a": 1} x',
        b"",
        b'{"a": "\xff"}',
    ],
)
def test_the_bodies_the_parsers_may_disagree_on(raw: bytes) -> None:
    _same(raw)


def test_orjson_reads_a_plain_body() -> None:
    """The fast path is taken: the body a chat client sends is read by orjson."""
    assert _app._orjson_loads is not None
    raw = b'{"model": "gpt-4o-mini", "stream": true, "messages": [{"role": "user"}]}'
    assert _app._LONG_NUMBER not in raw.translate(_app._DIGITS)
    assert _app._parse(raw) == {
        "model": "gpt-4o-mini",
        "stream": True,
        "messages": [{"role": "user"}],
    }
