"""What the adapters send: every recorded request body carries ``tool_choice`` and
``parallel_tool_calls`` as the adapter's mapping (``tool_choice_fields``) says, on every
round, and offers the same tools the scripted model was offered."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from wire_support import MODE_IDS, MODES, make_provider, search_tool

from openprogram import Runtime, ToolRegistry
from openprogram.providers import tool_choice_fields
from openprogram_sim.models import ScriptedModel, ScriptedRequest
from openprogram_sim.play import arun_scenario, build_model
from openprogram_sim.scenario import discover, load_scenario
from openprogram_sim.wire import APIS, ScriptedWire, WireRequest

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"
SCENARIO_FILES = [
    *discover([LIBRARY / "tool_choice"]),
    LIBRARY / "nested/nested_own_tools.yaml",
    LIBRARY / "nested/nested_tools_empty.yaml",
    LIBRARY / "toolsets/toolset_none.yaml",
    LIBRARY / "steering/after_tool_skips_remaining.yaml",
]


def choice_fields(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """The tool-choice part of a request body, in the shape ``tool_choice_fields`` uses."""
    if api in ("openai-chat", "openai-responses"):
        return {k: body[k] for k in ("tool_choice", "parallel_tool_calls") if k in body}
    if api == "anthropic":
        return {"tool_choice": body["tool_choice"]} if "tool_choice" in body else {}
    if api == "gemini":
        return {"toolConfig": body["toolConfig"]} if "toolConfig" in body else {}
    config = body.get("toolConfig")
    return {"toolConfig": {"toolChoice": config["toolChoice"]}} if config else {}


def tool_names(api: str, body: dict[str, Any]) -> list[str]:
    if api == "openai-chat":
        return [t["function"]["name"] for t in body.get("tools", [])]
    if api in ("openai-responses", "anthropic"):
        return [t["name"] for t in body.get("tools", [])]
    if api == "gemini":
        return [d["name"] for t in body.get("tools", []) for d in t["functionDeclarations"]]
    return [t["toolSpec"]["name"] for t in (body.get("toolConfig") or {}).get("tools", [])]


def check_request(api: str, sent: WireRequest, seen: ScriptedRequest) -> None:
    """``sent`` (what the adapter put on the wire) matches ``seen`` (what the loop asked
    the scripted model for on the same call)."""
    body = sent.body
    assert isinstance(body, dict)
    expected = (
        tool_choice_fields(api, seen.tool_choice, seen.parallel_tool_calls) if seen.tools else {}
    )
    assert choice_fields(api, body) == expected, f"call #{sent.index}"
    offered = seen.tools
    if api == "bedrock" and seen.tool_choice == "none":
        offered = []  # Converse has no "none": the adapter sends no toolConfig at all
    assert tool_names(api, body) == offered, f"call #{sent.index}"


async def _run(path: Path, api: str, stream: bool) -> tuple[ScriptedModel, ScriptedWire]:
    scenario = load_scenario(path)
    model = build_model(scenario)
    await arun_scenario(scenario, model)
    wire = ScriptedWire(build_model(scenario).turns)
    provider = make_provider(api, wire, stream=stream)
    try:
        await arun_scenario(scenario, provider)
    finally:
        await provider.client.aclose()
    return model, wire


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
@pytest.mark.parametrize(("api", "stream"), MODES, ids=MODE_IDS)
def test_scenario_requests_carry_the_mapped_tool_choice(path: Path, api: str, stream: bool) -> None:
    model, wire = asyncio.run(_run(path, api, stream))
    assert wire.errors == []
    assert len(wire.requests) == len(model.requests) > 0
    for sent, seen in zip(wire.requests, model.requests, strict=True):
        check_request(api, sent, seen)


CHOICES: list[Any] = ["auto", "required", "none", {"type": "function", "name": "search"}]


def _search(q: str) -> str:
    return f"results for {q}"


SEARCH = search_tool(_search)
OTHER = {
    "spec": {"name": "other", "description": "Other.", "parameters": {"type": "object"}},
    "execute": lambda: "other",
}


@pytest.mark.parametrize("parallel", [None, True, False])
@pytest.mark.parametrize("choice", CHOICES, ids=lambda c: c if isinstance(c, str) else "forced")
@pytest.mark.parametrize("api", APIS)
def test_every_round_carries_the_mapped_tool_choice(api: str, choice: Any, parallel: Any) -> None:
    turns: list[Any] = (
        ["No tools for me."]
        if choice == "none"
        else [{"tool_calls": [{"search": {"q": "a"}}]}, "Done."]
    )

    async def run() -> tuple[ScriptedModel, ScriptedWire]:
        model = ScriptedModel(turns)
        await Runtime(provider=model, registry=ToolRegistry()).aexec(
            "Go.", tools=[SEARCH, OTHER], tool_choice=choice, parallel_tool_calls=parallel
        )
        wire = ScriptedWire(turns)
        provider = make_provider(api, wire, stream=True)
        try:
            await Runtime(provider=provider, registry=ToolRegistry()).aexec(
                "Go.", tools=[SEARCH, OTHER], tool_choice=choice, parallel_tool_calls=parallel
            )
        finally:
            await provider.client.aclose()
        return model, wire

    model, wire = asyncio.run(run())
    wire.assert_consumed()
    assert len(wire.requests) == len(turns)
    for sent, seen in zip(wire.requests, model.requests, strict=True):
        check_request(api, sent, seen)
    # Spot-check the raw shapes too, so a wrong mapping table cannot pass unnoticed.
    body = wire.requests[0].body
    if api == "anthropic" and parallel is False and choice != "none":
        assert body["tool_choice"]["disable_parallel_tool_use"] is True
    if api == "openai-chat" and isinstance(choice, dict):
        assert body["tool_choice"] == {"type": "function", "function": {"name": "search"}}
    if api == "gemini" and choice == "required":
        assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    if api == "bedrock" and choice == "none":
        assert "toolConfig" not in body
