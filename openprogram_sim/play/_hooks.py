"""A scenario's ``setup:`` and ``teardown:``: the user's callables run before and after each
run, and its ``fixtures:``, which only pytest provides.

The callables are imported when the run starts (a file that is only collected, or filtered
out, imports nothing for them), from the folders the loader resolved the file's Python from.
Each may be sync or async; a parameter named like one of the scenario's ``fixtures:`` gets
that fixture's value. Teardown runs after every run that set up, whatever its end. A hook
that cannot be imported, is a standard-library or builtin callable the project does not
allow (``[tool.openprogram] allow-stdlib-callables``), or raises, is a :class:`HookFailure`:
the scenario fails with it, the traceback trimmed to the user's frames.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import openprogram
from openprogram_sim.scenario import (
    PythonRefError,
    Scenario,
    import_ref,
    import_roots,
    refuse_stdlib,
)

__all__ = ["HookFailure", "Hooks"]

Phase = Literal["setup", "teardown", "fixtures"]

_OURS = tuple(
    os.path.join(str(folder), "")
    for folder in (
        Path(openprogram.__file__).resolve().parent,
        Path(__file__).resolve().parents[1],  # openprogram_sim
        Path(asyncio.__file__).resolve().parent,
    )
)
"""Frames from these folders are the engine's, the harness's or asyncio's: not shown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HookFailure:
    """A ``setup:``/``teardown:`` callable that failed (or ``fixtures:`` outside pytest)."""

    phase: Phase
    index: int
    """Which entry of the phase's list (0 for ``fixtures``)."""
    ref: str
    message: str
    """What went wrong, in one line."""
    traceback: str = ""
    """The traceback, trimmed to the user's frames (empty when nothing raised)."""

    @property
    def title(self) -> str:
        if self.phase == "fixtures":
            return self.message
        return f"{self.phase} {self.ref!r} {self.message}"


class Hooks:
    """The scenario's setup and teardown, run around one run; what failed is in
    :attr:`failures`."""

    def __init__(self, scenario: Scenario, fixtures: Mapping[str, Any] | None) -> None:
        self.scenario = scenario
        self.fixtures = fixtures
        """The fixture values pytest provided (None: not under pytest)."""
        self.failures: list[HookFailure] = []

    @property
    def active(self) -> bool:
        return bool(self.scenario.setup or self.scenario.teardown or self.scenario.fixtures)

    async def setup(self) -> bool:
        """Run every setup callable, in order; False (and the run must not start) when the
        fixtures are missing or one failed."""
        scenario = self.scenario
        if scenario.fixtures and self.fixtures is None:
            names = ", ".join(scenario.fixtures)
            self.failures.append(
                HookFailure(
                    phase="fixtures",
                    index=0,
                    ref="",
                    message=f"fixtures: [{names}] are pytest fixtures; run this scenario under "
                    "pytest (pytest --openprogram-scenarios PATH), or drop fixtures: and reset "
                    "state in setup:",
                )
            )
            return False
        for i, ref in enumerate(scenario.setup):
            if not await self._call("setup", i, ref):
                return False
        return True

    async def teardown(self) -> None:
        """Run every teardown callable, in order, each even when one before it failed."""
        for i, ref in enumerate(self.scenario.teardown):
            await self._call("teardown", i, ref)

    async def _call(self, phase: Phase, index: int, ref: str) -> bool:
        roots = self._roots()
        try:
            fn = import_ref(ref, roots)
        except PythonRefError as exc:
            return self._fail(phase, index, ref, f"could not be imported: {exc}")
        if not callable(fn):
            return self._fail(phase, index, ref, f"is a {type(fn).__name__}, not a callable")
        try:
            refuse_stdlib(ref, fn, roots[0])
        except PythonRefError as exc:
            return self._fail(phase, index, ref, f"is refused: {exc}")
        kwargs, problem = self._arguments(fn)
        if problem is not None:
            return self._fail(phase, index, ref, problem)
        try:
            value = fn(**kwargs)
            if inspect.isawaitable(value):
                await value
        except Exception as exc:  # the user's code: its failure is the scenario's, shown
            return self._fail(
                phase, index, ref, f"raised {type(exc).__name__}: {exc}", _user_traceback(exc)
            )
        return True

    def _roots(self) -> list[Path]:
        roots = self.scenario._roots
        return list(roots) if roots is not None else import_roots(self.scenario.path or None)

    def _arguments(self, fn: Any) -> tuple[dict[str, Any], str | None]:
        """The fixture values ``fn``'s parameters name; a problem for any other parameter
        without a default."""
        try:
            parameters = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):  # a builtin with no signature: call it bare
            return {}, None
        values = self.fixtures or {}
        kwargs: dict[str, Any] = {}
        for p in parameters:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if p.name in values and p.name in self.scenario.fixtures:
                kwargs[p.name] = values[p.name]
            elif p.default is p.empty:
                named = ", ".join(self.scenario.fixtures) or "none"
                return {}, (
                    f"takes a parameter {p.name!r} that no fixture of the scenario provides "
                    f"(fixtures: {named}); name a fixture it needs in fixtures: (under "
                    "pytest), or give the parameter a default"
                )
        return kwargs, None

    def _fail(self, phase: Phase, index: int, ref: str, message: str, trace: str = "") -> bool:
        self.failures.append(
            HookFailure(phase=phase, index=index, ref=ref, message=message, traceback=trace)
        )
        return False


def _user_traceback(exc: BaseException) -> str:
    """``exc``'s traceback without the harness's, the engine's and asyncio's frames."""
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_OURS)
    ]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip("\n")
