"""Fixtures for the whole suite: pytester, and the provider SDKs imported on demand."""

from __future__ import annotations

import os
from types import ModuleType

import pytest

# pytester runs real inner pytest sessions (tests/plugin). pytest accepts `pytest_plugins`
# only in a top-level conftest, so it is enabled here rather than in tests/plugin/.
pytest_plugins = ["pytester"]

# An in-process pytester session forgets the modules imported during it. langsmith's pytest
# plugin (installed with the frameworks of the test extra) imports the OpenTelemetry SDK in
# each inner session; forgotten and imported again later, its modules came back as a second
# copy beside objects of the first, and `--otel`'s spans lost their parents (every span a
# trace of its own) in whichever test ran after such a session. Imported here, before any
# inner session, they are one copy for the whole run.
try:
    import opentelemetry.sdk.trace
    import opentelemetry.trace  # noqa: F401
    from opentelemetry.exporter.otlp.proto.common import trace_encoder  # noqa: F401
except ImportError:  # the otel extra is not installed: its tests are skipped
    pass

# The adapters (and the official SDKs) read these when no base_url= is given: a developer's
# or a CI machine's own settings must not send the suite's requests elsewhere. Tests of the
# variables set them with monkeypatch.
for _name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL"):
    os.environ.pop(_name, None)


# The provider SDKs the wire server and cassette tests drive, each imported by a fixture of
# its own name rather than at the top of a module: importing them all made collecting
# tests/serve take seconds, paid by every run that collects it (each xdist worker, each
# `-k`). A test that asks for one is skipped where that SDK is not installed.


@pytest.fixture(scope="session")
def openai() -> ModuleType:
    return pytest.importorskip("openai")


@pytest.fixture(scope="session")
def anthropic() -> ModuleType:
    return pytest.importorskip("anthropic")


@pytest.fixture(scope="session")
def genai() -> ModuleType:
    """``google.genai``, with its ``types`` and ``errors`` loaded."""
    pytest.importorskip("google.genai.types")
    pytest.importorskip("google.genai.errors")
    return pytest.importorskip("google.genai")


@pytest.fixture(scope="session")
def boto3() -> ModuleType:
    return pytest.importorskip("boto3")


@pytest.fixture(scope="session")
def botocore() -> ModuleType:
    """``botocore``, with its ``config`` and ``exceptions`` loaded."""
    pytest.importorskip("botocore.config")
    pytest.importorskip("botocore.exceptions")
    return pytest.importorskip("botocore")


@pytest.fixture(scope="session")
def pydantic_ai() -> ModuleType:
    """``pydantic_ai``, with the OpenAI model and provider modules loaded."""
    pytest.importorskip("pydantic_ai.models.openai")
    pytest.importorskip("pydantic_ai.providers.openai")
    return pytest.importorskip("pydantic_ai")
