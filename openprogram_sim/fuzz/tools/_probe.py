"""What the user's tools did on each call, seen where the loop calls them.

The trace holds a tool's result only as the text the model was sent: a value that JSON
cannot encode is sent as its ``str()`` (``{'when': datetime.date(2026, 1, 1)}``), which a
trace cannot tell from a tool that returned that text. So the tool contract is checked on
the raw call: a :class:`Probe` wraps each user ``Tool``'s ``run`` (the loop's one calling
convention, so nested runs, async tools and agentic functions are all seen) and records
per call what came back: a value and whether JSON encodes it, or what was raised, and how
long it took. It also keeps the innermost call running now, so a process that has to be
killed for a hang can say which call hung.

The probe wraps the ``Tool`` objects in place (a registry's copies and a nested exec's
``tools=[fn]`` are the same objects); :meth:`Probe.uninstall` puts the originals back.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from openprogram import current_depth
from openprogram.tools import Tool, ToolResult
from openprogram.types import ImageContent, TextContent
from openprogram_sim.fuzz._results import CallRecord
from openprogram_sim.fuzz.tools._lines import LineTracer

__all__ = ["Probe", "json_problem"]

_NATIVE = (str, int, float, bool, type(None), ToolResult, TextContent, ImageContent)
"""Return values the tool layer sends without JSON (text, numbers, its own result types)."""


def json_problem(value: Any) -> str | None:
    """Why JSON cannot encode ``value`` (None when it can, or when the tool layer sends it
    as it is)."""
    if isinstance(value, _NATIVE):
        return None
    try:
        json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


Marker = Callable[[CallRecord | None], None]
"""Told the innermost running call each time it changes (None: no call is running)."""


class Probe:
    """Records every call of the tools it is installed on (see the module docstring)."""

    def __init__(self, marker: Marker | None = None, lines: LineTracer | None = None) -> None:
        self.records: list[CallRecord] = []
        self.lines = lines
        """Measures the lines of the tools' code each call runs (coverage-guided mode)."""
        self._running: list[CallRecord] = []
        self._originals: dict[int, tuple[Tool, Any]] = {}
        self._marker = marker
        self._lock = threading.Lock()  # nested runs of sync tools run in worker threads

    def install(self, tools: Iterable[Tool]) -> None:
        for tool in tools:
            if id(tool) not in self._originals:
                self._originals[id(tool)] = (tool, tool.run)
                tool.run = self._wrap(tool, tool.run)

    def uninstall(self) -> None:
        for tool, run in self._originals.values():
            tool.run = run
        self._originals.clear()

    def reset(self) -> None:
        with self._lock:
            self.records = []
            self._running = []
        self._mark()

    @property
    def running(self) -> CallRecord | None:
        """The innermost call that has not returned."""
        with self._lock:
            return self._running[-1] if self._running else None

    # -- recording -----------------------------------------------------------------------

    def _start(self, tool: Tool, call_id: str, args: Any) -> CallRecord:
        record = CallRecord(tool.name, call_id, args, current_depth(), time.perf_counter())
        with self._lock:
            self.records.append(record)
            self._running.append(record)
        self._mark()
        return record

    def _end(self, record: CallRecord) -> None:
        record.seconds = time.perf_counter() - record.started
        with self._lock:
            if record in self._running:
                self._running.remove(record)
        self._mark()

    def _mark(self) -> None:
        if self._marker is not None:
            self._marker(self.running)

    def _returned(self, record: CallRecord, value: Any) -> None:
        record.value_type = type(value).__name__
        record.not_json = json_problem(value)

    def _raised(self, record: CallRecord, exc: BaseException) -> None:
        record.raised = f"{type(exc).__name__}: {exc}"
        record.escapes = not isinstance(exc, (Exception, asyncio.CancelledError))

    def _wrap(self, tool: Tool, run: Any) -> Any:
        def probed(call_id: str, args: Any, cancel: Any, on_update: Any) -> Any:
            record = self._start(tool, call_id, args)
            lines = self.lines
            if lines is not None:
                lines.enter()
            try:
                value = run(call_id, args, cancel, on_update)
            except BaseException as exc:
                self._raised(record, exc)
                self._end(record)
                raise
            finally:
                if lines is not None:
                    lines.leave()
            if tool.is_async or hasattr(value, "__await__"):
                return self._awaited(record, value)
            self._returned(record, value)
            self._end(record)
            return value

        return probed

    async def _awaited(self, record: CallRecord, pending: Any) -> Any:
        lines = self.lines
        if lines is not None:
            lines.enter()
        try:
            value = await pending
        except BaseException as exc:
            self._raised(record, exc)
            raise
        finally:
            if lines is not None:
                lines.leave()
            self._end(record)
        self._returned(record, value)
        return value
