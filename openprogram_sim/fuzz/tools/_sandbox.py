"""Running scenarios that call the user's tools in a child process, under a real-time limit.

A tool that hangs must not hang the campaign. The runner's own ``timeout:`` aborts a run
whose tool awaits forever, but a synchronous tool that blocks (``time.sleep``, a socket
without a timeout, a busy loop, a nested exec waiting on one) blocks the event loop that
would enforce it. So the runs happen in a child process: the parent sends a scenario,
waits at most the run's limit plus the runner's grace, and on silence kills the child,
reporting the hang with the call that was running (the child keeps the innermost running
call in a small marker file as calls start and end). The next run starts a new child; until
a tool breaks one (a hang past its limit, a crash, a broken pipe), one child serves every
run, and the campaign keeps it across chunks. Scenarios go to the child in batches
(:meth:`Sandbox.run_batch`): one message out, and one answer back per scenario as it ends,
so each run keeps its own limit and a batch stops at its first broken run. The child
keeps :func:`~openprogram_sim.play.run_scenario`'s SIGALRM deadline off (it
ignores SIGALRM): the kill also stops what that deadline cannot interrupt (C code, a tool
that swallows the interrupt), and names the call with its arguments.

In the child, the user's tools are probed (:mod:`openprogram_sim.fuzz.tools._probe`), each
run goes through the real runner (:func:`~openprogram_sim.play.run_scenario`), and the
loop's invariants and the tool contract (:mod:`openprogram_sim.fuzz.tools._contract`) are
checked there; only a small report comes back (the trace only when something broke). A
``BaseException`` a tool raises (``SystemExit``...) is caught around the run, and reported.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from openprogram import ToolRegistry
from openprogram.tools import Tool, as_tool
from openprogram_sim.fuzz._properties import UserProperties
from openprogram_sim.fuzz._results import Breach, CallRecord
from openprogram_sim.fuzz._stats import FuzzStats
from openprogram_sim.fuzz.tools._lines import LineTracer, tool_files
from openprogram_sim.fuzz.tools._probe import Probe
from openprogram_sim.fuzz.tools._target import ToolTarget
from openprogram_sim.play import GRACE_SECONDS as _RUNNER_GRACE

__all__ = ["RunReport", "Sandbox"]

MARKER_BYTES = 65536
"""The most the marker keeps of the running call (tool, id, depth and arguments, as JSON)."""

KILL_MARGIN = 1.0
"""Seconds the parent waits past the run's limit and the runner's own grace after it."""

STARTUP_SECONDS = 60.0
"""How long a new child may take to start and import the user's code."""

_CHILD = "import sys; from openprogram_sim.fuzz.tools._sandbox import main; main(sys.argv[1:])"


@dataclass(slots=True)
class RunReport:
    """What one run in the sandbox gave."""

    violations: list[str] = field(default_factory=list)
    """Broken invariants and contract clauses, one line each."""
    breaches: list[Breach] = field(default_factory=list)
    stats: FuzzStats | None = None
    trace: list[dict[str, Any]] = field(default_factory=list)
    """The run's trace (sent only when something broke)."""
    model_calls: int = 0
    lines: int = 0
    """Lines of the user's tool code the run executed (coverage-guided mode; else 0)."""
    new_lines: int = 0
    """Of those, lines no earlier run in this sandbox had reached."""
    killed: bool = False
    """The child did not answer within the limit (or died) and was killed."""
    passed: bool | None = None
    """For :meth:`Sandbox.verdict`: whether ``check_outcome`` passed."""
    failures: list[str] = field(default_factory=list)
    """For :meth:`Sandbox.verdict`: the titles of the expectations that failed."""


