"""A provider with no network: plays scripted assistant turns as real stream events.

Example::

    model = ScriptedModel([
        {"tool_calls": [{"search": {"q": "a"}}]},
        {"text": "found it"},
    ])
    runtime = Runtime(provider=model)

Each turn is streamed the way a real provider streams: ``start``; text and thinking in
chunks; each tool call's arguments as partial JSON text; then ``done`` (or ``error`` for an
``error``/``aborted`` stop). Every request is recorded in :attr:`ScriptedModel.requests`.
A call beyond the script raises :class:`ScriptExhaustedError` naming the request.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from openprogram.events import ProviderEvent
from openprogram.providers.base import Context, StreamOptions, ToolChoice
from openprogram.providers.builder import MessageBuilder
from openprogram.tools import ToolSpec
from openprogram.types import AnyMessage, Usage
from openprogram_sim.clock import VirtualClock

__all__ = [
    "ScriptExhaustedError",
    "ScriptedFault",
    "ScriptedModel",
    "ScriptedRequest",
    "Turn",
    "TurnToolCall",
]


class ScriptExhaustedError(AssertionError):
    """The loop asked the model for more turns than the script has."""


class ScriptedFault(RuntimeError):
    """Raised by a turn with ``fault: raise``: a provider that crashes mid-stream."""


@dataclass(slots=True)
class TurnToolCall:
    name: str
    arguments: Any = field(default_factory=dict)
    """A dict (sent as JSON) or a string (sent verbatim, e.g. to test malformed JSON)."""
    id: str | None = None
    json_text: str = field(init=False, repr=False, compare=False)
    """The arguments as the JSON text streamed (computed once)."""

    def __post_init__(self) -> None:
        raw = self.arguments
        self.json_text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)


@dataclass(slots=True)
class Turn:
    """One scripted model reply."""

    text: str | None = None
    thinking: str | None = None
    tool_calls: list[TurnToolCall] = field(default_factory=list)
    stop_reason: Literal["stop", "length", "toolUse", "error", "aborted"] | None = None
    """Defaults to ``toolUse`` with tool calls, else ``stop``."""
    error: str | None = None
    """The provider's error text for an ``error``/``aborted`` stop."""
    usage: Usage | None = None
    latency: float = 0.0
    """Seconds the reply takes, on the model's virtual clock (no real waiting)."""
    fault: Literal["truncate", "raise", "hang"] | None = None
    """Misbehave after streaming the body: ``truncate`` ends the stream without a final
    event, ``raise`` raises ``ScriptedFault`` (with ``error`` as its text), ``hang`` waits
    until the run is aborted."""

    @classmethod
    def coerce(cls, value: Turn | Mapping[str, Any] | str) -> Turn:
        """A Turn from a Turn, a bare string (text) or a dict with the same keys; tool calls
        may be ``{name: args}`` or ``{"name": ..., "arguments": ..., "id": ...}``."""
        if isinstance(value, Turn):
            return value
        if isinstance(value, str):
            return cls(text=value)
        if not isinstance(value, Mapping):
            raise TypeError(f"a scripted turn must be a Turn, a str or a dict, got {value!r}")
        unknown = set(value) - set(_TURN_KEYS)
        if unknown:
            raise ValueError(
                f"unknown key(s) {sorted(unknown)} in scripted turn {dict(value)!r}; allowed: "
                f"{', '.join(_TURN_KEYS)}"
            )
        usage = value.get("usage")
        return cls(
            text=value.get("text"),
            thinking=value.get("thinking"),
            tool_calls=[_coerce_call(c) for c in value.get("tool_calls") or []],
            stop_reason=value.get("stop_reason"),
            error=value.get("error"),
            usage=Usage(**usage) if isinstance(usage, Mapping) else usage,
            fault=value.get("fault"),
            latency=float(value.get("latency", 0.0)),
        )


_TURN_KEYS = (
    "text",
    "thinking",
    "tool_calls",
    "stop_reason",
    "error",
    "usage",
    "fault",
    "latency",
)


