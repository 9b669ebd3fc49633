"""Distill: a cassette turned into a scenario that runs on the scripted model, the
editable, provider-independent form of a recorded session.

Each recorded response becomes a model turn, read by the adapter's own parser
(:func:`openprogram.providers.parse_response`): text, thinking, tool calls with their ids,
the stop reason, an error's text and details, usage. The tool results the session sent
back become each tool's ``returns:`` list, in call order (``{$error: text}`` where the wire
says the result was an error). The exec arguments come from the first request: the prompt,
the system prompt, the tools offered with their schemas, ``tool_choice`` and
``parallel_tool_calls``.

With the scenario the session was recorded from, its own ``exec:``/``call:``, tools,
steering and ``expect:`` are kept and ``model:`` is replaced, so nested exec, steering and
``raises:`` tools come out as they were. The user's real tools (``python:`` entries and the
tools of ``registry:``) are stubbed with what they returned in the session: each keeps its
spec and gates from the code and gets ``returns:``, so the file runs offline, as the
session went, whatever the code or the services behind it do now (``real_tools=True``
leaves them running). An ``@agentic_function`` stays real (the session's turns hold its
nested runs), and so does a tool already stubbed or one the session never called.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from openprogram.providers import parse_response
from openprogram.types import AssistantMessage, ThinkingContent
from openprogram_sim.cassettes._format import SERIALIZER
from openprogram_sim.cassettes._match import body_of
from openprogram_sim.cassettes._persist import Persister
from openprogram_sim.errors import CassetteError

__all__ = ["distill", "distill_yaml"]


def _interactions(path: Path) -> tuple[list[tuple[Any, dict[str, Any]]], dict[str, Any]]:
    loaded = Persister().load_cassette(path, SERIALIZER)
    requests, responses = loaded[0], loaded[1]
    metadata = loaded[2] if len(loaded) > 2 else {}
    return list(zip(requests, responses, strict=True)), metadata


def _route(request: Any) -> tuple[str, bool] | None:
    from openprogram_sim.wire import route

    return route(request.path, body_of(request.body))


def turn_of(message: AssistantMessage) -> dict[str, Any]:
    """A recorded reply as a scenario turn."""
    turn: dict[str, Any] = {}
    if message.text:
        turn["text"] = message.text
    thinking = "".join(b.thinking for b in message.content if isinstance(b, ThinkingContent))
    if thinking:
        turn["thinking"] = thinking
    if message.tool_calls:
        turn["tool_calls"] = [
            {"name": c.name, "arguments": c.arguments, "id": c.id} for c in message.tool_calls
        ]
    default = "toolUse" if message.tool_calls else "stop"
    if message.stop_reason != default:
        turn["stop_reason"] = message.stop_reason
    if message.error_message is not None:
        turn["error"] = message.error_message
    details = message.error_details
    if message.stop_reason == "error" and details is not None:
        turn["error_reason"] = details.reason
        turn["retryable"] = details.retryable
        if details.retry_after is not None:
            turn["retry_after"] = details.retry_after
    usage = {
        k: getattr(message.usage, k)
        for k in ("input", "output", "cache_read", "cache_write", "reasoning")
        if getattr(message.usage, k, 0)
    }
    if usage:
        turn["usage"] = usage
    return turn


def _reply(api: str, response: dict[str, Any]) -> AssistantMessage:
    headers = {
        k.lower(): v[0] if isinstance(v, list) else v for k, v in response["headers"].items()
    }
    return parse_response(
        api,
        response["body"]["string"] or b"",
        content_type=str(headers.get("content-type", "")),
        status=int(response["status"]["code"]),
    )


def _tool_specs(api: str, body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tools a request offered: name -> description and JSON Schema."""
    specs: dict[str, dict[str, Any]] = {}

    def add(name: Any, description: Any, parameters: Any) -> None:
        if name:
            specs[str(name)] = {
                "description": str(description or ""),
                "parameters": parameters or {"type": "object", "properties": {}},
            }

    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if api == "openai-chat":
            fn = tool.get("function") or {}
            add(fn.get("name"), fn.get("description"), fn.get("parameters"))
        elif api == "openai-responses":
            add(tool.get("name"), tool.get("description"), tool.get("parameters"))
        elif api == "anthropic":
            add(tool.get("name"), tool.get("description"), tool.get("input_schema"))
        elif api == "gemini":
            for d in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
                schema = d.get("parametersJsonSchema") or d.get("parameters_json_schema")
                add(d.get("name"), d.get("description"), schema or d.get("parameters"))
    if api == "bedrock":
        for tool in (body.get("toolConfig") or {}).get("tools") or []:
            spec = tool.get("toolSpec") or {}
            add(
                spec.get("name"),
                spec.get("description"),
                (spec.get("inputSchema") or {}).get("json"),
            )
    return specs


