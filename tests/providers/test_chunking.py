"""However the network splits a streamed body, the reply must not change.

Every streamed conformance body (SSE for four APIs, AWS event-stream bytes for Bedrock) is
re-split at arbitrary byte boundaries, with cuts drawn on purpose inside multi-byte UTF-8
characters, between CR and LF, and inside JSON strings, and fed through the real provider
class over an ``httpx2.MockTransport`` that streams the chunks. The final message must equal
the one-piece parse, and the events must describe it.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
from typing import Any

import httpx2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openprogram.providers import parse_response
from openprogram.types import AssistantMessage, TextContent, ThinkingContent


def _interesting_cuts(body: bytes) -> list[int]:
    """Positions inside a UTF-8 character, between CR and LF, and inside JSON strings."""
    cuts = [i for i in range(1, len(body)) if 0x80 <= body[i] < 0xC0]
    cuts += [i for i in range(1, len(body)) if body[i - 1 : i + 1] == b"\r\n"]
    cuts += [i + 1 for i in range(len(body) - 1) if body[i : i + 1] == b'"'][:200]
    return sorted(set(cuts)) or [len(body) // 2]


def _split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = [0, *sorted(set(cuts)), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(points) if b > a]


def _stream(kit: Any, case: Any, chunks: list[bytes]) -> tuple[AssistantMessage, list[Any]]:
    cls = kit.provider_class(case.api)

    # Bedrock names its key bearer_token (it also signs with SigV4); the others api_key.
    key = "api_key" if "api_key" in inspect.signature(cls).parameters else "bearer_token"

    def factory(client: httpx2.AsyncClient) -> Any:
        options = {key: "test-key", "base_url": "http://wire.test", "client": client}
        return cls("test-model", **options)

    def handler(request: httpx2.Request) -> httpx2.Response:
        return kit.response(chunks, content_type=case.content_type)

    run = kit.run(factory, handler)
    return run.message, run.events


def _comparable(message: AssistantMessage) -> AssistantMessage:
    # The model name comes from the constructor on one path and "" on the other.
    return dataclasses.replace(message, timestamp=0, model="")


def _check_events(events: list[Any], message: AssistantMessage) -> None:
    assert events[0].type == "start"
    assert [e.type for e in events].count("done") + [e.type for e in events].count("error") == 1
    assert events[-1].type in ("done", "error")
    for index, block in enumerate(message.content):
        deltas = [
            e.delta
            for e in events
            if e.type in ("text_delta", "thinking_delta") and e.content_index == index
        ]
        if isinstance(block, TextContent):
            assert "".join(deltas) == block.text
        elif isinstance(block, ThinkingContent):
            assert "".join(deltas) == block.thinking


def _one_piece(case: Any) -> AssistantMessage:
    body = case.body
    return parse_response(case.api, body, content_type=case.content_type, status=case.status)


def test_byte_by_byte_equals_one_piece(streamed_case: Any, kit: Any) -> None:
    case = streamed_case
    expected = _comparable(_one_piece(case))
    body = case.body
    message, events = _stream(kit, case, [body[i : i + 1] for i in range(len(body))])
    assert _comparable(message) == expected
    _check_events(events, message)


def test_random_splits_equal_one_piece(streamed_case: Any, kit: Any) -> None:
    case = streamed_case
    body = case.body
    expected = _comparable(_one_piece(case))
    interesting = _interesting_cuts(body)
    cut = st.one_of(st.integers(1, max(1, len(body) - 1)), st.sampled_from(interesting))

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(cut, max_size=40))
    def check(cuts: list[int]) -> None:
        message, events = _stream(kit, case, _split(body, cuts))
        assert _comparable(message) == expected
        _check_events(events, message)

    check()
