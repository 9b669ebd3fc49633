"""Models whose turns are computed, not listed: :class:`FunctionModel` (from the
request) and :class:`AutoModel` (every offered tool once, arguments from its schema)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from openprogram_sim.models._scripted import ScriptedModel, ScriptedRequest
from openprogram_sim.models._turns import Turn, TurnToolCall

__all__ = ["AutoModel", "FunctionModel", "TurnSource", "example_arguments", "example_value"]

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
