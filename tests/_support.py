"""Shared test helpers: run an exec and read its trace compactly; run the CLI in-process."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openprogram import Runtime, ToolRegistry
from openprogram_sim.models import ScriptedModel
from openprogram_sim.trace import TraceRecorder

ONE_SEARCH = (Path(__file__).parent / "sim" / "data" / "one_search.yaml").read_text()
"""A scenario file that passes: the model calls ``search`` once, then answers "Found."."""


def compact(trace: list[dict[str, Any]], *, rounds: bool = False, depth: bool = False) -> list[str]:
    """One short string per trace entry, for asserting whole event sequences."""
    out = []
    for e in trace:
        t = e["type"]
        if t in ("message_start", "message_end"):
            s = f"{t}:{e['role']}"
            if t == "message_end" and e["role"] == "assistant":
                s += f"[{','.join(e['tool_calls'])}]/{e['stop_reason']}"
        elif t == "tool_execution_start":
            s = f"tool_start:{e['tool_name']}"
        elif t == "tool_execution_end":
            s = f"tool_end:{e['tool_name']}:{'error' if e['is_error'] else 'ok'}"
        elif t == "agent_end":
            s = f"agent_end:{e['reason']}"
        else:
            s = t
        if rounds:
            s += f"@{e['round']}"
        if depth:
            s = "  " * e["depth"] + s
        out.append(s)
    return out


# Runs of ``compact`` entries that many expected sequences share, so that a test spells out
# only what is its own. Each is spliced into a whole-sequence assertion (``[*OPENING, ...]``).
OPENING = [
    "agent_start",
    "turn_start",
    "message_start:user",
    "message_end:user",
    "message_start:assistant",
]
"""From ``agent_start`` to the first reply's ``message_start``: the prompt in turn 1."""

OPENING_IN_ROUNDS = [f"{e}@{0 if e == 'agent_start' else 1}" for e in OPENING]
""":data:`OPENING` as ``compact(trace, rounds=True)`` shows it."""

LAST_TURN_STOPS = [
    "turn_end",
    "turn_start",
    "message_start:assistant",
    "message_end:assistant[]/stop",
    "turn_end",
    "agent_end:stop",
]
"""A turn of tool results ends; the next turn's text reply ends the run."""


def one_call(name: str) -> list[str]:
    """From the reply that calls ``name`` (once, and it succeeds) to its result's
    ``message_end``, in ``compact(trace)`` form."""
    return [
        f"message_end:assistant[{name}]/toolUse",
        f"tool_start:{name}",
        f"tool_end:{name}:ok",
        "message_start:toolResult",
        "message_end:toolResult",
    ]


def tool_round_then_stop(name: str) -> list[str]:
    """In ``compact(trace, rounds=True)`` form: round 1's reply calls ``name`` once and it
    succeeds, then round 2's text reply ends the run."""
    return [
        *(f"{e}@1" for e in one_call(name)),
        *[f"{e}@{1 if i == 0 else 2}" for i, e in enumerate(LAST_TURN_STOPS)],
    ]


def ended_by_first_reply(reason: str) -> list[str]:
    """The whole sequence of a run whose first reply stops with ``reason`` (``error``,
    ``aborted``): no tool call, and ``agent_end`` gives the same reason."""
    return [*OPENING, f"message_end:assistant[]/{reason}", "turn_end", f"agent_end:{reason}"]


def tool(
    name: str, fn: Any, properties: dict[str, Any] | None = None, required: list[str] | None = None
) -> dict[str, Any]:
    """A ``{"spec", "execute"}`` tool entry."""
    params: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        params["required"] = required
    return {
        "spec": {"name": name, "description": f"{name} tool", "parameters": params},
        "execute": fn,
    }


def aborting_tools(
    ran: list[str], abort: Callable[[], None], names: tuple[str, str] = ("first", "second")
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two tools that append their name to ``ran`` when they run: the first calls ``abort()``
    and returns ``"aborting"``; the second, called after it, must not run once aborted."""

    def first() -> str:
        ran.append(names[0])
        abort()
        return "aborting"

    def second() -> str:
        ran.append(names[1])
        return "should not run"

    return tool(names[0], first), tool(names[1], second)


def make_runtime(turns: list[Any], **kwargs: Any) -> tuple[Runtime, ScriptedModel, TraceRecorder]:
    model = ScriptedModel(turns, **kwargs)
    runtime = Runtime(provider=model, registry=ToolRegistry())
    rec = TraceRecorder()
    runtime.subscribe(rec)
    return runtime, model, rec


@dataclass(frozen=True, slots=True)
class CliResult:
    """What ``openprogram-sim ARGS`` did: the names of :class:`subprocess.CompletedProcess`."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, cwd: Path | None = None) -> CliResult:
    """``openprogram-sim ARGS`` in this process: ``main(argv)`` from ``cwd``, its exit status
    (argparse's ``SystemExit`` too) and what it printed.

    Much faster than a process, and as a user sees it for everything but the process itself:
    keep a real process for signals (a run's SIGALRM deadline, Ctrl-C), coverage.py (pytest-cov
    owns the tracer here) and the installed console script (the smoke tests). The user's own
    modules the run imported from folders it put on ``sys.path`` are forgotten afterwards, so
    the next test's ``tools.py`` is its own."""
    from openprogram_sim.cli import main

    out, err = io.StringIO(), io.StringIO()
    path, modules = list(sys.path), set(sys.modules)
    try:
        with (
            contextlib.chdir(cwd or Path.cwd()),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse: usage errors and --help
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        _forget_user_modules(path, modules)
    return CliResult(code, out.getvalue(), err.getvalue())


def _forget_user_modules(path: list[str], modules: set[str]) -> None:
    """Restore ``sys.path`` and drop the modules imported from the folders added to it."""
    added = [os.path.join(p, "") for p in sys.path if p not in path]
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        file = getattr(sys.modules[name], "__file__", None) or ""
        ours = name.partition(".")[0] in ("openprogram", "openprogram_sim")  # repo root added
        if not ours and file.startswith(tuple(added)):
            del sys.modules[name]
