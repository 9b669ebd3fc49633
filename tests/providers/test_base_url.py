"""Base URLs as the official SDKs take them: Anthropic's and Gemini's root (the SDKs' form)
and the root with the version path reach the same URL; with no ``base_url=``, the variable
each SDK reads (``ANTHROPIC_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL``, ``OPENAI_BASE_URL``);
an explicit ``base_url=`` wins over it."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

ENV = {
    "openai-chat": "OPENAI_BASE_URL",
    "openai-responses": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
    "gemini": "GOOGLE_GEMINI_BASE_URL",
}

# Where each API's request goes below a base URL in the SDK's form (openai's ends in /v1).
PATH = {
    "openai-chat": "/chat/completions",
    "openai-responses": "/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/m-1:streamGenerateContent?alt=sse",
}


@pytest.fixture(autouse=True)
def no_base_url_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in set(ENV.values()):
        monkeypatch.delenv(name, raising=False)


def _url(kit: Any, api: str, **options: Any) -> str:
    """The URL of the request ``api``'s adapter sends, made with ``options``."""
    run = kit.run(
        lambda client: kit.provider(api, client, **options),
        lambda request: httpx2.Response(500, json={"error": {"message": "x"}}),
    )
    return str(run.requests[0].url)


@pytest.mark.parametrize(
    ("api", "versioned"),
    [("anthropic", "/v1"), ("gemini", "/v1beta")],
)
@pytest.mark.parametrize("root", ["http://127.0.0.1:9", "http://127.0.0.1:9/", "http://p.test/gw"])
def test_the_sdks_root_and_the_versioned_form_send_the_same(
    kit: Any, api: str, versioned: str, root: str
) -> None:
    sdk_form = _url(kit, api, base_url=root)
    assert sdk_form == root.rstrip("/") + PATH[api]
    assert _url(kit, api, base_url=root.rstrip("/") + versioned) == sdk_form
    assert _url(kit, api, base_url=root.rstrip("/") + versioned + "/") == sdk_form


def test_a_gemini_base_url_with_another_version_keeps_it(kit: Any) -> None:
    url = _url(kit, "gemini", base_url="http://127.0.0.1:9/v1", stream=False)
    assert url == "http://127.0.0.1:9/v1/models/m-1:generateContent"


@pytest.mark.parametrize(
    ("api", "default"),
    [
        ("openai-chat", "https://api.openai.com/v1/chat/completions"),
        ("openai-responses", "https://api.openai.com/v1/responses"),
        ("anthropic", "https://api.anthropic.com/v1/messages"),
        ("gemini", "https://generativelanguage.googleapis.com/v1beta/models/m-1:"
                   "streamGenerateContent?alt=sse"),
    ],
)  # fmt: skip
def test_the_public_endpoint_by_default(kit: Any, api: str, default: str) -> None:
    assert _url(kit, api) == default


@pytest.mark.parametrize("api", list(ENV))
def test_the_sdks_variable_is_read_when_no_base_url_is_given(
    kit: Any, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = "http://from-env.test/v1" if api.startswith("openai") else "http://from-env.test"
    monkeypatch.setenv(ENV[api], base)
    assert _url(kit, api) == base + PATH[api]


@pytest.mark.parametrize("api", list(ENV))
def test_an_explicit_base_url_wins_over_the_variable(
    kit: Any, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV[api], "http://from-env.test")
    base = "http://given.test/v1" if api.startswith("openai") else "http://given.test"
    assert _url(kit, api, base_url=base) == base + PATH[api]


@pytest.mark.parametrize("api", list(ENV))
def test_an_empty_variable_is_not_set(kit: Any, api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV[api], "  ")
    assert _url(kit, api).startswith("https://")


def test_a_base_url_from_the_variable_is_custom_and_needs_no_key(
    kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://sim.test")
    run = kit.run(
        lambda client: kit.provider_class("anthropic")("m-1", client=client),
        lambda request: httpx2.Response(500, json={"error": {"message": "x"}}),
    )
    assert str(run.requests[0].url) == "http://sim.test/v1/messages"
    assert "x-api-key" not in run.requests[0].headers
