"""Helpers for the wire server tests: the scripted replies every SDK test plays, and the
tool each client offers."""

from __future__ import annotations

from typing import Any

TEXT = "Tides follow the moon, and the sun pulls a little too."
"""Long enough to stream in several pieces (24 characters each)."""

CALL_ARGS = {"q": "tides near Brest", "limit": 3}

# One reply with a tool call (and thinking), then a text-only reply.
TOOL_TURN: dict[str, Any] = {
    "thinking": "I should search first.",
    "tool_calls": [{"search": CALL_ARGS}],
    "usage": {"input": 11, "output": 7},
}
TEXT_TURN: dict[str, Any] = {"text": TEXT, "usage": {"input": 20, "output": 12}}

SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["q"],
}


def turns(n: int) -> list[dict[str, Any]]:
    """``n`` pairs of (tool call, text) replies."""
    return [TOOL_TURN, TEXT_TURN] * n
