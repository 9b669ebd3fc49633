"""Reading a request body a client sent back into the fields ``expect.requests`` compares.

:func:`read_request` is the inverse of what the adapters send (``build_request`` and
``tool_choice_fields`` of each API), written against the wire shapes so it also reads what
other clients send (the official SDKs, other agent frameworks). It gives the same keys as
:func:`~openprogram_sim.play.request_to_dict`.

What HTTP cannot carry is read as follows:

* ``depth`` is 0 and ``round`` the request's number in its session: a server does not see
  which exec a call came from. Pick a request by ``call:`` when a client nests calls.
* ``tool_choice`` absent is ``"auto"`` (every API's default when tools are offered).
  Bedrock has no ``"none"``: such a request offers no tools and reads as ``tools: []``.
* ``parallel_tool_calls`` is ``None`` unless the body says so (OpenAI's
  ``parallel_tool_calls``, Anthropic's ``disable_parallel_tool_use``); Gemini and Bedrock
  have no such field.
* a tool result's ``is_error`` is read where the wire carries it (Anthropic ``is_error``,
  Gemini ``response.error``, Bedrock ``status``); OpenAI's tool messages carry none, so
  the key is left out. Its ``tool_name`` comes from the call it answers.
* a tool result's ``text`` is what the tool returned, however the client wrapped it:
  Gemini's ``response`` of ``{"output": X}``, ``{"error": X}`` or google-genai's
  ``{"result": X}`` reads as X, a string as it is, any other value (and Bedrock's
  ``{"json": ...}`` content) as JSON that keeps non-ASCII characters (``°``, not
  ``\\u00b0``).
* thinking is not a message field, and tool calls a client sent as text (a request
  without tools) stay text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["read_messages", "read_request"]


def read_request(api: str, body: Any, *, index: int) -> dict[str, Any]:
    """The ``expect.requests`` fields of request ``index`` (from 1) of ``api``."""
    body = body if isinstance(body, dict) else {}
    reader = _READERS[api]
    tools, choice, parallel, system, full = reader(body)
    messages = [_public(m) for m in full]
    return {
        "call": index,
        "depth": 0,
        "round": index,
        "tools": tools,
        "tool_choice": choice,
        "parallel_tool_calls": parallel,
        "system_prompt": system,
        "message_count": len(messages),
        "last_message": messages[-1] if messages else None,
        "messages": messages,
    }


def read_messages(api: str, body: Any) -> list[dict[str, Any]]:
    """The messages of a request body as :func:`read_request` reads them, with the ids
    that tie a result to its call: each assistant call's ``id`` and each tool result's
    ``tool_call_id`` (``None`` where the wire sends none: Gemini without ids)."""
    return _READERS[api](body if isinstance(body, dict) else {})[4]


def _public(message: dict[str, Any]) -> dict[str, Any]:
    """A message without the ids (``expect.requests`` compares none)."""
    out = {k: v for k, v in message.items() if k != "tool_call_id"}
    if "tool_calls" in out:
        out["tool_calls"] = [{k: v for k, v in c.items() if k != "id"} for c in out["tool_calls"]]
    return out


Read = tuple[list[str], Any, bool | None, str, list[dict[str, Any]]]


# --------------------------------------------------------------------------- helpers


def _text(content: Any, kinds: Iterable[str] = ("text", "input_text", "output_text")) -> str:
    """The text of a content value: a string, or a list of typed parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    wanted = set(kinds)
    return "".join(
        str(p.get("text", ""))
        for p in content
        if isinstance(p, dict) and (p.get("type") in wanted or ("type" not in p and "text" in p))
    )


def _arguments(value: Any) -> Any:
    if not isinstance(value, str):
        return value if value is not None else {}
    if not value.strip():
        return {}
    try:
        return json.loads(value)
    except ValueError:
        return value  # malformed arguments travel as the model wrote them


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "text": text}


def _assistant(text: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "assistant", "text": text, "tool_calls": calls}


def _result(text: str, name: str | None, is_error: bool | None, call_id: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"role": "toolResult", "text": text, "tool_name": name}
    fields["tool_call_id"] = None if call_id is None else str(call_id)
    if is_error is not None:
        fields["is_error"] = is_error
    return fields


def _names(specs: Any, name_of: Callable[[dict[str, Any]], Any]) -> list[str]:
    if not isinstance(specs, list):
        return []
    names = (name_of(s) for s in specs if isinstance(s, dict))
    return [str(n) for n in names if n]


def _openai_choice(value: Any) -> Any:
    if value is None:
        return "auto"
    if isinstance(value, dict):
        name = value.get("name") or (value.get("function") or {}).get("name")
        return {"type": "function", "name": name} if name else value
    return value


# --------------------------------------------------------------------------- OpenAI Chat


