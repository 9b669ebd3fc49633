"""Content blocks, messages, usage, stop reasons and tool specs.

These are plain slotted dataclasses: the engine builds them on the hot path without
re-validating what it made itself. Validation happens only at the edges, when JSON from
outside comes in (:func:`message_from_json`, :func:`message_from_dict`), through one
pydantic adapter per union.

Example::

    >>> msg = AssistantMessage(content=[TextContent("hi")])
    >>> message_from_json(message_to_json(msg)) == msg
    True
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter

from openprogram.errors import ToolEntryError, ToolSchemaError

__all__ = [
    "AnyMessage",
    "AssistantContent",
    "AssistantMessage",
    "ContentBlock",
    "ErrorDetails",
    "ErrorReason",
    "ImageContent",
    "Message",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolResultContent",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserContent",
    "UserMessage",
    "message_from_dict",
    "message_from_json",
    "message_to_dict",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
    "now_ms",
]

StopReason: TypeAlias = Literal["stop", "length", "toolUse", "error", "aborted"]
"""Why the model stopped: ``stop`` (finished), ``length`` (token limit), ``toolUse`` (it
picked tools), ``error`` (the provider failed) or ``aborted`` (the run was cancelled)."""


def now_ms() -> int:
    """Wall-clock time in milliseconds, the unit of every ``timestamp`` field."""
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class TextContent:
    """A block of visible text."""

    text: str
    """The text itself."""
    type: Literal["text"] = "text"
    signature: str | None = None
    """Provider-specific opaque signature (e.g. OpenAI Responses item id), echoed back."""


@dataclass(slots=True)
class ThinkingContent:
    """The model's reasoning, when the provider exposes it."""

    thinking: str
    """The reasoning text ("" for redacted reasoning)."""
    type: Literal["thinking"] = "thinking"
    signature: str | None = None
    """Opaque signature some providers require to be sent back unchanged."""
    redacted: bool = False
    """True when the provider sent encrypted/redacted reasoning with no readable text."""


@dataclass(slots=True)
class ImageContent:
    """An image, base64-encoded."""

    data: str
    """Base64 image bytes."""
    mime_type: str
    """e.g. ``image/png``."""
    type: Literal["image"] = "image"


@dataclass(slots=True)
class ToolCall:
    """The model picked a function: call ``name`` with ``arguments``."""

    id: str
    """Provider-assigned id; the tool result quotes it."""
    name: str
    """The tool's name as the model wrote it (it may name no existing tool)."""
    arguments: Any = field(default_factory=dict)
    """Normally a JSON object (dict). Anything else (a list, a string that did not parse as
    JSON) is kept as received so the loop can tell the model its arguments were malformed."""
    type: Literal["toolCall"] = "toolCall"
    signature: str | None = None
    """Provider-specific opaque data (Gemini thought signature, Responses item id)."""


ContentBlock: TypeAlias = Annotated[
    TextContent | ThinkingContent | ImageContent | ToolCall, Field(discriminator="type")
]
UserContent: TypeAlias = Annotated[TextContent | ImageContent, Field(discriminator="type")]
AssistantContent: TypeAlias = Annotated[
    TextContent | ThinkingContent | ToolCall, Field(discriminator="type")
]
ToolResultContent: TypeAlias = Annotated[TextContent | ImageContent, Field(discriminator="type")]


