"""The provider seam: what a model call receives, what it yields, and the registry.

A provider is any object with a ``stream(context, options)`` method returning an async
iterator of provider stream events (:mod:`openprogram.events`) for one model call. It
never raises for a failed call: failures end the stream with a ``ProviderError`` event
whose message has ``stop_reason="error"`` (or ``"aborted"``) and the provider's text.

Providers are found by the prefix of a model string: ``"openai:gpt-4o-mini"`` asks the
factory registered as ``"openai"`` for a provider of model ``gpt-4o-mini``.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, TypedDict, runtime_checkable

from openprogram.errors import (
    ArgumentTypeError,
    ConfigurationError,
    InvalidArgumentError,
    ProviderNotFoundError,
)
from openprogram.events import ProviderEvent
from openprogram.types import AnyMessage, ToolSpec

__all__ = [
    "Context",
    "Provider",
    "ProviderFactory",
    "ReadyStream",
    "RunOptions",
    "RunSettings",
    "StreamOptions",
    "ToolChoice",
    "check_tool_choice",
    "get_provider",
    "provider_names",
    "register_provider",
    "stream_options",
]


ToolChoice: TypeAlias = Literal["auto", "required", "none"] | dict[str, Any]
"""``"auto"`` (the model decides), ``"required"`` (it must pick a tool), ``"none"`` (text
only) or ``{"type": "function", "name": X}`` (it must call X)."""


def check_tool_choice(tool_choice: Any) -> ToolChoice:
    """Return ``tool_choice`` if valid, else raise
    :class:`~openprogram.errors.InvalidArgumentError` (a ``ValueError``) saying what is
    allowed."""
    if tool_choice in ("auto", "required", "none"):
        return tool_choice  # type: ignore[no-any-return]
    if (
        isinstance(tool_choice, dict)
        and tool_choice.get("type") == "function"
        and isinstance(tool_choice.get("name"), str)
        and set(tool_choice) == {"type", "name"}
    ):
        return tool_choice
    raise InvalidArgumentError(
        f"tool_choice={tool_choice!r} is not valid; use 'auto', 'required', 'none' or "
        "{'type': 'function', 'name': '<tool name>'}"
    )


@dataclass(slots=True)
class Context:
    """What the model is shown for one call. ``messages`` is the live history: a provider
    reads it during the call and must not mutate it or keep a reference past the call."""

    system_prompt: str
    messages: list[AnyMessage]
    tools: list[ToolSpec]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """How a run calls the model: one checked object from ``Runtime.exec`` (or an
    :class:`~openprogram.agent.Agent`) through the loop to every model call, whose
    :class:`StreamOptions` carry the same fields. Checked once, when built: a bad value
    raises at once, naming it and what is allowed::

        options = RunOptions(tool_choice="required", max_iterations=5)
        agent = Agent(provider, options=options)
    """

    tool_choice: ToolChoice = "auto"
    """See :data:`ToolChoice`; sent every round."""
    parallel_tool_calls: bool | None = None
    """``False`` forbids several tool calls in one reply where the API has the knob;
    ``None`` leaves the provider's default."""
    max_iterations: int | None = None
    """The round cap as given: the loop makes at most ``max(1, min(50, max_iterations))``
    model calls (50 when ``None``)."""
    max_tokens: int | None = None
    """The reply's token limit (``None``: the provider's own default)."""
    temperature: float | None = None

    def __post_init__(self) -> None:
        check_tool_choice(self.tool_choice)
        if self.parallel_tool_calls not in (None, True, False):
            raise ArgumentTypeError(
                f"parallel_tool_calls={self.parallel_tool_calls!r} must be True, False or "
                "None (the provider's default)"
            )
        for name in ("max_iterations", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (type(value) is bool or not isinstance(value, int)):
                raise ArgumentTypeError(f"{name}={value!r} must be an int or None")


class RunSettings(TypedDict, total=False):
    """The fields of :class:`RunOptions` as keywords, for the signatures that take them
    flat (``Agent(provider, max_iterations=3)``)."""

    tool_choice: ToolChoice
    parallel_tool_calls: bool | None
    max_iterations: int | None
    max_tokens: int | None
    temperature: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamOptions(RunOptions):
    """One model call's options: the run's :class:`RunOptions` and where the call stands
    (the loop builds one per call from the run's checked options, see :meth:`of`)."""

    cancel: asyncio.Event | None = None
    """Set when the run is aborted; a provider stops streaming and yields an ``aborted``
    error event."""
    depth: int = 0
    """Nesting level of the exec this call belongs to (0 = outermost)."""
    round: int = 0
    """Model call number within its exec, from 1."""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Not checked again: the loop builds these from checked :class:`RunOptions` every
        round, and an adapter checks ``tool_choice`` as it maps it."""

    @classmethod
    def of(
        cls, options: RunOptions, *, cancel: asyncio.Event | None, depth: int, round: int
    ) -> StreamOptions:
        """The options of one model call of a run made with ``options``."""
        if cls is not StreamOptions:  # a subclass may add fields: its own __init__ sets them
            values = {name: getattr(options, name) for name in _RUN_FIELDS}
            return cls(**values, cancel=cancel, depth=depth, round=round)
        # Built field by field, as the generated __init__ does, without its per-field
        # object.__setattr__ lookups (one is built per model call: 2.5 us became 0.7 us).
        return stream_options(options, cancel, depth, round)


_RUN_FIELDS = tuple(RunOptions.__dataclass_fields__)
_new = object.__new__
_SETTERS = {
    name: getattr(StreamOptions, name).__set__ for name in StreamOptions.__dataclass_fields__
}
_set_tool_choice = _SETTERS.pop("tool_choice")
_set_parallel = _SETTERS.pop("parallel_tool_calls")
_set_max_iterations = _SETTERS.pop("max_iterations")
_set_max_tokens = _SETTERS.pop("max_tokens")
_set_temperature = _SETTERS.pop("temperature")
_set_cancel = _SETTERS.pop("cancel")
_set_depth = _SETTERS.pop("depth")
_set_round = _SETTERS.pop("round")
_set_extra = _SETTERS.pop("extra")
assert not _SETTERS, f"StreamOptions.of sets every field: {sorted(_SETTERS)} missing"


def stream_options(
    options: RunOptions,
    cancel: asyncio.Event | None,
    depth: int,
    round: int,
    _new: Callable[[type[StreamOptions]], StreamOptions] = _new,
    _setters: tuple[Callable[[StreamOptions, Any], None], ...] = (
        _set_tool_choice,
        _set_parallel,
        _set_max_iterations,
        _set_max_tokens,
        _set_temperature,
        _set_cancel,
        _set_depth,
        _set_round,
        _set_extra,
    ),
) -> StreamOptions:
    """``StreamOptions.of(options, cancel=, depth=, round=)``, called directly (the loop
    builds one per model call): the fields set one by one, the setters bound once."""
    made = _new(StreamOptions)
    (
        tool_choice,
        parallel,
        max_iterations,
        max_tokens,
        temperature,
        set_cancel,
        set_depth,
        set_round,
        extra,
    ) = _setters
    tool_choice(made, options.tool_choice)
    parallel(made, options.parallel_tool_calls)
    max_iterations(made, options.max_iterations)
    max_tokens(made, options.max_tokens)
    temperature(made, options.temperature)
    set_cancel(made, cancel)
    set_depth(made, depth)
    set_round(made, round)
    extra(made, {})
    return made


@runtime_checkable
class Provider(Protocol):
    """Anything that can stream one assistant reply."""

    def stream(self, context: Context, options: StreamOptions) -> AsyncIterator[ProviderEvent]:
        """Yield provider stream events for one model call, ending with ``done`` or
        ``error``."""
        ...


class ReadyStream:
    """A model call's stream that may have its events ready: a provider whose reply needs
    no waiting (the scripted model's) returns one from ``stream()``.

    Any consumer iterates it with ``async for``, as every provider's stream. The loop asks
    :meth:`ready` first: the plain iterator it returns gives the same events, read without
    an ``await`` each (an async generator costs about a microsecond a call and a tenth of
    one an event, as much as a scripted round's own work), and none of the pieces when no
    listener wants ``message_update``. A subclass implements both.
    """

    __slots__ = ()

    def ready(self, pieces: bool = True) -> Iterator[ProviderEvent] | None:
        """The call's events as a plain iterator, when none of them needs waiting for;
        ``None`` when they must be awaited (the stream is then iterated with ``async for``).
        Asked at most once, before the stream is iterated; an error it raises is the
        call's, as if the first ``__anext__`` had raised it. ``pieces=False``: the caller
        reads only the ``start`` event and the final one, so the events between (text,
        thinking and tool-call pieces) may be left out; the message is the same."""
        return None

    def __aiter__(self) -> AsyncIterator[ProviderEvent]:
        raise NotImplementedError


ProviderFactory: TypeAlias = Callable[..., Provider]
"""Called as ``factory(model_id, **options)`` and returns a provider."""

_FACTORIES: dict[str, ProviderFactory | str] = {
    # Built-in adapters, imported on first use ("module:attribute").
    "openai": "openprogram.providers.openai_chat:OpenAIChatProvider",
    "openai-chat": "openprogram.providers.openai_chat:OpenAIChatProvider",
    "openai-responses": "openprogram.providers.openai_responses:OpenAIResponsesProvider",
    "anthropic": "openprogram.providers.anthropic:AnthropicProvider",
    "gemini": "openprogram.providers.gemini:GeminiProvider",
    "google": "openprogram.providers.gemini:GeminiProvider",
    "bedrock": "openprogram.providers.bedrock:BedrockProvider",
}


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``Runtime(model=f"{name}:<model id>")`` use ``factory(model_id, **options)``."""
    if not name or ":" in name:
        raise InvalidArgumentError(f"provider name {name!r} must be non-empty and contain no ':'")
    _FACTORIES[name] = factory


def provider_names() -> list[str]:
    return sorted(_FACTORIES)


def _load(name: str) -> ProviderFactory:
    target = _FACTORIES[name]
    if not isinstance(target, str):
        return target
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        factory: ProviderFactory = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise ProviderNotFoundError(
            f"provider {name!r} could not be loaded from {target} ({exc}); "
            "check the installation, or register your own with register_provider()"
        ) from exc
    # not cached here: import_module is a dict lookup once loaded, and a cached class would
    # outlive its module when sys.modules is rolled back (pytester's in-process runs)
    return factory


def get_provider(model: str, **options: Any) -> Provider:
    """Resolve a ``"provider:model_id"`` string to a provider object."""
    name, sep, model_id = model.partition(":")
    if not sep or not name or not model_id:
        raise ConfigurationError(
            f"model {model!r} must look like 'provider:model_id', e.g. 'openai:gpt-4o-mini'; "
            f"known providers: {', '.join(provider_names())}"
        )
    if name not in _FACTORIES:
        raise ProviderNotFoundError(
            f"no provider named {name!r} (from model {model!r}); known providers: "
            f"{', '.join(provider_names())}. Register one with register_provider({name!r}, factory)"
        )
    return _load(name)(model_id, **options)
