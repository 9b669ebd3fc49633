"""The abort signal of a run: an ``asyncio.Event`` that any thread may set.

An ``asyncio.Event`` belongs to the loop its waiters wait on, and ``set()`` wakes them with
``loop.call_soon``, which is only safe on that loop's thread (in debug mode asyncio raises
instead, and the woken waiter is lost). An abort often comes from elsewhere: a UI thread, a
worker thread, or a nested exec that a sync tool runs on a nested loop of its own.
:class:`AbortSignal` therefore reads as set in every thread as soon as ``set()`` returns (a
sync tool polling it while it blocks its loop sees it at once), and wakes its waiters on
their own loop with ``call_soon_threadsafe``.

A run attaches its task to the signal (:meth:`AbortSignal.attach`): setting the signal then
also cancels that task, so a tool or provider awaiting something that ignores the signal is
interrupted. The task is cancelled only while the run is attached; an abort that lands after
the run ended reaches nothing. A tool may catch that ``CancelledError`` and go on awaiting:
setting the signal again cancels the task again. When the run detaches, the cancellations the
signal made are taken back (``Task.uncancel``), so the caller's task is left as it was found.

An owner of runs (an ``Agent``, a ``Runtime``) aborts them through :class:`AbortWaves`: each
``abort()`` is a wave that sets the signal of every run running, and a run asked for before
it but started after it (``prompt()`` called, the coroutine not yet run) is set as it
starts.

A signal may adopt others (:meth:`AbortSignal.adopt`): the signals of runs nested in its run's
tools, whatever runtime or thread they run on. Setting it sets them too, and one adopted after
it was set is set at once, so a run nested under an aborted one never calls its model.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from typing import Literal

__all__ = ["AbortSignal", "AbortWaves"]


class AbortSignal(asyncio.Event):
    """An ``asyncio.Event`` that is safe to ``set()`` from any thread.

    Example::

        signal = AbortSignal()
        task = asyncio.create_task(run_agent_loop(prompts, context, config, cancel=signal))
        threading.Thread(target=signal.set).start()   # aborts the run
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._requested = False
        self._home: asyncio.AbstractEventLoop | None = None
        """The loop its waiters wait on (and its attached task runs on), once known."""
        self._task: asyncio.Task[object] | None = None
        self._baseline = 0
        """The attached task's ``cancelling()`` when the run attached: cancellations made
        before the run (its caller's) are not the run's."""
        self._cancels = 0
        """How many times the signal has cancelled the attached task."""
        self._children: weakref.WeakSet[AbortSignal] | None = None
        """The signals of the runs nested under this one (see :meth:`adopt`)."""
        self._wave: object | None = None
        """The abort that set it last (see :meth:`set`)."""

    def __repr__(self) -> str:
        return f"<AbortSignal [{'set' if self._requested else 'unset'}]>"

    def is_set(self) -> bool:
        return self._requested

    def set(self, wave: object | None = None) -> None:
        """Set the signal: at once for every thread; waiters (and the attached task) are
        woken on their loop; the signals it adopted are set too. Set again, it cancels its
        run's task again. ``wave`` names one abort: one that reaches a signal twice (through
        its parent, then directly, as ``Runtime.abort()`` does) counts once."""
        wave = object() if wave is None else wave
        with self._lock:
            if wave is self._wave:
                return
            self._wave = wave
            again = self._requested
            self._requested = True
            home = self._home
            children = list(self._children) if self._children is not None else ()
        for child in children:
            child.set(wave)
        if again and self._task is None:
            return  # set already, and no run to interrupt again
        if home is None:
            return  # nobody waits yet: wait() and attach() see the flag
        # Set again: the run's task is cancelled once more (a tool swallowed the first).
        wake = self._cancel_again if again else self._wake
        if _running_loop() is home:
            wake()
            return
        # A closed loop raises RuntimeError: its run is over, nobody is left to wake.
        with contextlib.suppress(RuntimeError):
            home.call_soon_threadsafe(wake)

    def adopt(self, child: AbortSignal) -> None:
        """Make ``child`` (the signal of a run nested under this one) set whenever this one
        is: at once if it is set already. Held weakly: a child that ends is forgotten."""
        with self._lock:
            if not self._requested:
                if self._children is None:
                    self._children = weakref.WeakSet()
                self._children.add(child)
                return
        child.set()

    def clear(self) -> None:
        with self._lock:
            self._requested = False
            super().clear()

    async def wait(self) -> Literal[True]:
        with self._lock:
            if self._requested:
                return True
            if self._home is None:
                self._home = asyncio.get_running_loop()
        return await super().wait()

    def attach(self) -> None:
        """Bind the signal to the running task, the run's: from now until :meth:`detach`,
        setting it also cancels that task (unless it is the task that sets it)."""
        task = asyncio.current_task()
        with self._lock:
            self._home = asyncio.get_running_loop()
            self._task = task
            self._baseline = task.cancelling() if task is not None else 0
            self._cancels = 0

    def detach(self) -> None:
        """The run is over: a later ``set()`` cancels nothing, and the cancellations the
        signal made of the run's task are taken back (the run handled them, or a tool
        swallowed them), so none is counted against the caller's task."""
        with self._lock:
            task, cancels = self._task, self._cancels
            self._task = None
            self._cancels = 0
        if task is not None:
            for _ in range(min(cancels, task.cancelling() - self._baseline)):
                task.uncancel()

    def _wake(self) -> None:
        """On the home loop: wake the waiters, interrupt the attached task."""
        super().set()
        with self._lock:
            task = self._task
        if task is None or task.done() or task is asyncio.current_task():
            return
        # One cancellation is enough: the run ends on it. A task being cancelled already (by
        # the run it is nested in, which shares it) is not cancelled twice.
        if task.cancelling() <= self._baseline:
            self._cancel(task)

    def _cancel_again(self) -> None:
        """On the home loop, for a second ``set()``: cancel the attached task again, if the
        run still runs (a tool caught the first ``CancelledError`` and awaits more)."""
        with self._lock:
            task = self._task
        if task is None or task.done() or task is asyncio.current_task():
            return
        self._cancel(task)

    def _cancel(self, task: asyncio.Task[object]) -> None:
        with self._lock:
            self._cancels += 1
        task.cancel()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class AbortWaves:
    """How an owner's ``abort()`` reaches its runs: those running, and those asked for and
    not started yet.

    A run is asked for when its coroutine is made (``Agent.prompt()``, ``Runtime.aexec()``):
    it keeps :attr:`wave` then, the owner's last abort. It starts with :meth:`start`, which
    sets its signal when an abort came in between, and ends with :meth:`end`. :meth:`abort`
    sets the signal of every run between the two. A run not started is held nowhere: a
    coroutine never awaited leaves nothing behind, and an abort while nothing is asked for
    reaches no later run. Safe from any thread.
    """

    __slots__ = ("_running", "wave")

    def __init__(self) -> None:
        self._running: set[AbortSignal] = set()
        self.wave: object | None = None
        """The last abort (``None`` before the first): what a run asked for now keeps."""

    # No lock: a run's start adds its signal, then reads the wave; an abort writes the
    # wave, then reads the signals. Each step is atomic, so whichever comes second sees the
    # other's: the abort sets the signal, or the start does.

    def start(self, signal: AbortSignal, asked: object | None) -> None:
        """A run asked for under the wave ``asked`` starts: ``signal`` is set at once if an
        abort came since, and by any abort until :meth:`end`."""
        self._running.add(signal)
        wave = self.wave
        if wave is not asked:
            signal.set(wave)

    def end(self, signal: AbortSignal) -> None:
        self._running.discard(signal)

    def abort(self) -> None:
        """Set the signal of every run running, and of every run asked for before now when
        it starts. A signal this reaches twice (directly, and through the run it is nested
        in) acts once."""
        self.wave = wave = object()
        for signal in list(self._running):
            signal.set(wave)
