"""The agent under test: a command run as a subprocess, or a Python function called in
process, pointed at one served session and given a bounded time.

A command gets the session's base URLs and a placeholder key in the variables each
official SDK reads (:func:`agent_env`); a function ``fn(endpoints)`` gets the same as an
:class:`AgentEndpoints` (sync or ``async``; what it returns is not checked). Either way
one run ends as an :class:`AgentRun`: it finished, it failed (a non-zero exit status, an
exception raised), or it timed out (a command's process group is killed; a function's
thread cannot be, and is left to end on its own).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import shlex
import signal
import subprocess
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from openprogram_sim.scenario import PythonRefError, import_ref, import_roots

__all__ = [
    "PLACEHOLDER_KEY",
    "AgentEndpoints",
    "AgentError",
    "AgentRun",
    "AgentTarget",
    "agent_env",
]

PLACEHOLDER_KEY = "openprogram-sim" + "-placeholder"
"""The API key every agent is given (the server ignores it; ``no_key_in_body`` checks the
agent does not copy it into a request body)."""

_FUNCTION_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

Outcome = Literal["ok", "failed", "timeout"]


class AgentError(ValueError):
    """The agent cannot be fuzzed as given: a command that does not start, an import path
    that fails, an agent that never sends a request (the message says which and why)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentEndpoints:
    """Where an in-process agent (``--agent module:function``) finds the scripted model:
    one session's base URLs, as each official SDK takes them, and the placeholder key.

    Args:
        openai: ``openai.OpenAI(base_url=...)`` (ends in ``/v1``).
        anthropic: ``anthropic.Anthropic(base_url=...)`` (the root).
        gemini: google-genai's ``http_options={"base_url": ...}`` (the root).
        bedrock: boto3's ``endpoint_url`` for ``bedrock-runtime`` (the root).
        api_key: the placeholder key.
        env: the variables a command agent is given (:func:`agent_env`), for code that
            reads its configuration from the environment.
    """

    openai: str
    anthropic: str
    gemini: str
    bedrock: str
    api_key: str = PLACEHOLDER_KEY
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of_session(cls, server: Any, session: str) -> AgentEndpoints:
        """Session ``session``'s URLs on ``server`` (a :class:`~openprogram_sim.wire.
        WireServer`), with the variables a command would get."""
        urls = {api: server.base_url(api, session=session)
                for api in ("openai", "anthropic", "gemini", "bedrock")}  # fmt: skip
        return cls(**urls, env=agent_env(**urls))


def agent_env(openai: str, anthropic: str, gemini: str, bedrock: str) -> dict[str, str]:
    """The variables a command agent gets (on top of the campaign's own environment): each
    SDK's base URL variable and a placeholder key in each key variable, so no real key from
    the environment is sent (``GOOGLE_API_KEY`` too: google-genai prefers it to
    ``GEMINI_API_KEY``), and placeholder AWS credentials, which boto3 needs to sign."""
    key = PLACEHOLDER_KEY
    return {
        "OPENAI_BASE_URL": openai,
        "OPENAI_API_KEY": key,
        "ANTHROPIC_BASE_URL": anthropic,
        "ANTHROPIC_API_KEY": key,
        "GOOGLE_GEMINI_BASE_URL": gemini,
        "GEMINI_API_KEY": key,
        "GOOGLE_API_KEY": key,
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": bedrock,
        "AWS_ACCESS_KEY_ID": "openprogram-sim",
        "AWS_SECRET_ACCESS_KEY": key,
        "AWS_REGION": "us-east-1",
    }


@dataclass(slots=True, kw_only=True)
class AgentRun:
    """How one run of the agent ended."""

    outcome: Outcome
    seconds: float
    status: int | None = None
    """A command's exit status (None: killed at the timeout, or a function)."""
    detail: str = ""
    """The last lines of a command's stderr, or the exception a function raised."""

    def violation(self, timeout: float) -> str | None:
        """The finding this run is, in one line (None: it finished)."""
        if self.outcome == "ok":
            return None
        if self.outcome == "timeout":
            return f"the agent did not finish within {timeout:g} s (--timeout)"
        what = (
            f"the agent exited with status {self.status}"
            if self.status is not None
            else "the agent raised"
        )
        last = self.detail.strip().splitlines()[-1:] if self.detail.strip() else []
        return what + (f": {last[0].strip()}" if last else "")

    @property
    def label(self) -> str:
        """How it ended, for the summary: ``finished``, ``exit N``, ``raised``, ``timed out``."""
        if self.outcome == "ok":
            return "finished"
        if self.outcome == "timeout":
            return "timed out"
        return f"exit {self.status}" if self.status is not None else "raised"


