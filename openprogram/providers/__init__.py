"""Providers: the seam between the loop and a model API.

``Runtime(model="openai:gpt-4o-mini")`` resolves a provider through this registry;
``Runtime(provider=obj)`` takes any object implementing :class:`Provider`.
:func:`parse_response` and :func:`tool_choice_fields` read and describe each wire API's
shapes without a network (for cassettes and conformance checks).
"""

from openprogram.providers.apis import parse_response, tool_choice_fields
from openprogram.providers.base import (
    Context,
    Provider,
    ProviderFactory,
    RunOptions,
    RunSettings,
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
    "RunOptions",
    "RunSettings",
    "StreamOptions",
    "ToolChoice",
    "check_tool_choice",
    "get_provider",
    "parse_arguments",
    "parse_response",
    "provider_names",
    "register_provider",
    "tool_choice_fields",
]
