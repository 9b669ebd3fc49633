"""Helpers for the wire server tests: the scripted replies every SDK test plays, and the
tool each client offers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
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


@contextmanager
def serve_process(scenario: Path, *extra: str) -> Iterator[subprocess.Popen[str]]:
    """``openprogram-sim serve SCENARIO --port 0 EXTRA...`` as a real process (Ctrl-C is
    what a user does), killed if a test leaves it running; its pipes closed either way (a
    test that fails mid-way leaves no open file for a later test's collection to find)."""
    command = [sys.executable, "-m", "openprogram_sim.cli", "serve", str(scenario), "--port", "0"]
    with subprocess.Popen(
        [*command, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as process:  # fmt: skip
        try:
            yield process
        finally:
            if process.poll() is None:
                process.kill()


def read_banner(process: subprocess.Popen[str]) -> tuple[str, list[str]]:
    """The server's URL and its eight-line banner."""
    banner = [process.stdout.readline() for _ in range(8)]  # type: ignore[union-attr]
    match = re.search(r"listening on (http://\S+)", banner[1])
    assert match, banner
    return match.group(1), banner


def interrupt(process: subprocess.Popen[str]) -> tuple[str, str]:
    """Ctrl-C, then what the server printed on stdout and stderr."""
    process.send_signal(signal.SIGINT)
    return process.communicate(timeout=20)