class Sandbox:
    """A child process that runs scenarios over ``target``'s tools (see the module
    docstring); use as a context manager, or call :meth:`close`.

    The child is a fresh ``python`` running :func:`main` (not a ``multiprocessing`` child,
    which would re-import the caller's main module), talking over a socket pair."""

    def __init__(
        self, target: ToolTarget, *, lines: bool = False, properties: UserProperties | None = None
    ) -> None:
        self.target = target
        self.lines = lines
        """Measure the lines of the tools' code each run executes (:mod:`._lines`)."""
        self.properties = properties or UserProperties()
        """The user's own properties, checked on each run with the invariants."""
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._marker: str | None = None
        self._fresh = False
        self.starts = 0
        """Children started (one, plus one after each kill)."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def start(self) -> Sandbox:
        """Start the child now (it imports the user's code while the caller goes on), unless
        it runs already; returns the sandbox."""
        self._start()
        return self

    def _start(self) -> Connection:
        if self._conn is not None and self._process is not None and self._process.poll() is None:
            return self._conn
        self._stop()
        fd, self._marker = tempfile.mkstemp(prefix="openprogram-fuzz-", suffix=".running")
        os.close(fd)
        ours, theirs = socket.socketpair()
        self._process = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(theirs.fileno()), self._marker],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self._conn = Connection(ours.detach())
        self._conn.send((self.target, list(sys.path), self.lines, self.properties))
        self._fresh = True
        self.starts += 1
        return self._conn

    def _stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(5)
        if self._conn is not None:
            self._conn.close()
        if self._marker is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._marker)
        self._process = self._conn = self._marker = None

    def close(self) -> None:
        if self._conn is not None and self._process is not None and self._process.poll() is None:
            with contextlib.suppress(OSError):
                self._conn.send(("close", None))
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(2)
        self._stop()

    def _ready(self, conn: Connection) -> None:
        """Wait for a new child to say it has imported the user's tools and is ready."""
        self._fresh = False
        try:
            if conn.poll(STARTUP_SECONDS) and conn.recv() == "ready":
                return
        except (EOFError, OSError):
            pass
        code = self._process.poll() if self._process is not None else None
        self._stop()
        raise RuntimeError(
            f"the fuzz sandbox did not start (exit code {code}; its error, if any, is above)"
        )

    def _send(self, message: tuple[str, Any]) -> Connection:
        """Send ``message`` to a ready child; a child found dead (a broken pipe: a tool's
        thread ended it between runs) is replaced once."""
        for attempt in (1, 2):
            conn = self._start()
            if self._fresh:
                self._ready(conn)
            try:
                conn.send(message)
                return conn
            except OSError:
                if attempt == 2:
                    raise
                self._stop()
        raise AssertionError("unreachable")

    def _answers(self, conn: Connection, datas: list[dict[str, Any]]) -> list[RunReport]:
        reports: list[RunReport] = []
        for data in datas:
            limit = float(data.get("timeout", 5.0))
            try:
                if conn.poll(limit + _RUNNER_GRACE + KILL_MARGIN):
                    answer, last = conn.recv()
                    if isinstance(answer, str):  # the sandbox itself failed: not the user's bug
                        raise RuntimeError(f"the fuzz sandbox failed:\n{answer}")
                    reports.append(answer)
                    if last:
                        break
                    continue
                how = "did not end"
            except (EOFError, OSError):
                how = "ended its process"
            reports.append(self._killed(how, limit))
            break
        return reports

    def _ask(self, kind: str, data: dict[str, Any], limit: float) -> RunReport:
        return self._answers(self._send((kind, [data])), [data])[0]

    def run_batch(self, datas: list[dict[str, Any]]) -> list[RunReport]:
        """Run the scenario dicts ``datas`` in order, checking invariants and the contract;
        the reports up to the first run that broke something (which is the last one)."""
        if not datas:
            return []
        return self._answers(self._send(("run", datas)), datas)

    def _killed(self, how: str, limit: float) -> RunReport:
        record = _read_marker(self._marker)
        if self._process is not None and how != "did not end":
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(5)
        exitcode = self._process.poll() if self._process is not None else None
        self._stop()
        what = f"{record.describe()} was running" if record else "no tool was running"
        if how == "did not end":
            message = (
                f"the run did not end within its time limit of {limit:g} s (real time): "
                f"{what} and blocked the event loop (the event loop's own limit could not "
                "stop it); its process was killed"
            )
        else:
            message = f"the run {how} (exit code {exitcode}) while {what}"
        breach = Breach("hangs" if how == "did not end" else "escapes", message, record,
                        blocked=True)  # fmt: skip
        return RunReport([message], [breach], killed=True)

    def run(self, data: dict[str, Any]) -> RunReport:
        """Run the scenario dict ``data``; check invariants and the contract."""
        return self.run_batch([data])[0]

    def verdict(self, data: dict[str, Any]) -> RunReport:
        """Run the scenario dict ``data`` and check it against its own ``expect:``."""
        return self._ask("verdict", data, float(data.get("timeout", 5.0)))


def _read_marker(path: str | None) -> CallRecord | None:
    if path is None:
        return None
    try:
        fields = json.loads(Path(path).read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None  # empty (no call running) or cut mid-write
    return CallRecord(fields["tool"], fields["call_id"], fields.get("args"), fields["depth"],
                      0.0)  # fmt: skip


# --------------------------------------------------------------------------- the child


def _marker_writer(fd: int) -> Any:
    """Keeps the running call in the marker file (JSON; empty when none runs). The file is
    written only when what it says changes (each run's reset and each call's end would
    otherwise write it empty again)."""
    shown: list[CallRecord | None] = [None]  # what the file says now (None: empty)

    def write(record: CallRecord | None) -> None:
        if record is shown[0]:
            return
        shown[0] = record
        text = b""
        if record is not None:
            fields = {"tool": record.tool, "call_id": record.call_id, "depth": record.depth}
            text = json.dumps({**fields, "args": record.args}, default=repr).encode("utf-8")
            if len(text) > MARKER_BYTES:  # arguments too large to keep: the call alone
                text = json.dumps(fields).encode("utf-8")
        os.ftruncate(fd, 0)
        os.pwrite(fd, text, 0)

    return write


def _user_tools(target: ToolTarget) -> Iterator[Tool]:
    for obj in target.imported():
        yield from obj.tools() if isinstance(obj, ToolRegistry) else [as_tool(obj)]


def _serve(conn: Connection, marker_fd: int) -> None:
    target, path, measure, properties = conn.recv()
    sys.path[:] = list(dict.fromkeys([*path, *sys.path]))
    tools = list(_user_tools(target))
    lines = LineTracer(tool_files(t.ref for t in target.tools)) if measure else None
    probe = Probe(_marker_writer(marker_fd), lines)
    probe.install(tools)
    resolved: dict[tuple[str, ...], dict[str, Any]] = {}
    conn.send("ready")
    while True:
        try:
            kind, datas = conn.recv()
        except EOFError:
            return
        if kind == "close":
            return
        for i, data in enumerate(datas):
            try:
                answer: RunReport | str = _answer(kind, data, probe, resolved, properties)
            except Exception:  # a bug of the fuzzer's own, sent back whole
                answer = traceback.format_exc()
            if lines is not None and isinstance(answer, RunReport):
                answer.lines, answer.new_lines = lines.take()
            last = i == len(datas) - 1 or isinstance(answer, str) or bool(answer.violations)
            conn.send((answer, last))
            if last:
                break


def _answer(
    kind: str, data: dict[str, Any], probe: Probe,
    resolved: dict[tuple[str, ...], dict[str, Any]] | None = None,
    properties: UserProperties | None = None,
) -> RunReport:  # fmt: skip
    """One run of the scenario dict ``data`` (``kind`` "run": checked against the invariants
    and the contract; "verdict": against its own ``expect:``). ``resolved``: the user's
    objects each set of references resolved to in an earlier run of this child (a generated
    scenario names the same tools every time; importing and checking them again cost about
    a millisecond a run), filled in here."""
    from openprogram_sim.fuzz._invariants import check_outcome_invariants
    from openprogram_sim.fuzz.tools._contract import check_contract, escape_breach
    from openprogram_sim.play import check_outcome, run_scenario
    from openprogram_sim.scenario import Scenario
    from openprogram_sim.scenario._loader import python_refs

    probe.reset()
    scenario = Scenario.model_validate(data)
    refs: tuple[str, ...] = ()
    if resolved is not None and kind == "run":
        refs = tuple(ref for _, ref in python_refs(scenario))
        known = resolved.get(refs)
        if known is not None:
            scenario._python.update(known)
    try:
        outcome = run_scenario(scenario)
    except BaseException as exc:  # a tool's SystemExit, KeyboardInterrupt, ... (reported)
        breach = escape_breach(exc, probe.records)
        return RunReport([breach.message], [breach], FuzzStats(runs=1), passed=False,
                         failures=[breach.message])  # fmt: skip
    known_now = scenario._python  # what they resolved to: kept for the next runs
    if resolved is not None and refs and refs not in resolved and all(r in known_now for r in refs):
        resolved[refs] = dict(known_now)
    if kind == "verdict":
        verdict = check_outcome(outcome)
        titles = [f.title for f in verdict.failures]
        return RunReport(passed=verdict.passed, failures=titles, model_calls=outcome.model_calls)
    stats = FuzzStats()
    stats.add(outcome)
    breaches = check_contract(outcome, probe.records)
    violations = check_outcome_invariants(outcome) + [b.message for b in breaches]
    if properties:  # the user's own (fuzz --properties)
        violations += properties.violations(outcome.trace)
    report = RunReport(violations, breaches, stats, model_calls=outcome.model_calls)
    if violations:
        report.trace = outcome.trace
    return report


def main(argv: list[str]) -> None:
    """The child: ``main([SOCKET_FD, MARKER_PATH])`` (the parent starts it). The user's tools
    print to a null stdout: the parent's output stays its own."""
    conn = Connection(int(argv[0]))
    marker_fd = os.open(argv[1], os.O_WRONLY)
    if hasattr(signal, "SIGALRM"):
        # The parent's kill is this process's time limit (a tool that blocks the event loop
        # is killed and named): run_scenario arms its own SIGALRM deadline only while the
        # signal has its default handler, so this keeps it off here.
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        _serve(conn, marker_fd)
