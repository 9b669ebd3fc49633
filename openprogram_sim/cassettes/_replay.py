"""openprogram's real adapters bound to a cassette: for a scenario's ``model: {cassette:
...}``, for ``openprogram-sim record``, and for Python tests.

Replaying needs no key: the adapter gets placeholder credentials and the base URL the
session was recorded against (the host is never contacted; requests match on method, path
and body).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from openprogram.errors import OpenProgramError
from openprogram.events import ProviderEvent
from openprogram.providers import Context, MessageBuilder, Provider, StreamOptions
from openprogram.types import ErrorDetails
from openprogram_sim.cassettes._cassette import Cassette
from openprogram_sim.cassettes._match import DEFAULT_IGNORE, body_of
from openprogram_sim.errors import CassetteError

__all__ = [
    "CassetteProvider",
    "bound_provider",
    "recorded_api",
    "record_command",
    "scenario_cassette",
    "scenario_provider",
]

PLACEHOLDER_KEY = "openprogram-sim-replay"

_SUFFIX = {
    "openai-chat": "/chat/completions",
    "openai-responses": "/responses",
    "anthropic": "/messages",
    "gemini": "/models/",
    "bedrock": "/model/",
}


def recorded_api(cassette: Cassette) -> tuple[str, bool, str] | None:
    """``(api, stream, base_url)`` of the cassette's first recorded model call."""
    from openprogram_sim.wire import route

    for request, _ in cassette.vcr.data:
        routed = route(request.path, body_of(request.body))
        if routed is None:
            continue
        api, stream = routed
        parts = urlsplit(request.uri)
        path = parts.path
        cut = path.rfind(_SUFFIX[api])
        base = urlunsplit((parts.scheme, parts.netloc, path[:cut] if cut >= 0 else "", "", ""))
        return api, stream, base
    return None


def bound_provider(cassette: Cassette, model: str | None = None, **options: Any) -> Any:
    """``get_provider(model, **options)`` sending through ``cassette`` (see the module
    docstring); ``model`` defaults to the one the cassette was recorded with."""
    from openprogram.providers import get_provider

    name = model or cassette.metadata.get("model")
    if not name:
        raise CassetteError(
            f"cassette {cassette.path} does not say which model it was recorded with; "
            "name it: model: PROVIDER:MODEL (e.g. anthropic:claude-sonnet-4-5)"
        )
    options.setdefault("client", cassette.client())
    recorded = recorded_api(cassette)
    if recorded is not None:
        options.setdefault("stream", recorded[1])
    if not cassette.recording:
        if recorded is not None:
            options.setdefault("base_url", recorded[2])
        if name.partition(":")[0] == "bedrock":
            options.setdefault("bearer_token", PLACEHOLDER_KEY)
            options.setdefault("region", "us-east-1")
        else:
            options.setdefault("api_key", PLACEHOLDER_KEY)
    return get_provider(name, **options)


class CassetteProvider:
    """A provider replaying a cassette, that also says how much of it was used (the
    scenario check fails on recorded interactions never requested)."""

    def __init__(self, inner: Any, cassette: Cassette) -> None:
        self.inner = inner
        self.cassette = cassette

    @property
    def api(self) -> str:
        return str(getattr(self.inner, "api", "cassette"))

    @property
    def scripted_turns(self) -> int:
        """Interactions the cassette holds."""
        return len(self.cassette.vcr.data)

    @property
    def unconsumed(self) -> int:
        """Recorded interactions never requested (0 when the cassette allows that)."""
        return 0 if self.cassette.allow_unplayed else len(self.cassette.unplayed)

    def stream(self, context: Context, options: StreamOptions) -> AsyncIterator[ProviderEvent]:
        result: AsyncIterator[ProviderEvent] = self.inner.stream(context, options)
        return result


def record_command(scenario: Any) -> str:
    """The command that records a scenario's cassette again (every interaction)."""
    return f"openprogram-sim record {scenario.path or 'SCENARIO'} --record-mode all"


def scenario_cassette(scenario: Any, *, record_mode: str | None = "none") -> Cassette:
    """The :class:`Cassette` a scenario's ``model: {cassette: ...}`` names (its path taken
    from the scenario file's folder), not yet loaded; a replay that does not match advises
    :func:`record_command`."""
    spec = scenario.model
    path = Path(spec.cassette)
    if not path.is_absolute() and scenario.path:
        path = Path(scenario.path).parent / path
    return Cassette(
        path,
        record_mode=record_mode,
        ignore=spec.ignore if spec.ignore is not None else DEFAULT_IGNORE,
        faults=[f.model_dump(exclude_none=True) for f in spec.faults],
        timing=spec.timing,
        record_with=record_command(scenario),
    )


def scenario_provider(scenario: Any) -> Provider:
    """The provider for a scenario whose ``model:`` names a cassette: the real adapter
    replaying it (record mode ``none``). A cassette that cannot be used (missing, not
    readable) gives a provider whose every call fails with the reason, so the scenario
    fails with it like any other model error."""
    try:
        cassette = scenario_cassette(scenario).load()
        return CassetteProvider(bound_provider(cassette, scenario.model.model), cassette)
    except (CassetteError, OpenProgramError) as exc:
        return _Unusable(f"{scenario.where('model', 'cassette')}: {exc}")


class _Unusable:
    """A provider whose every call ends in an error stop carrying ``message``."""

    api = "cassette"

    def __init__(self, message: str) -> None:
        self.message = message

    async def stream(
        self, context: Context, options: StreamOptions
    ) -> AsyncIterator[ProviderEvent]:
        builder = MessageBuilder(api=self.api, model="cassette")
        yield builder.start()
        yield builder.error(self.message, details=ErrorDetails(reason="invalid_request"))
