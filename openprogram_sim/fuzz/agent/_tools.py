"""The tools an agent declares, read from its first request in each API's own shape."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DeclaredTool", "declared_tools"]


@dataclass(frozen=True, slots=True)
class DeclaredTool:
    """One tool as the agent offered it to the model."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    """Its JSON Schema (Gemini's OpenAPI types lower-cased)."""


def declared_tools(api: str, body: Any) -> list[DeclaredTool]:
    """The tools ``body`` (a request of ``api``, as the server names APIs) offers."""
    if not isinstance(body, Mapping):
        return []
    if api == "openai-chat":
        specs = [t.get("function") for t in _list(body.get("tools"))]
        return _each(specs, "parameters")
    if api == "openai-responses":
        return _each([t for t in _list(body.get("tools")) if t.get("type") == "function"],
                     "parameters")  # fmt: skip
    if api == "anthropic":
        return _each(_list(body.get("tools")), "input_schema")
    if api == "gemini":
        found = []
        for tool in _list(body.get("tools")):
            decls = tool.get("functionDeclarations") or tool.get("function_declarations")
            for d in _list(decls):
                schema = d.get("parametersJsonSchema") or d.get("parameters_json_schema")
                if schema is None:
                    schema = _openapi(d.get("parameters") or {})
                found.append(_tool(d, schema))
        return found
    if api == "bedrock":
        config = body.get("toolConfig")
        tools = _list(config.get("tools")) if isinstance(config, Mapping) else []
        specs = [t.get("toolSpec") for t in tools]
        return [
            _tool(s, (s.get("inputSchema") or {}).get("json") or {})
            for s in specs
            if isinstance(s, Mapping)
        ]
    return []


def _list(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _each(specs: list[Any], key: str) -> list[DeclaredTool]:
    return [_tool(s, s.get(key) or {}) for s in specs if isinstance(s, Mapping) and s.get("name")]


def _tool(spec: Mapping[str, Any], schema: Any) -> DeclaredTool:
    return DeclaredTool(
        name=str(spec.get("name")),
        description=str(spec.get("description") or ""),
        parameters=dict(schema) if isinstance(schema, Mapping) else {},
    )


def _openapi(schema: Any) -> Any:
    """Gemini's OpenAPI subset as JSON Schema: ``type: STRING`` -> ``string``."""
    if isinstance(schema, list):
        return [_openapi(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = value.lower()
        elif key in ("properties",) and isinstance(value, Mapping):
            out[key] = {k: _openapi(v) for k, v in value.items()}
        elif key in ("items", "anyOf"):
            out[key] = _openapi(value)
        elif key == "nullable":
            continue
        else:
            out[key] = value
    return out
