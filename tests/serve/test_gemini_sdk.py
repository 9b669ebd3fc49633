"""The official ``google-genai`` client against the wire server (it calls ``/v1``),
streaming and not."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from serve_support import CALL_ARGS, SEARCH_SCHEMA, TEXT, turns

from openprogram_sim.wire import WireServer, serve

# `genai` is the fixture (tests/conftest.py) that imports the SDK when a test asks for it.


@pytest.fixture(scope="module")
def server() -> Iterator[WireServer]:
    with serve(turns(1)) as running:
        yield running


@pytest.fixture
def client(genai: ModuleType) -> Callable[..., Any]:
    def make(server: WireServer, session: str | None = None, **http: object) -> Any:
        options = genai.types.HttpOptions(base_url=server.base_url("gemini", session), **http)
        return genai.Client(api_key="gemini-test", http_options=options)

    return make


@pytest.fixture
def search(genai: ModuleType) -> Any:
    declaration = genai.types.FunctionDeclaration(
        name="search", parameters_json_schema=SEARCH_SCHEMA
    )
    return genai.types.Tool(function_declarations=[declaration])


def _ask(genai: ModuleType, c: Any, stream: bool, **config: object) -> list[Any]:
    settings = genai.types.GenerateContentConfig(**config)
    if stream:
        return list(
            c.models.generate_content_stream(
                model="gemini-2.5-flash", contents="hi", config=settings
            )
        )
    return [c.models.generate_content(model="gemini-2.5-flash", contents="hi", config=settings)]


def _parts(replies: list[Any]) -> list[Any]:
    return [p for r in replies for p in r.candidates[0].content.parts or []]


@pytest.mark.parametrize("api_version", ["v1", "v1beta"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_generate_content_reconstructs_the_script(
    genai: ModuleType,
    server: WireServer,
    client: Callable[..., Any],
    search: Any,
    stream: bool,
    api_version: str,
) -> None:
    session = f"gemini-{stream}-{api_version}"
    with client(server, session, api_version=api_version) as c:
        first = _ask(genai, c, stream, tools=[search])
        second = _ask(genai, c, stream)
    thoughts = [p.text for p in _parts(first) if p.thought]
    calls = [(p.function_call.name, p.function_call.args) for p in _parts(first) if p.function_call]
    assert "".join(thoughts) == "I should search first."
    assert calls == [("search", CALL_ARGS)]
    assert first[-1].candidates[0].finish_reason == genai.types.FinishReason.STOP
    assert first[-1].usage_metadata.prompt_token_count == 11
    texts = [p.text for p in _parts(second)]
    assert "".join(texts) == TEXT and len(texts) == (3 if stream else 1)
    assert second[-1].candidates[0].finish_reason == genai.types.FinishReason.STOP
    assert [r.url.split("/")[-3] for r in server.session(session).requests] == [api_version] * 2
    server.assert_consumed(session)


def test_a_429_is_a_client_error_with_the_api_status(
    genai: ModuleType, client: Callable[..., Any]
) -> None:
    script = [{"stop_reason": "error", "error": "Quota exceeded", "wire": {"status": 429}}]
    with serve(script) as s, client(s) as c, pytest.raises(genai.errors.ClientError) as caught:
        _ask(genai, c, False)
    assert (caught.value.code, caught.value.status) == (429, "RESOURCE_EXHAUSTED")
    assert caught.value.message == "Quota exceeded"


def test_a_503_is_a_server_error(genai: ModuleType, client: Callable[..., Any]) -> None:
    script = [{"stop_reason": "error", "error": "try later", "wire": {"status": 503}}]
    with serve(script) as s, client(s) as c, pytest.raises(genai.errors.ServerError) as caught:
        _ask(genai, c, True)
    assert (caught.value.code, caught.value.status) == (503, "UNAVAILABLE")