def _coerce_call(value: Any) -> TurnToolCall:
    if isinstance(value, TurnToolCall):
        return value
    if isinstance(value, Mapping) and "name" in value:
        return TurnToolCall(value["name"], value.get("arguments", {}), value.get("id"))
    if isinstance(value, Mapping) and len(value) == 1:
        ((name, args),) = value.items()
        return TurnToolCall(str(name), {} if args is None else args)
    raise ValueError(
        f"scripted tool call {value!r} must be {{name: arguments}} or "
        '{"name": ..., "arguments": ..., "id": ...}'
    )


@dataclass(slots=True)
class ScriptedRequest:
    """What the model was sent on one call."""

    index: int
    """Call number across the whole script, from 1."""
    depth: int
    round: int
    messages: list[AnyMessage]
    tools: list[str]
    tool_specs: list[ToolSpec]
    tool_choice: ToolChoice
    parallel_tool_calls: bool | None
    system_prompt: str


def _chunks(text: str, size: int) -> Iterable[str]:
    if size <= 0 or len(text) <= size:
        yield text
        return
    for i in range(0, len(text), size):
        yield text[i : i + size]


class ScriptedModel:
    """A :class:`~openprogram.providers.Provider` that plays ``turns`` in call order,
    across nesting levels."""

    api = "scripted"

    def __init__(
        self,
        turns: Iterable[Turn | Mapping[str, Any] | str] = (),
        *,
        chunk_size: int = 24,
        model: str = "scripted",
        clock: VirtualClock | None = None,
    ) -> None:
        self.turns: list[Turn] = [Turn.coerce(t) for t in turns]
        self.chunk_size = chunk_size
        self.model = model
        self.requests: list[ScriptedRequest] = []
        self.clock = clock if clock is not None else VirtualClock()
        self._next_id = 0

    @property
    def calls(self) -> int:
        return len(self.requests)

    @property
    def unconsumed(self) -> list[Turn]:
        """Turns never played."""
        return self.turns[len(self.requests) :]

    def assert_consumed(self) -> None:
        if self.unconsumed:
            raise AssertionError(
                f"ScriptedModel: {len(self.unconsumed)} of {len(self.turns)} scripted turns "
                f"were never requested (the model was called {self.calls} times)"
            )

    def _record(self, context: Context, options: StreamOptions) -> ScriptedRequest:
        request = ScriptedRequest(
            len(self.requests) + 1,
            options.depth,
            options.round,
            list(context.messages),
            [t.name for t in context.tools],
            list(context.tools),
            options.tool_choice,
            options.parallel_tool_calls,
            context.system_prompt,
        )
        self.requests.append(request)
        return request

    def _turn_for(self, request: ScriptedRequest) -> Turn:
        if request.index > len(self.turns):
            last = request.messages[-1] if request.messages else None
            raise ScriptExhaustedError(
                f"ScriptedModel: model call #{request.index} (depth {request.depth}, round "
                f"{request.round}) has no scripted turn; the script has {len(self.turns)}. "
                f"Last message sent: {_describe(last)}. Add a turn to the script, or lower "
                "max_iterations."
            )
        return self.turns[request.index - 1]

    def _call_id(self) -> str:
        self._next_id += 1
        return f"call_{self._next_id}"

    def _next_turn(self, request: ScriptedRequest) -> Turn | Awaitable[Turn]:
        """The turn for ``request`` (subclasses may return an awaitable)."""
        return self._turn_for(request)

    async def stream(
        self, context: Context, options: StreamOptions
    ) -> AsyncIterator[ProviderEvent]:
        request = self._record(context, options)
        next_turn = self._next_turn(request)
        turn = next_turn if isinstance(next_turn, Turn) else await next_turn
        b = MessageBuilder(api=self.api, model=self.model)
        cancel = options.cancel
        if turn.latency:
            await self.clock.sleep(turn.latency)
        yield b.start()
        for event in self._body(b, turn):
            if cancel is not None and cancel.is_set():
                yield b.error("Request was aborted", aborted=True)
                return
            yield event
        if turn.fault is not None:
            if turn.fault == "raise":
                raise ScriptedFault(turn.error or "scripted provider crashed")
            if turn.fault == "hang" and cancel is not None:
                await cancel.wait()
                yield b.error("Request was aborted", aborted=True)
            return
        if turn.stop_reason in ("error", "aborted"):
            yield b.error(
                turn.error or f"scripted {turn.stop_reason}",
                aborted=turn.stop_reason == "aborted",
                usage=turn.usage,
            )
            return
        reason = turn.stop_reason if turn.stop_reason in ("stop", "length", "toolUse") else None
        yield b.done(reason, usage=turn.usage or Usage())

    def _body(self, b: MessageBuilder, turn: Turn) -> Iterable[ProviderEvent]:
        size = self.chunk_size
        if turn.thinking:
            yield b.thinking_start()
            for piece in _chunks(turn.thinking, size):
                yield b.thinking_delta(piece)
            yield b.thinking_end()
        if turn.text:
            yield b.text_start()
            for piece in _chunks(turn.text, size):
                yield b.text_delta(piece)
            yield b.text_end()
        for call in turn.tool_calls:
            yield b.toolcall_start(call.id or self._call_id(), call.name)
            for piece in _chunks(call.json_text, size):
                yield b.toolcall_delta(piece)
            yield b.toolcall_end()


