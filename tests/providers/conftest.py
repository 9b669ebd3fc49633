"""Fixtures for the wire adapter tests: the conformance corpus and a provider driver.

Tests ask for ``conformance_case`` (every corpus file), ``streamed_case`` (the streamed
ones) or ``tool_choice_case`` (those whose request carries a tool choice) and are
parametrized over them by :func:`pytest_generate_tests`. ``drive`` runs a real provider
class against an ``httpx2.MockTransport``.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import importlib
import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest

from openprogram.events import ProviderEvent
from openprogram.providers.base import Context, StreamOptions
from openprogram.providers.eventstream import encode_message
from openprogram.types import AssistantMessage, UserMessage

CONFORMANCE = Path(__file__).resolve().parent.parent / "conformance"

PROVIDER_CLASSES = {
    "openai-chat": ("openprogram.providers.openai_chat", "OpenAIChatProvider"),
    "openai-responses": ("openprogram.providers.openai_responses", "OpenAIResponsesProvider"),
    "anthropic": ("openprogram.providers.anthropic", "AnthropicProvider"),
    "gemini": ("openprogram.providers.gemini", "GeminiProvider"),
    "bedrock": ("openprogram.providers.bedrock", "BedrockProvider"),
}


def provider_class(api: str) -> Any:
    module, name = PROVIDER_CLASSES[api]
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Case:
    """One conformance file."""

    file: str
    api: str
    stream: bool
    tags: tuple[str, ...]
    data: dict[str, Any] = field(repr=False, compare=False)

    @property
    def status(self) -> int:
        return int(self.data["response"]["status"])

    @property
    def content_type(self) -> str:
        return str(self.data["response"]["content_type"])

    @property
    def body(self) -> bytes:
        response = self.data["response"]
        if "body_base64" in response:
            return base64.b64decode(response["body_base64"])
        return str(response["body"]).encode()

    @property
    def expected(self) -> dict[str, Any]:
        return dict(self.data["expected"])

    @property
    def request_body(self) -> dict[str, Any]:
        return dict(self.data["request"]["body"])

    def tag_value(self, prefix: str) -> str | None:
        for tag in self.tags:
            if tag.startswith(prefix + ":"):
                return tag.split(":", 1)[1]
        return None


@functools.cache
def load_cases() -> list[Case]:
    index = json.loads((CONFORMANCE / "index.json").read_text())
    return [
        Case(
            e["file"],
            e["provider"],
            e["stream"],
            tuple(e["tags"]),
            json.loads((CONFORMANCE / e["file"]).read_text()),
        )
        for e in index["entries"]
    ]


def _has_tool_choice(case: Case) -> bool:
    body = case.request_body
    tool_config = body.get("toolConfig") or {}
    return (
        "tool_choice" in body
        or "functionCallingConfig" in tool_config
        or "toolChoice" in tool_config
        or case.tag_value("tool_choice_matrix") == "none"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    cases = load_cases()
    selections: dict[str, Callable[[Case], bool]] = {
        "conformance_case": lambda c: True,
        "streamed_case": lambda c: c.stream and c.status == 200,
        "tool_choice_case": _has_tool_choice,
    }
    for name, keep in selections.items():
        if name in metafunc.fixturenames:
            chosen = [c for c in cases if keep(c)]
            metafunc.parametrize(name, chosen, ids=[c.file for c in chosen])


# --------------------------------------------------------------------------- driving


async def _chunks(parts: Iterable[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def streaming_response(
    chunks: Iterable[bytes], *, status: int = 200, content_type: str, headers: Any = None
) -> httpx2.Response:
    """A response whose body arrives as ``chunks`` (an async stream, like the network)."""
    all_headers = {"content-type": content_type, **(headers or {})}
    return httpx2.Response(status, headers=all_headers, content=_chunks(list(chunks)))


@dataclass
class Run:
    """What one ``provider.stream`` call produced, and what it sent."""

    events: list[ProviderEvent]
    requests: list[httpx2.Request]

    @property
    def message(self) -> AssistantMessage:
        last = self.events[-1]
        if last.type == "done":
            return last.message
        assert last.type == "error", f"stream ended on {last.type}"
        return last.error

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(self.requests[-1].content)


def simple_context() -> Context:
    return Context("", [UserMessage.of("hi")], [])


def run_provider(
    provider_factory: Callable[[httpx2.AsyncClient], Any],
    handler: Callable[[httpx2.Request], httpx2.Response],
    context: Context | None = None,
    options: StreamOptions | None = None,
) -> Run:
    """Build a provider on a MockTransport client, stream one reply, collect the events."""
    requests: list[httpx2.Request] = []

    def record(request: httpx2.Request) -> httpx2.Response:
        requests.append(request)
        return handler(request)

    async def go() -> list[ProviderEvent]:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(record)) as client:
            provider = provider_factory(client)
            stream = provider.stream(context or simple_context(), options or StreamOptions())
            return [event async for event in stream]

    return Run(asyncio.run(go()), requests)


# --------------------------------------------------------------------------- all five

FIVE = ("openai-chat", "openai-responses", "anthropic", "gemini", "bedrock")
"""The wire APIs, for tests that hold every adapter to the same contract."""

KEY = "test-secret-not-a-real-key-4821"

STREAM_TYPES = {api: "text/event-stream" for api in FIVE} | {
    "bedrock": "application/vnd.amazon.eventstream"
}


def make_provider(
    api: str, client: httpx2.AsyncClient | None, *, key: str | None = KEY, **options: Any
) -> Any:
    """The ``api`` adapter on ``client`` with ``key`` (Bedrock: as its bearer token, in
    us-east-1)."""
    cls = provider_class(api)
    if api == "bedrock":
        options.setdefault("region", "us-east-1")
        return cls("m-1", bearer_token=key, client=client, **options)
    return cls("m-1", api_key=key, client=client, **options)


def stream_lines(api: str, *events: tuple[str, str]) -> bytes:
    """A 200 body of ``(event name, data text)`` pairs in ``api``'s framing: SSE (the name
    sent as ``event:`` where the API names its events) or Bedrock's event-stream frames."""
    if api == "bedrock":
        return b"".join(
            encode_message({":message-type": "event", ":event-type": name}, data.encode())
            for name, data in events
        )
    named = api in ("openai-responses", "anthropic")
    out = [
        f"event: {name}\ndata: {data}\n\n" if named else f"data: {data}\n\n"
        for name, data in events
    ]
    return "".join(out).encode()


