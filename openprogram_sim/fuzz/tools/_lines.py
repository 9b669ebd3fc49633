"""The lines of the user's tool code each run executes, for the coverage-guided mode
(``openprogram-sim fuzz --coverage-guided``).

The sandbox measures them while a tool call runs (the probe opens and closes the
measurement around each call, :mod:`openprogram_sim.fuzz.tools._probe`), in the files the
tools are defined in, and sends back how many lines this run executed and how many no run
had reached before; the campaign feeds the first to Hypothesis's ``target()``, which then
steers generation toward runs that go deeper into the tools' branches.

A trace function of our own does it rather than coverage.py: the count must be per run, and
coverage.py gives a run's lines only by stopping, reading and erasing its data around each
run (about 6 ms a run, more than the run). The trace function is set only while a tool call
runs, and returns a line tracer only for frames of the tools' files, so the rest of the loop
runs untraced. While it is set, another tracer of the sandbox process (coverage.py measuring
the sandbox itself) is paused.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["LineTracer", "tool_files"]


def tool_files(refs: Iterable[str | None]) -> frozenset[str]:
    """The files the tools named by ``refs`` (``package.module:attr``) are defined in (their
    modules must be imported)."""
    files = set()
    for ref in refs:
        module = sys.modules.get(ref.partition(":")[0]) if ref else None
        path = getattr(module, "__file__", None)
        if path:
            files.add(str(Path(path).resolve()))
    return frozenset(files)


class LineTracer:
    """Records the ``(file, line)`` pairs executed in ``files`` between :meth:`enter` and
    :meth:`leave` (nested calls count once; each thread apart)."""

    def __init__(self, files: frozenset[str]) -> None:
        self.files = files
        self.run_lines: set[tuple[str, int]] = set()
        """Lines executed since the last :meth:`take`."""
        self.seen: set[tuple[str, int]] = set()
        """Lines any run executed."""
        self._local = threading.local()
        self._lock = threading.Lock()
        self._codes: dict[Any, bool] = {}

    def _wanted(self, frame: FrameType) -> bool:
        code = frame.f_code
        wanted = self._codes.get(code)
        if wanted is None:
            wanted = self._codes[code] = str(Path(code.co_filename).resolve()) in self.files
        return wanted

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event != "call" or not self._wanted(frame):
            return None
        self._line(frame, "line", None)
        return self._line

    def _line(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            with self._lock:
                self.run_lines.add((frame.f_code.co_filename, frame.f_lineno))
        return self._line

    def enter(self) -> None:
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        if depth == 0:
            self._local.previous = sys.gettrace()
            sys.settrace(self._global)

    def leave(self) -> None:
        self._local.depth -= 1
        if self._local.depth == 0:
            sys.settrace(self._local.previous)
            self._local.previous = None

    def take(self) -> tuple[int, int]:
        """This run's line count and how many of its lines no run had reached; starts the
        next run's count."""
        with self._lock:
            lines, self.run_lines = self.run_lines, set()
        new = len(lines - self.seen)
        self.seen |= lines
        return len(lines), new