def _read_openai_chat(body: dict[str, Any]) -> Read:
    tools = _names(body.get("tools"), lambda t: (t.get("function") or {}).get("name"))
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    names: dict[str, Any] = {}
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(_text(m.get("content")))
        elif role == "user":
            messages.append(_user(_text(m.get("content"))))
        elif role == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                fn = c.get("function") or {}
                names[str(c.get("id"))] = fn.get("name")
                args = _arguments(fn.get("arguments"))
                calls.append({"name": fn.get("name"), "arguments": args, "id": c.get("id")})
            messages.append(_assistant(_text(m.get("content")), calls))
        elif role == "tool":
            call_id = m.get("tool_call_id")
            name = names.get(str(call_id))
            messages.append(_result(_text(m.get("content")), name, None, call_id))
    parallel = body.get("parallel_tool_calls")
    return tools, _openai_choice(body.get("tool_choice")), parallel, "\n".join(system), messages


# --------------------------------------------------------------------------- OpenAI Responses


def _read_openai_responses(body: dict[str, Any]) -> Read:
    tools = _names(body.get("tools"), lambda t: t.get("name"))
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw or []
    system = [str(body["instructions"])] if body.get("instructions") else []
    messages: list[dict[str, Any]] = []
    names: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        role = item.get("role")
        if kind == "message" and role in ("system", "developer"):
            system.append(_text(item.get("content")))
        elif kind == "message" and role == "user":
            messages.append(_user(_text(item.get("content"))))
        elif kind == "message" and role == "assistant":
            _open_assistant(messages)["text"] += _text(item.get("content"))
        elif kind == "function_call":
            names[str(item.get("call_id"))] = item.get("name")
            args = _arguments(item.get("arguments"))
            call = {"name": item.get("name"), "arguments": args, "id": item.get("call_id")}
            _open_assistant(messages)["tool_calls"].append(call)
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            name = names.get(str(call_id))
            messages.append(_result(_text(item.get("output")), name, None, call_id))
    parallel = body.get("parallel_tool_calls")
    return tools, _openai_choice(body.get("tool_choice")), parallel, "\n".join(system), messages


