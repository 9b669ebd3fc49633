"""Providers: the seam between the loop and a model API.

``Runtime(model="openai:gpt-4o-mini")`` resolves a provider through this registry;
``Runtime(provider=obj)`` takes any object implementing :class:`Provider`.
"""

from openprogram.providers.base import (
    Context,
    Provider,
    ProviderFactory,
    StreamOptions,
    ToolChoice,
    check_tool_choice,
    get_provider,
    provider_names,
    register_provider,
)
from openprogram.providers.builder import MessageBuilder, parse_arguments

__all__ = [
    "Context",
    "MessageBuilder",
    "Provider",
    "ProviderFactory",
    "StreamOptions",
    "ToolChoice",
    "check_tool_choice",
    "get_provider",
    "parse_arguments",
    "provider_names",
    "register_provider",
]
