"""The five wire APIs by name: read a recorded response, describe a request's tool choice.

Each helper takes an API name (one of :data:`APIS`) and runs that adapter's own code. The
cassette distiller and the conformance tests use these to read recorded traffic and to
check request shapes without a network::

    >>> from openprogram.providers import parse_response, tool_choice_fields
    >>> tool_choice_fields("anthropic", "required", False)
    {'tool_choice': {'type': 'any', 'disable_parallel_tool_use': True}}
    >>> parse_response("openai-chat", b'{"error": {"message": "bad"}}',
    ...                content_type="application/json", status=400).error_message
    'OpenAI API error: HTTP 400: bad'

Adapter modules are imported on first use, so naming one API does not import the others.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from openprogram.errors import InvalidArgumentError
from openprogram.providers.base import ToolChoice
from openprogram.types import AssistantMessage

__all__ = ["APIS", "parse_response", "tool_choice_fields"]

_MODULES = {
    "openai-chat": "openprogram.providers.openai_chat",
    "openai-responses": "openprogram.providers.openai_responses",
    "anthropic": "openprogram.providers.anthropic",
    "gemini": "openprogram.providers.gemini",
    "bedrock": "openprogram.providers.bedrock",
}

APIS: tuple[str, ...] = tuple(_MODULES)
"""The wire API names: ``openai-chat``, ``openai-responses``, ``anthropic``, ``gemini``,
``bedrock``."""


def _module(api: str) -> ModuleType:
    try:
        name = _MODULES[api]
    except (KeyError, TypeError):
        raise InvalidArgumentError(f"unknown api {api!r}; use one of: {', '.join(APIS)}") from None
    return importlib.import_module(name)


def parse_response(
    api: str, body: bytes | str, *, content_type: str, status: int = 200
) -> AssistantMessage:
    """The normalized assistant message for a recorded response body of ``api``.

    ``body`` is a whole JSON body, a whole SSE body or AWS event-stream bytes, as sent with
    ``content_type``; a ``status`` outside 2xx gives ``stop_reason="error"`` with the
    provider's message. It runs the same parser the live adapter streams through.
    """
    message: AssistantMessage = _module(api).parse_response(
        body, content_type=content_type, status=status
    )
    return message


def tool_choice_fields(
    api: str, tool_choice: ToolChoice, parallel_tool_calls: bool | None = None
) -> dict[str, Any]:
    """The request-body fields ``api``'s adapter sends for ``tool_choice`` (``"auto"``,
    ``"required"``, ``"none"`` or ``{"type": "function", "name": X}``) and
    ``parallel_tool_calls`` (``None``: the API's default)."""
    fields: dict[str, Any] = _module(api).tool_choice_fields(tool_choice, parallel_tool_calls)
    return fields