@dataclass(slots=True)
class Usage:
    """Token counts for one model call. ``input`` excludes tokens read from cache."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.reasoning + other.reasoning,
        )


ErrorReason: TypeAlias = Literal[
    "rate_limit",
    "overloaded",
    "server",
    "auth",
    "invalid_request",
    "timeout",
    "network",
    "stream",
    "other",
]
"""Why a model call failed: ``rate_limit`` (too many requests, or a spent quota),
``overloaded`` (the provider is busy: Anthropic 529, HTTP 503), ``server`` (a 5xx or the
provider's own failure), ``auth`` (the key was refused), ``invalid_request`` (the provider
rejected the request: fix it rather than retry), ``timeout``, ``network`` (no answer: the
connection failed or dropped), ``stream`` (an answer came but could not be read as a
reply: cut short, corrupt, empty) or ``other``."""


@dataclass(slots=True, kw_only=True)
class ErrorDetails:
    """What the provider said about a failed call, for deciding whether and when to retry.

    Set by the provider adapters on every ``stop_reason="error"`` message; kept in the
    message's JSON; never sent to a provider.

    Example::

        >>> ErrorDetails(reason="rate_limit", status=429, retryable=True, retry_after=17.0)
        ErrorDetails(reason='rate_limit', status=429, retryable=True, retry_after=17.0)
    """

    reason: ErrorReason
    """The kind of failure, from a closed vocabulary (:data:`ErrorReason`)."""
    status: int | None = None
    """The HTTP status of a non-2xx answer; ``None`` when the failure came inside a 2xx
    answer or no answer came at all."""
    retryable: bool = False
    """Whether the same request may succeed later (rate limits, overload, 5xx, timeouts,
    dropped connections), unless the provider said otherwise (``x-should-retry``)."""
    retry_after: float | None = None
    """Seconds the provider asked to wait (``retry-after-ms``, ``retry-after``, Anthropic's
    rate-limit reset headers, Gemini's ``RetryInfo``); ``None`` when it did not say."""


@dataclass(slots=True)
class UserMessage:
    """A message from the user (the prompt, a steering or a follow-up message)."""

    content: list[UserContent]
    role: Literal["user"] = "user"
    timestamp: int = 0

    @classmethod
    def of(cls, text: str) -> UserMessage:
        """A user message holding one text block."""
        return cls([TextContent(text)], timestamp=now_ms())

    @property
    def text(self) -> str:
        content = self.content
        if len(content) == 1:  # the common case: one block, no generator
            block = content[0]
            return block.text if isinstance(block, TextContent) else ""
        return "".join(b.text for b in content if isinstance(b, TextContent))


@dataclass(slots=True)
class AssistantMessage:
    """One reply of the model: text, thinking and tool calls, in the order produced."""

    content: list[AssistantContent] = field(default_factory=list)
    role: Literal["assistant"] = "assistant"
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    """Set when ``stop_reason`` is ``error`` or ``aborted``: what went wrong."""
    usage: Usage = field(default_factory=Usage)
    api: str = ""
    """Which wire API produced it (``openai-chat``, ``anthropic``, ``scripted``...)."""
    model: str = ""
    timestamp: int = 0
    error_details: ErrorDetails | None = None
    """Set with ``stop_reason="error"`` by the provider adapters: the kind of failure, the
    HTTP status, whether a retry may help and when. Never sent to a provider."""

    @property
    def text(self) -> str:
        """The concatenated text blocks (thinking and tool calls excluded)."""
        content = self.content
        if len(content) == 1:  # the common reply: one block, no generator
            block = content[0]
            return block.text if isinstance(block, TextContent) else ""
        return "".join(b.text for b in content if isinstance(b, TextContent))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [b for b in self.content if isinstance(b, ToolCall)]


@dataclass(slots=True)
class ToolResultMessage:
    """The result of one tool call, fed back to the model."""

    tool_call_id: str
    tool_name: str
    content: list[ToolResultContent]
    is_error: bool = False
    details: Any = None
    """Structured data for the application; never sent to the model."""
    role: Literal["toolResult"] = "toolResult"
    timestamp: int = 0
    skipped: bool = False
    """True when the loop did not run the call: a steering message arrived mid-batch (the
    result is then an error saying so). Kept in the history and its JSON; never sent to the
    model."""

    @property
    def text(self) -> str:
        content = self.content
        if len(content) == 1:  # the common case: one block, no generator
            block = content[0]
            return block.text if isinstance(block, TextContent) else ""
        return "".join(b.text for b in content if isinstance(b, TextContent))


_EMPTY_PARAMS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(slots=True)
class ToolSpec:
    """What the model sees of a tool: the part of it a provider sends."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: dict(_EMPTY_PARAMS))
    """JSON Schema of the arguments object."""

    @classmethod
    def coerce(cls, spec: Any, *, entry: Any) -> ToolSpec:
        """``spec`` as a :class:`ToolSpec`: one as is, or a dict with a ``name`` (and
        ``parameters`` or ``input_schema``). ``entry`` is the tool entry it came from, named
        in the error."""
        if isinstance(spec, ToolSpec):
            return spec
        is_mapping = type(spec) is dict or isinstance(spec, Mapping)  # no ABC check for a dict
        if is_mapping and isinstance(spec.get("name"), str) and spec["name"]:
            params = spec.get("parameters", spec.get("input_schema", _EMPTY_PARAMS))
            if not isinstance(params, dict):
                raise ToolSchemaError(
                    f"tool {spec['name']!r}: 'parameters' must be a JSON Schema object (a dict), "
                    f"got {type(params).__name__}"
                )
            return cls(spec["name"], str(spec.get("description") or ""), params)
        raise ToolEntryError(
            f"tool entry {entry!r} has a spec without a name: give it a ToolSpec or a dict "
            "{'name': ..., 'description': ..., 'parameters': {...}}"
        )


Message: TypeAlias = Annotated[
    UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")
]

AnyMessage: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage
"""The plain union, for signatures (``Message`` carries the pydantic discriminator)."""

_MESSAGE = TypeAdapter(Message)
_MESSAGES = TypeAdapter(list[Message])


def message_to_dict(message: AnyMessage) -> dict[str, Any]:
    """A JSON-compatible dict of ``message``."""
    return _MESSAGE.dump_python(message, mode="json")  # type: ignore[no-any-return]


def message_from_dict(data: Any) -> AnyMessage:
    """Validate a dict (e.g. loaded from a file) into a message; raises pydantic's
    ``ValidationError`` naming the bad field."""
    return _MESSAGE.validate_python(data)


def message_to_json(message: AnyMessage) -> str:
    return _MESSAGE.dump_json(message).decode()


def message_from_json(text: str | bytes) -> AnyMessage:
    return _MESSAGE.validate_json(text)


def messages_to_json(messages: list[AnyMessage]) -> str:
    return _MESSAGES.dump_json(messages).decode()


def messages_from_json(text: str | bytes) -> list[AnyMessage]:
    return _MESSAGES.validate_json(text)