def stream_error(api: str, code: str, message: str) -> bytes:
    """A 200 body holding only ``api``'s in-stream error with ``code`` and ``message``."""
    if api == "bedrock":
        headers = {":message-type": "exception", ":exception-type": code}
        return encode_message(headers, json.dumps({"message": message}).encode())
    data: dict[str, Any] = {
        "openai-chat": {"error": {"message": message, "type": code}},
        "openai-responses": {"type": "error", "code": code, "message": message},
        "anthropic": {"type": "error", "error": {"type": code, "message": message}},
        "gemini": {"error": {"code": 500, "message": message, "status": code}},
    }[api]
    return stream_lines(api, ("error", json.dumps(data)))


class Kit:
    """The helpers of this conftest, handed to tests by the ``kit`` fixture (test modules
    do not import conftest)."""

    Case = Case
    FIVE = FIVE
    KEY = KEY
    STREAM_TYPES = STREAM_TYPES
    run = staticmethod(run_provider)
    response = staticmethod(streaming_response)
    provider_class = staticmethod(provider_class)
    simple_context = staticmethod(simple_context)
    provider = staticmethod(make_provider)
    stream_lines = staticmethod(stream_lines)
    stream_error = staticmethod(stream_error)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit


@pytest.fixture(params=FIVE)
def each_api(request: pytest.FixtureRequest) -> str:
    """Runs the test once per wire API."""
    return str(request.param)
