"""Running a nested exec to its end from synchronous code on a thread whose event loop is
running: a sync tool body that calls ``runtime.exec``.

The tool body blocks its loop (it runs on the loop's thread, and the loop waits for it to
return), so the nested run cannot be awaited on that loop. It runs instead on an event loop
of its own, on the same thread: the running loop is set aside while the nested loop runs
(asyncio refuses to start a loop where another one is running) and put back after. No thread
is started, and nothing the outer loop holds is touched: it simply resumes when the tool
returns, as it would after any blocking call. This is what the nested exec did before in a
worker thread (a new thread and ``asyncio.run`` per level, 0.2-1.5 ms), without the thread:
the nested run sees the same context variables (its task copies the tool's context), its
abort signal wakes it on its own loop, and what it raises comes out of ``exec``.

The nested loops are kept per thread and reused (making one costs more than a short run):
a run's leftovers are cleaned up as ``asyncio.run`` does (tasks it left running are
cancelled and awaited, its async generators closed); a loop that needed that, or that a
``BaseException`` left, is closed rather than reused. Idle loops are closed when their
thread ends and at exit.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import weakref
from collections.abc import Coroutine
from typing import Any

__all__ = ["run_nested"]

_MAX_IDLE = 8
"""Idle loops kept per thread (a chain of sync nesting takes one per level at once)."""

_get_running_loop = asyncio.events._get_running_loop
_set_running_loop = asyncio.events._set_running_loop

_all_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
"""Every idle loop of every thread, closed at exit."""


class _Idle(list[asyncio.AbstractEventLoop]):
    """A thread's idle loops; closed when the thread ends (its thread-local goes)."""

    def __del__(self) -> None:
        for loop in self:
            _close(loop)


class _Pool(threading.local):
    def __init__(self) -> None:
        self.idle = _Idle()


_pool = _Pool()


def run_nested(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to its end on a nested loop of this thread and return its result (or
    raise what it raised), while the thread's running loop waits."""
    idle = _pool.idle
    loop = idle.pop() if idle else asyncio.new_event_loop()
    outer = _get_running_loop()
    _set_running_loop(None)
    clean = False
    try:
        result = loop.run_until_complete(coro)
        clean = True
        return result
    except Exception:
        clean = True  # the run's own exception: its loop stopped normally
        raise
    finally:
        try:
            clean = _tidy(loop) and clean
        finally:
            _set_running_loop(outer)
            if clean and len(idle) < _MAX_IDLE:
                idle.append(loop)
                _all_loops.add(loop)
            else:
                _close(loop)


def _tidy(loop: asyncio.AbstractEventLoop) -> bool:
    """Clean up after a run as ``asyncio.run`` does; whether ``loop`` is fit to reuse
    (nothing needed cleaning)."""
    tasks = asyncio.all_tasks(loop)
    if tasks:
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        for task in tasks:
            if not task.cancelled() and task.exception() is not None:
                loop.call_exception_handler(
                    {
                        "message": "unhandled exception in a task a nested exec left running",
                        "exception": task.exception(),
                        "task": task,
                    }
                )
        return False
    # asyncio keeps the async generators first iterated on the loop, not yet finished
    if getattr(loop, "_asyncgens", True):
        loop.run_until_complete(loop.shutdown_asyncgens())
        return False
    return True


def _close(loop: asyncio.AbstractEventLoop) -> None:
    if not loop.is_closed() and not loop.is_running():
        loop.close()


@atexit.register
def _close_all() -> None:
    for loop in list(_all_loops):
        _close(loop)
