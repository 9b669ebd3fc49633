"""The SSE decoder gives the same events whatever the line endings and wherever the
network splits the bytes (LF-only text takes a faster path than CR or CRLF text: both
must agree)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from openprogram.providers._sse import SSEDecoder, SSEEvent

_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12
)
_EVENTS = st.lists(
    st.tuples(
        st.one_of(st.just(""), st.sampled_from(["message_start", "ping", "delta"])),
        st.lists(_TEXT, min_size=1, max_size=3),
        st.booleans(),  # a comment line before it
    ),
    min_size=1,
    max_size=6,
)


def _encode(events: list[tuple[str, list[str], bool]], endings: list[str]) -> bytes:
    lines: list[str] = []
    for name, data, comment in events:
        if comment:
            lines.append(": keep-alive")
        if name:
            lines.append(f"event: {name}")
        lines.extend(f"data: {d}" for d in data)
        lines.append("")
    out: list[str] = []
    previous = ""
    for i, line in enumerate(lines):
        ending = endings[i % len(endings)]
        if previous == "\r" and not line and ending == "\n":
            ending = "\r\n"  # CR then a bare LF would be one CRLF ending, not two
        out.append(line + ending)
        previous = ending
    return "".join(out).encode()


def _expected(events: list[tuple[str, list[str], bool]]) -> list[SSEEvent]:
    return [SSEEvent(name or "message", "\n".join(data)) for name, data, _ in events]


def _decode(body: bytes, cuts: list[int]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    out: list[SSEEvent] = []
    start = 0
    for cut in [*sorted(set(cuts)), len(body)]:
        out.extend(decoder.feed(body[start:cut]))
        start = cut
    out.extend(decoder.flush())
    return out


@given(
    _EVENTS,
    st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=1, max_size=4),
    st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_line_endings_and_any_split_give_the_same_events(
    events: list[tuple[str, list[str], bool]], endings: list[str], cuts: list[int]
) -> None:
    body = _encode(events, endings)
    assert _decode(body, [c % (len(body) + 1) for c in cuts]) == _expected(events)


def test_a_crlf_split_between_cr_and_lf_is_one_line_ending() -> None:
    body = b"event: a\r\ndata: 1\r\n\r\nevent: b\ndata: 2\n\n"
    cut = body.index(b"\r\n\r\n") + 1  # between the CR and the LF
    assert _decode(body, [cut, cut + 2]) == [SSEEvent("a", "1"), SSEEvent("b", "2")]


def test_a_line_arriving_byte_by_byte_on_the_lf_path() -> None:
    body = 'event: ü\ndata: {"text": "héllo"}\n\n'.encode()
    assert _decode(body, list(range(len(body)))) == [SSEEvent("ü", '{"text": "héllo"}')]
