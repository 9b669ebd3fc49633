"""A synchronous run's deadline, kept even while something blocks the event loop.

The runner's own time limit lives on the event loop: at ``timeout:`` it aborts the run, a
grace period later it cancels it. Neither can happen while the loop is blocked: a sync tool
runs on the loop's thread, and an async tool that calls ``time.sleep`` or computes for long
holds the loop as well. :class:`Deadline` is the backstop, as pytest-timeout's ``signal``
method is for tests: a real-time timer (``setitimer(ITIMER_REAL)``) whose SIGALRM handler
raises :class:`DeadlineInterrupt` in whatever the main thread runs, so ``time.sleep`` returns
at once and a busy Python loop stops at its next bytecode. It is a ``BaseException``: the
engine's ``except Exception`` around a tool call must not turn it into the tool's result.

The timer repeats (every :data:`REPEAT_SECONDS`) until the run is settled, for code that
swallows one interrupt (a bare ``except:``) and for an interrupt that lands where asyncio
drops it (a plain callback).

It is armed only where that is safe (:meth:`Deadline.arm`): on the main thread (where
signals are handled), on POSIX (``setitimer``), and when nobody else uses SIGALRM: no
handler but the default and no timer running (pytest-timeout's ``signal`` method installs
one for each test that has a timeout). Elsewhere the run keeps the loop's limit alone, which
a blocking tool outlasts.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import Any, TypeVar

from openprogram_sim.errors import LoopBlockedError

__all__ = [
    "CANCEL_SECONDS",
    "DEADLINE_SUPPORTED",
    "REPEAT_SECONDS",
    "Deadline",
    "DeadlineInterrupt",
    "LoopBlockedError",
    "blocked_by",
]

REPEAT_SECONDS = 1.0
"""After it first fires, the timer fires again this often until the run is settled."""

CANCEL_SECONDS = 1.0
"""How long a cancelled run (or the tasks a run left) gets to end before the timer
interrupts whatever holds the loop."""

T = TypeVar("T")

DEADLINE_SUPPORTED = hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")
"""Whether this platform has the SIGALRM interval timer the deadline uses (POSIX)."""


class DeadlineInterrupt(BaseException):
    """Raised by the deadline's SIGALRM handler wherever the main thread is. The runner
    catches it; it never reaches the caller."""


class Deadline:
    """A SIGALRM timer over one synchronous run; :meth:`arm` it, :meth:`disarm` it after."""

    __slots__ = ("cut", "settled", "trace")

    def __init__(self, trace: list[dict[str, Any]]) -> None:
        self.trace = trace
        self.cut: int | None = None
        """How many trace entries there were when it first fired (None: it never did)."""
        self.settled = False

    @classmethod
    def arm(cls, seconds: float, trace: list[dict[str, Any]]) -> Deadline | None:
        """A deadline firing in ``seconds``, or None where one cannot be set safely (not the
        main thread, not POSIX, or SIGALRM already in someone else's use)."""
        if not DEADLINE_SUPPORTED or threading.current_thread() is not threading.main_thread():
            return None
        if signal.getsignal(signal.SIGALRM) is not signal.SIG_DFL:
            return None
        if signal.getitimer(signal.ITIMER_REAL)[0]:
            return None
        deadline = cls(trace)
        signal.signal(signal.SIGALRM, deadline._fire)
        signal.setitimer(signal.ITIMER_REAL, seconds, REPEAT_SECONDS)
        return deadline

    @property
    def fired(self) -> bool:
        return self.cut is not None

    def postpone(self, seconds: float) -> None:
        """Fire ``seconds`` from now instead: the loop is responsive and keeps its own limit
        meanwhile (abort, grace, cancel); the timer stays the backstop."""
        if not self.settled:
            signal.setitimer(signal.ITIMER_REAL, seconds, REPEAT_SECONDS)

    def disarm(self) -> None:
        """Stop the timer and put the default handler back (the one found at :meth:`arm`)."""
        self.settled = True
        signal.setitimer(signal.ITIMER_REAL, 0)
        if signal.getsignal(signal.SIGALRM) == self._fire:  # a tool may have set its own
            signal.signal(signal.SIGALRM, signal.SIG_DFL)

    def run(
        self,
        loop: asyncio.AbstractEventLoop,
        main: Coroutine[Any, Any, T],
        cleanup: Callable[[asyncio.AbstractEventLoop], None],
    ) -> T | None:
        """``main`` run on ``loop``, then ``cleanup(loop)``; None when the deadline fired
        outside ``main``'s tasks. Inside a task the interrupt ends that task, and ``main``
        reports it. From the loop's own code (it was waiting, or between callbacks) it leaves
        the loop in doubt, so the loop is closed (the next run makes a new one)."""
        try:
            result = loop.run_until_complete(main)
        except DeadlineInterrupt:
            self._close(loop)
            return None
        except BaseException:  # a tool's SystemExit, a KeyboardInterrupt: the caller's
            self._tidy(loop, cleanup)
            raise
        fired = self.fired
        if not self._tidy(loop, cleanup):
            return None
        return None if self.fired and not fired else result  # a left task blocked the loop

    def _tidy(
        self,
        loop: asyncio.AbstractEventLoop,
        cleanup: Callable[[asyncio.AbstractEventLoop], None],
    ) -> bool:
        """``cleanup(loop)``; False when the deadline interrupted it (the loop is closed)."""
        try:
            cleanup(loop)
        except DeadlineInterrupt:
            self._close(loop)
            return False
        return True

    def _close(self, loop: asyncio.AbstractEventLoop) -> None:
        """Give the tasks left on ``loop`` one bounded chance to end on cancellation, then
        close it. A task still pending then ignores cancellation: its coroutine is closed
        here, where what its cleanup raises can be dropped, not when it is collected."""
        self.postpone(2 * CANCEL_SECONDS)  # not while the tasks are cancelled and awaited
        left = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in left:
            task.cancel()
        if left:
            with contextlib.suppress(DeadlineInterrupt):
                loop.run_until_complete(asyncio.wait(left, timeout=CANCEL_SECONDS))
        for task in left:
            if not task.done():
                task._log_destroy_pending = False  # type: ignore[attr-defined]
                with contextlib.suppress(Exception, DeadlineInterrupt):
                    task.get_coro().close()
        loop.close()

    def _fire(self, signum: int, frame: FrameType | None) -> None:
        if self.settled:
            return
        if self.cut is None:
            self.cut = len(self.trace)
        raise DeadlineInterrupt("the run's deadline interrupted what blocked the event loop")


def blocked_by(trace: list[dict[str, Any]], cut: int) -> str:
    """What held the loop when the deadline fired: the tool call started last and not
    ended in ``trace[:cut]``, as ``tool 'name'``."""
    open_calls: dict[tuple[Any, Any], str] = {}  # a nested exec may reuse an id: by depth
    for entry in trace[:cut]:
        kind = entry["type"]
        if kind == "tool_execution_start":
            open_calls[entry.get("depth"), entry["tool_call_id"]] = entry["tool_name"]
        elif kind == "tool_execution_end":
            open_calls.pop((entry.get("depth"), entry["tool_call_id"]), None)
    if not open_calls:
        return "code outside any tool call (the model, a listener or a task a tool started)"
    return f"tool {list(open_calls.values())[-1]!r}"
