"""A shrunk failing session as a scenario file that ``openprogram-sim serve`` replays against
the same agent, and the replay itself.

The file holds the script the agent was served (``model:``, its ``wire:`` faults
included), the client checks as the campaign ran them (``wire:``), and the user's rules
the session broke (``expect.properties`` / ``expect.trajectory``). Nothing in it is copied
from what the agent did: served to a correct agent every turn is requested, the client
checks hold and the rules too, so the file passes; the buggy agent breaks it again. Its
header (YAML comments) says how to replay it.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openprogram_sim.cassettes._atomic import atomic_write
from openprogram_sim.fuzz._regression import regression_text
from openprogram_sim.fuzz.agent._target import AgentEndpoints, AgentRun, AgentTarget, agent_env
from openprogram_sim.wire import ClientChecks, ServeReport, WireServer

__all__ = [
    "REPLAY_PORT",
    "REPLAY_SESSION",
    "Replay",
    "endpoints",
    "replay",
    "write_agent_regression",
]

REPLAY_PORT = 8124
REPLAY_SESSION = "replay"
_KILL = "#   kill -INT %1   # serve's report: exit status 1 while the bug is there, 0 when fixed"


def endpoints(server: WireServer, session: str) -> AgentEndpoints:
    """Session ``session``'s base URLs on ``server``, as an agent is given them."""
    return AgentEndpoints.of_session(server, session)


def _header(target: AgentTarget, seed: int, file: str, limit: float | None) -> str:
    """How to replay the file; ``limit``: the agent timed out, so it is run under that many
    seconds (``serve`` has no time limit: an agent stopped early leaves turns unrequested,
    which it reports)."""
    root = f"http://127.0.0.1:{REPLAY_PORT}/s/{REPLAY_SESSION}"
    env = agent_env(f"{root}/v1", root, root, root)
    if target.in_process:
        within = f", timeout={limit:g}" if limit is not None else ""
        run = (
            f'python -c "from openprogram_sim.fuzz.agent import replay; '
            f"raise SystemExit(replay('{file}', '{target.spec}'{within}).exit_status)\""
        )
        how = [
            "# Replay it against your function (serves this file as serve does, calls it on one",
            "# session, prints serve's report; exit status 1 while the bug is there):",
            f"#   {run}",
            "# or serve it and point your function at the session's URLs by hand:",
            f"#   openprogram-sim serve {file} --port {REPLAY_PORT} &",
            f"#   ...  {target.spec}(AgentEndpoints(openai='{root}/v1', anthropic='{root}', ...))",
            _KILL,
        ]
    else:
        variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        within = f"timeout {limit:g} " if limit is not None else ""
        how = [
            "# Replay it against the same agent:",
            f"#   openprogram-sim serve {file} --port {REPLAY_PORT} &",
            f"#   env {variables} \\",
            f"#     {within}{target.spec}",
            _KILL,
        ]
    if limit is not None:
        how.append(f"# (the agent did not finish within {limit:g} s: give it that long, as above)")
    return "\n".join(
        [f"# Found by openprogram-sim fuzz --agent {shlex.quote(target.spec)} --seed {seed},",
         "# shrunk to the turns below.", *how, ""]
    )  # fmt: skip


def _title(violation: str, limit: int = 72) -> str:
    text = violation.split(": ")[0] if violation.startswith("client check") else violation
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


def regression_document(
    turns: list[dict[str, Any]],
    violations: list[str],
    *,
    seed: int,
    checks: ClientChecks,
    broken: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The scenario file's content: the script served, the client checks, the rules."""
    lines = "\n".join(f"- {v}" for v in violations)
    document: dict[str, Any] = {
        "scenario": f"agent fuzz regression: {_title(violations[0])}",
        "description": (
            f"Found and shrunk by `openprogram-sim fuzz --agent` with seed {seed}. What broke:\n"
            f"{lines}\nServe it to the agent (see the header): a correct agent requests every "
            "turn, keeps the client checks"
            + (" and the properties below" if broken else "")
            + ", so the file passes; the bug fails it."
        ),
        "tags": ["regression", "fuzz", "agent"],
        "exec": {"content": "(served to your agent: see the header)"},
        "model": turns,
    }
    wire: dict[str, Any] = {}
    if checks.off:
        wire["checks"] = {name: False for name in sorted(checks.off)}
    if checks.max_retries is not None:
        wire["max_retries"] = checks.max_retries
    if wire:
        document["wire"] = wire
    document["expect"] = dict(broken or {})
    return document


def write_agent_regression(
    directory: str | Path,
    document: dict[str, Any],
    target: AgentTarget,
    seed: int,
    *,
    limit: float | None = None,
) -> Path:
    """Write ``document`` under ``directory`` (named by a digest of its content) with the
    header that says how to replay it (``limit``: under that many seconds, for an agent
    that timed out), atomically; returns its path."""
    body = regression_text(document)
    digest = hashlib.sha256(body.encode()).hexdigest()[:10]
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fuzz_agent_{digest}.yaml"
    atomic_write(path, _header(target, seed, str(path), limit) + body, mode=0o644)
    return path


@dataclass(slots=True)
class Replay:
    """A regression file served to an agent: serve's report on its session and how the
    agent's run ended."""

    report: ServeReport
    run: AgentRun

    @property
    def passed(self) -> bool:
        return self.report.passed

    @property
    def exit_status(self) -> int:
        """What ``openprogram-sim serve`` exits with on this session: 1 on any failure."""
        return 0 if self.report.passed else 1


def replay(
    path: str | Path,
    agent: AgentTarget | str,
    *,
    timeout: float = 30.0,
    pythonpath: tuple[str, ...] = (),
    show: bool = True,
) -> Replay:
    """Serve the scenario file at ``path`` as ``openprogram-sim serve`` does (its script,
    its ``expect.trajectory`` and ``expect.properties`` and the client checks on the
    session), run ``agent`` (an :class:`AgentTarget`, or what ``--agent`` takes) once on
    one session, and return serve's report on it (printed when ``show``)."""
    from openprogram_sim.play import serve_scenario

    target = agent if isinstance(agent, AgentTarget) else AgentTarget.load(
        agent, pythonpath=pythonpath
    )  # fmt: skip
    with serve_scenario(path, session_ttl=None) as server:
        run = target.run(endpoints(server, REPLAY_SESSION), timeout)
        report = server.check(REPLAY_SESSION)
    if show:
        verdict = "PASS" if report.passed else f"FAIL {len(report.failures)} problem(s)"
        print(f"{path}: {verdict} (the agent: {run.label})")
        if not report.passed:
            print(report.render())
    return Replay(report=report, run=run)