def _describe(message: AnyMessage | None) -> str:
    if message is None:
        return "nothing"
    text = getattr(message, "text", "")
    text = text if len(text) <= 80 else text[:77] + "..."
    return f"{message.role} {text!r}"


TurnSource = Callable[[ScriptedRequest], "Turn | Mapping[str, Any] | str | Awaitable[Any]"]


class FunctionModel(ScriptedModel):
    """A model whose next turn is computed from the request: ``fn(request)`` returns a
    :class:`Turn`, a dict or a string (sync or async). For tests that react to what was
    sent::

        def reply(request):
            if request.round == 1:
                return {"tool_calls": [{"search": {"q": request.messages[0].text}}]}
            return f"saw {len(request.messages)} messages"

        runtime = Runtime(provider=FunctionModel(reply))
    """

    def __init__(self, fn: TurnSource, *, chunk_size: int = 24, model: str = "function") -> None:
        super().__init__((), chunk_size=chunk_size, model=model)
        self.fn = fn

    @property
    def unconsumed(self) -> list[Turn]:
        return []

    async def _compute_turn(self, request: ScriptedRequest) -> Turn:
        value = self.fn(request)
        if inspect.isawaitable(value):
            value = await value
        turn = Turn.coerce(value)
        self.turns.append(turn)
        return turn

    def _next_turn(self, request: ScriptedRequest) -> Awaitable[Turn]:
        return self._compute_turn(request)


class AutoModel(ScriptedModel):
    """A smoke-test model: on its first call it calls every offered tool once, with
    arguments built from each tool's schema; after that it answers with text. Each tool
    is called at most once per model (so tools that nest exec terminate)."""

    def __init__(self, *, final_text: str = "All tools called.", chunk_size: int = 24) -> None:
        super().__init__((), chunk_size=chunk_size, model="auto")
        self.final_text = final_text
        self.called: list[str] = []

    @property
    def unconsumed(self) -> list[Turn]:
        return []

    def _next_turn(self, request: ScriptedRequest) -> Turn:
        fresh = [s for s in request.tool_specs if s.name not in self.called]
        if fresh:
            self.called.extend(s.name for s in fresh)
            calls = [TurnToolCall(s.name, example_arguments(s.parameters)) for s in fresh]
            turn = Turn(tool_calls=calls)
        else:
            turn = Turn(text=self.final_text)
        self.turns.append(turn)
        return turn


def example_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A small valid arguments object for ``schema`` (required properties filled)."""
    value = example_value(schema)
    return value if isinstance(value, dict) else {}


def example_value(schema: Any) -> Any:  # noqa: C901 - one branch per JSON Schema type
    """A deterministic valid value for a JSON Schema (the common keywords)."""
    if not isinstance(schema, Mapping):
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return example_value(schema[key][0])
    kind = schema.get("type", "object" if "properties" in schema else None)
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties") or {}
        required = schema.get("required") or list(props)
        return {k: example_value(props.get(k, {})) for k in required if k in props}
    if kind == "array":
        return [example_value(schema.get("items", {})) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        return "x" * max(1, int(schema.get("minLength", 1)))
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1.0))
    if kind == "boolean":
        return True
    return None