def _results(api: str, requests: list[Any]) -> dict[str, list[Any]]:
    """Each tool's results as the session sent them back, in call order."""
    from openprogram_sim.wire import read_request

    returns: dict[str, list[Any]] = {}
    for i, request in enumerate(requests[1:], start=2):
        messages = read_request(api, body_of(request.body), index=i)["messages"]
        last = max((k for k, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
        for m in messages[last + 1 :]:
            if m["role"] == "toolResult" and m.get("tool_name"):
                value = {"$error": m["text"]} if m.get("is_error") else m["text"]
                returns.setdefault(str(m["tool_name"]), []).append(value)
    return returns


def _exec_of(api: str, first: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The scenario's top level (``system_prompt``, ``history``, ``exec``, ``tools``) from
    the first request."""
    from openprogram_sim.wire import read_request

    body = body_of(first.body)
    read = read_request(api, body, index=1)
    messages = read["messages"]
    content = messages[-1]["text"] if messages and messages[-1]["role"] == "user" else ""
    top: dict[str, Any] = {}
    if read["system_prompt"]:
        top["system_prompt"] = read["system_prompt"]
    history = [
        {"role": m["role"], "text": m["text"]}
        for m in messages[:-1]
        if m["role"] in ("user", "assistant") and not m.get("tool_calls")
    ]
    if history:
        top["history"] = history
    exec_args: dict[str, Any] = {"content": content, "tools": list(read["tools"])}
    if read["tool_choice"] not in (None, "auto"):
        exec_args["tool_choice"] = read["tool_choice"]
    if read["parallel_tool_calls"] is not None:
        exec_args["parallel_tool_calls"] = read["parallel_tool_calls"]
    return top, {
        "exec": exec_args,
        "specs": _tool_specs(api, body if isinstance(body, dict) else {}),
    }


def distill(
    cassette: str | Path, *, scenario: str | Path | None = None, real_tools: bool = False
) -> dict[str, Any]:
    """The scenario (as data) for ``cassette``; ``scenario`` is the file it was recorded
    from, whose own keys are kept, its real tools stubbed with what they returned unless
    ``real_tools`` (see the module docstring)."""
    return _distilled(Path(cassette), scenario, real_tools)[0]


def _distilled(
    path: Path, scenario: str | Path | None, real_tools: bool
) -> tuple[dict[str, Any], list[str]]:
    interactions, metadata = _interactions(path)
    info = metadata.get("openprogram") if isinstance(metadata, dict) else None
    # an eval sample's judge asked after the run: its calls are not the run's turns
    judge = (info or {}).get("judge") if isinstance(info, dict) else None
    judged = {int(i) - 1 for i in ((judge or {}).get("interactions") or ())}
    calls = [
        (req, resp, routed)
        for k, (req, resp) in enumerate(interactions)
        if k not in judged and (routed := _route(req)) is not None
    ]
    if not calls:
        raise CassetteError(f"cassette {path}: no model call recorded in it (nothing to distill)")
    api = calls[0][2][0]
    turns = [turn_of(_reply(routed[0], resp)) for _, resp, routed in calls]
    returns = _results(api, [req for req, _, _ in calls])
    if scenario is not None:
        return _onto_scenario(Path(scenario), turns, returns, real_tools)
    top, found = _exec_of(api, calls[0][0])
    model = (info or {}).get("model") or api
    tools = {}
    for name, spec in found["specs"].items():
        tool = dict(spec)
        values = returns.get(name)
        if values:
            tool["returns"] = values if len(values) > 1 else values[0]
        tools[name] = tool
    data = {
        "scenario": f"distilled from {path.name} ({model})",
        **top,
        "tools": tools,
        "exec": found["exec"],
        "model": turns,
    }
    return data, []


def _onto_scenario(
    source: Path, turns: list[dict[str, Any]], returns: dict[str, list[Any]], real_tools: bool
) -> tuple[dict[str, Any], list[str]]:
    """The scenario file's data with the recorded turns, and the real tools it stubbed."""
    from openprogram_sim.scenario import load_scenario

    scenario = load_scenario(source)  # the file is valid (errors name its lines)
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    data["model"] = turns
    stubbed: list[str] = []
    if real_tools:
        return dict(data), stubbed
    tools: dict[str, Any] = data.get("tools") or {}
    for name, ref, obj in _real_tools(scenario):
        values = returns.get(name)
        entry: dict[str, Any] = tools.get(name) or {"python": ref}
        if not values or not entry.get("python") or getattr(obj, "agentic", False):
            continue  # never called, no import path to stub it by, or it runs nested turns
        if any(key in entry for key in _STUBS):
            continue  # already stubbed
        entry["returns"] = values if len(values) > 1 else values[0]
        tools[name] = entry
        stubbed.append(name)
    if tools:
        data["tools"] = tools
    return dict(data), stubbed


_STUBS = ("returns", "raises", "outcomes")


def _real_tools(scenario: Any) -> list[tuple[str, str, Any]]:
    """``(name, import path or "", object)`` of each real tool the scenario runs: its
    ``python:`` entries, then the tools of its ``registry:`` it does not name itself."""
    from openprogram_sim.scenario import ref_of, resolve_python

    # the run's own import, with its checks (stdlib callables refused, names known)
    objects = resolve_python(scenario)
    found = [
        (name, str(spec.python), objects[str(spec.python)])
        for name, spec in scenario.tools.items()
        if spec.python is not None
    ]
    if scenario.registry:
        for tool in objects[scenario.registry].tools():
            if tool.name not in scenario.tools:
                source = tool.source or tool
                found.append((tool.name, ref_of(source) or "", source))
    return found


def distill_yaml(
    cassette: str | Path, *, scenario: str | Path | None = None, real_tools: bool = False
) -> str:
    """:func:`distill` as scenario YAML, with a header saying where it came from and which
    of the user's tools it stubbed."""
    data, stubbed = _distilled(Path(cassette), scenario, real_tools)
    head = (
        f"# distilled from the cassette {Path(cassette).as_posix()} by openprogram-sim distill:\n"
        "# the recorded replies as scripted turns, the tool results as the tools returned\n"
        "# them; it runs on the scripted model with the trace of the cassette's replay.\n"
    )
    if stubbed:
        head += (
            f"# Your tools {', '.join(stubbed)} return what they returned in the session\n"
            "# (returns:); distill --real-tools leaves them running.\n"
        )
    if "expect" not in data:
        head += "# Add expect: (result, events, requests) to pin the behaviour down.\n"
    return head + yaml.safe_dump(
        json.loads(json.dumps(data)), sort_keys=False, allow_unicode=True, width=100
    )