class AgentTarget:
    """The agent ``--agent`` names: a command (``"python my_agent.py"``) or, when the value
    is shaped like ``package.module:function`` (no spaces), that function, imported from
    the current directory and ``pythonpath``."""

    def __init__(
        self,
        spec: str,
        *,
        command: list[str] | None = None,
        function: Callable[[AgentEndpoints], Any] | None = None,
        cwd: str | None = None,
    ) -> None:
        self.spec = spec
        self.command = command
        self.function = function
        self.cwd = cwd

    @classmethod
    def load(
        cls,
        spec: str | Callable[[AgentEndpoints], Any] | AgentTarget,
        *,
        pythonpath: Sequence[str | Path] = (),
    ) -> AgentTarget:
        """The target ``spec`` names (a command line, ``package.module:function``, or the
        function itself); raises :class:`AgentError` naming what is wrong."""
        if isinstance(spec, AgentTarget):
            return spec
        if callable(spec):
            name = getattr(spec, "__qualname__", type(spec).__name__)
            return cls(f"{getattr(spec, '__module__', '?')}:{name}", function=spec)
        text = spec.strip()
        if not text:
            raise AgentError("--agent is empty: give a command (\"python agent.py\") or a "
                             "Python function (package.module:function)")  # fmt: skip
        if _FUNCTION_REF.match(text):
            try:
                value = import_ref(text, import_roots(None, pythonpath))
            except PythonRefError as exc:
                raise AgentError(f"--agent {text}: {exc}") from None
            if not callable(value):
                raise AgentError(
                    f"--agent {text} is a {type(value).__name__}, not a function: give "
                    "one that takes the endpoints (def agent(endpoints): ...)"
                )
            return cls(text, function=value)
        try:
            argv = shlex.split(text)
        except ValueError as exc:
            raise AgentError(f"--agent {text!r} is not a command line: {exc}") from None
        return cls(text, command=argv)

    @property
    def in_process(self) -> bool:
        return self.function is not None

    @property
    def label(self) -> str:
        return f"function {self.spec}" if self.in_process else f"command {self.spec!r}"

    def run(self, endpoints: AgentEndpoints, timeout: float) -> AgentRun:
        """Run the agent once against ``endpoints``; a command that cannot start raises
        :class:`AgentError`."""
        if self.function is not None:
            return _call(self.function, endpoints, timeout)
        assert self.command is not None
        return _spawn(self.command, endpoints, timeout, self.spec, self.cwd)


def _spawn(
    argv: list[str], endpoints: AgentEndpoints, timeout: float, spec: str, cwd: str | None
) -> AgentRun:
    env = {**os.environ, **endpoints.env}
    start = time.perf_counter()
    try:
        process = subprocess.Popen(
            argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        raise AgentError(
            f"--agent {spec!r} cannot be started: {exc.strerror or exc} ({argv[0]!r}); give "
            'a command found on PATH or a path to a program, e.g. "python agent.py"'
        ) from None
    try:
        _, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(process)
        _, err = process.communicate()
        return AgentRun(outcome="timeout", seconds=time.perf_counter() - start,
                        detail=_tail(err))  # fmt: skip
    except BaseException:  # Ctrl-C: its own process group does not get the terminal's
        _kill(process)
        process.wait()
        raise
    seconds = time.perf_counter() - start
    status = process.returncode
    return AgentRun(outcome="ok" if status == 0 else "failed", seconds=seconds,
                    status=status, detail=_tail(err))  # fmt: skip


def _kill(process: subprocess.Popen[bytes]) -> None:
    """The command and whatever it started (its own process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def _tail(err: bytes | None, lines: int = 12) -> str:
    text = (err or b"").decode("utf-8", "replace")
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _call(
    function: Callable[[AgentEndpoints], Any], endpoints: AgentEndpoints, timeout: float
) -> AgentRun:
    box: dict[str, BaseException] = {}

    def body() -> None:
        try:
            value = function(endpoints)
            if inspect.isawaitable(value):
                asyncio.run(_awaited(value))
        except BaseException as exc:  # the agent's failure is the finding
            box["error"] = exc

    start = time.perf_counter()
    thread = threading.Thread(target=body, daemon=True, name="openprogram-sim fuzz agent")
    thread.start()
    thread.join(timeout)
    seconds = time.perf_counter() - start
    if thread.is_alive():
        return AgentRun(outcome="timeout", seconds=seconds)
    error = box.get("error")
    if error is None:
        return AgentRun(outcome="ok", seconds=seconds)
    detail = "".join(traceback.format_exception(error)).rstrip()
    return AgentRun(outcome="failed", seconds=seconds, detail=detail)


async def _awaited(value: Any) -> Any:
    return await value