def _open_assistant(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message the next output item belongs to (items of one reply follow
    each other; anything else in between starts a new reply)."""
    if not messages or messages[-1]["role"] != "assistant":
        messages.append(_assistant("", []))
    return messages[-1]


# --------------------------------------------------------------------------- Anthropic


def _read_anthropic(body: dict[str, Any]) -> Read:
    tools = _names(body.get("tools"), lambda t: t.get("name"))
    raw = body.get("tool_choice")
    choice: Any = "auto"
    parallel: bool | None = None
    if isinstance(raw, dict):
        kind = raw.get("type")
        modes = {"auto": "auto", "any": "required", "none": "none"}
        choice = (
            {"type": "function", "name": raw.get("name")}
            if kind == "tool"
            else modes.get(str(kind), raw)
        )
        if raw.get("disable_parallel_tool_use") is True:
            parallel = False
    system = body.get("system")
    messages: list[dict[str, Any]] = []
    names: dict[str, Any] = {}
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if m.get("role") == "assistant":
            calls = []
            for b in blocks:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    names[str(b.get("id"))] = b.get("name")
                    args = b.get("input") or {}
                    calls.append({"name": b.get("name"), "arguments": args, "id": b.get("id")})
            messages.append(_assistant(_text(blocks, ("text",)), calls))
        else:
            messages.extend(_anthropic_user(blocks, names))
    return tools, choice, parallel, _text(system, ("text",)), messages


def _anthropic_user(blocks: list[Any], names: dict[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in blocks:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "tool_result":
            call_id = b.get("tool_use_id")
            name = names.get(str(call_id))
            text = _text(b.get("content"), ("text",))
            out.append(_result(text, name, bool(b.get("is_error")), call_id))
        elif b.get("type") == "text":
            if out and out[-1]["role"] == "user":
                out[-1]["text"] += b.get("text", "")
            else:
                out.append(_user(str(b.get("text", ""))))
    return out


# --------------------------------------------------------------------------- Gemini


def _read_gemini(body: dict[str, Any]) -> Read:
    declarations = [
        d
        for t in body.get("tools") or []
        if isinstance(t, dict)
        for d in t.get("functionDeclarations") or t.get("function_declarations") or []
    ]
    tools = _names(declarations, lambda d: d.get("name"))
    config = (body.get("toolConfig") or body.get("tool_config") or {}).get(
        "functionCallingConfig"
    ) or {}
    choice: Any = {"AUTO": "auto", "ANY": "required", "NONE": "none"}.get(
        str(config.get("mode", "AUTO")).upper(), "auto"
    )
    allowed = config.get("allowedFunctionNames") or config.get("allowed_function_names")
    if choice == "required" and isinstance(allowed, list) and len(allowed) == 1:
        choice = {"type": "function", "name": allowed[0]}
    system_raw = body.get("systemInstruction") or body.get("system_instruction") or {}
    system = _text(system_raw.get("parts") if isinstance(system_raw, dict) else system_raw)
    messages: list[dict[str, Any]] = []
    for content in body.get("contents") or []:
        if isinstance(content, dict):
            messages.extend(_gemini_content(content))
    return tools, choice, None, system, messages


def _gemini_content(content: dict[str, Any]) -> list[dict[str, Any]]:
    parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
    if content.get("role") == "model":
        calls = []
        for p in parts:
            call = p.get("functionCall") or p.get("function_call")
            if call:
                args = call.get("args") or {}
                calls.append({"name": call.get("name"), "arguments": args, "id": call.get("id")})
        text = "".join(str(p.get("text", "")) for p in parts if not p.get("thought"))
        return [_assistant(text, calls)]
    out: list[dict[str, Any]] = []
    for p in parts:
        reply = p.get("functionResponse") or p.get("function_response")
        if reply:
            text, failed = _gemini_response(reply.get("response") or {})
            out.append(_result(text, reply.get("name"), failed, reply.get("id")))
        elif "text" in p:
            if out and out[-1]["role"] == "user":
                out[-1]["text"] += str(p["text"])
            else:
                out.append(_user(str(p["text"])))
    return out


def _gemini_response(response: Any) -> tuple[str, bool]:
    """A ``functionResponse.response`` as ``(text, is_error)``, read the way each client
    writes it: ``{"output": X}`` and ``{"error": X}`` (the API's documented keys, our
    adapter's), ``{"result": X}`` (google-genai's automatic function calling, its MCP
    adapter); X a string is that text, else its JSON. Any other object is the output as a
    whole (as the API reads it), in JSON."""
    if not isinstance(response, dict):
        return _json_text(response), False
    if "output" in response:
        return _json_text(response["output"]), False
    if "error" in response:
        return _json_text(response["error"]), True
    if "result" in response and len(response) == 1:
        return _json_text(response["result"]), False
    return _json_text(response), False


def _json_text(value: Any) -> str:
    """A tool result's value as text: a string as it is, a list of text parts (an MCP
    result) as their text, anything else as JSON with its characters kept (no ``\\u00b0``
    for ``°``), so an exact ``text:`` matches what the tool returned."""
    if isinstance(value, str):
        return value
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, dict) and v.get("type") == "text" for v in value)
    ):
        return _text(value, ("text",))
    return json.dumps(value, ensure_ascii=False)


# --------------------------------------------------------------------------- Bedrock


def _read_bedrock(body: dict[str, Any]) -> Read:
    config = body.get("toolConfig") or {}
    tools = _names(config.get("tools"), lambda t: (t.get("toolSpec") or {}).get("name"))
    raw = config.get("toolChoice") or {}
    choice: Any = "auto"
    if "any" in raw:
        choice = "required"
    elif "tool" in raw:
        choice = {"type": "function", "name": (raw.get("tool") or {}).get("name")}
    system = "\n".join(
        str(s["text"]) for s in body.get("system") or [] if isinstance(s, dict) and "text" in s
    )
    messages: list[dict[str, Any]] = []
    names: dict[str, Any] = {}
    for m in body.get("messages") or []:
        if isinstance(m, dict):
            messages.extend(_bedrock_message(m, names))
    return tools, choice, None, system, messages


def _bedrock_message(m: dict[str, Any], names: dict[str, str]) -> list[dict[str, Any]]:
    blocks = [b for b in m.get("content") or [] if isinstance(b, dict)]
    if m.get("role") == "assistant":
        calls = []
        for b in blocks:
            use = b.get("toolUse")
            if use:
                names[str(use.get("toolUseId"))] = use.get("name")
                args = use.get("input") or {}
                calls.append(
                    {"name": use.get("name"), "arguments": args, "id": use.get("toolUseId")}
                )
        return [_assistant("".join(str(b["text"]) for b in blocks if "text" in b), calls)]
    out: list[dict[str, Any]] = []
    for b in blocks:
        result = b.get("toolResult")
        if result:
            text = "".join(
                str(c.get("text", "")) if "text" in c else _json_text(c.get("json"))
                for c in result.get("content") or []
                if isinstance(c, dict)
            )
            call_id = result.get("toolUseId")
            name = names.get(str(call_id))
            out.append(_result(text, name, result.get("status") == "error", call_id))
        elif "text" in b:
            if out and out[-1]["role"] == "user":
                out[-1]["text"] += str(b["text"])
            else:
                out.append(_user(str(b["text"])))
    return out


_READERS: dict[str, Callable[[dict[str, Any]], Read]] = {
    "openai-chat": _read_openai_chat,
    "openai-responses": _read_openai_responses,
    "anthropic": _read_anthropic,
    "gemini": _read_gemini,
    "bedrock": _read_bedrock,
}
