"""The harness's error tree: one root, :class:`SimError`.

::

    SimError
    ├── ScenarioError            a scenario file cannot be loaded (every mistake, with its line)
    ├── ScriptExhaustedError     the loop asked a scripted model for more turns than it has
    │                            (also an AssertionError: a test's expectation failed)
    ├── ScriptedFault            a turn with ``fault: raise``: a provider that crashes
    │                            (also a RuntimeError, like a real provider's bug)
    ├── ToolFailure              what a scenario tool with ``raises:`` raises (a RuntimeError)
    ├── MatchTimeoutError        a ``$regex`` took longer than its time limit on one value
    ├── MisuseError              the harness was called the wrong way (a RuntimeError)
    └── WireEncodeError          a scripted turn cannot be expressed on an API's wire
                                 (also a ValueError)

Errors of the engine (``ModelError``, ``RunAbortedError``, ...) are
:class:`openprogram.OpenProgramError`; a scenario run records them as data, it does not
raise them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "MatchTimeoutError",
    "MisuseError",
    "ScenarioError",
    "ScenarioIssue",
    "ScriptExhaustedError",
    "ScriptedFault",
    "SimError",
    "ToolFailure",
    "WireEncodeError",
]


class SimError(Exception):
    """Root of every error the harness raises on purpose."""


@dataclass(frozen=True, slots=True)
class ScenarioIssue:
    """One mistake in a scenario file."""

    path: str
    """The file."""
    line: int | None
    """1-based line of the offending key or value, when known."""
    where: str
    """The key path, e.g. ``model[1].tool_calls``."""
    message: str
    """What is wrong, and how to fix it."""

    def __str__(self) -> str:
        loc = f"{self.path}:{self.line}" if self.line is not None else self.path
        at = f" ({self.where})" if self.where else ""
        return f"{loc}:{at} {self.message}"


class ScenarioError(SimError):
    """A scenario file cannot be loaded; ``issues`` lists every mistake found."""

    def __init__(self, issues: list[ScenarioIssue]) -> None:
        self.issues = issues
        count = f"{len(issues)} problem{'s' if len(issues) != 1 else ''}"
        super().__init__(f"invalid scenario ({count}):\n" + "\n".join(f"  {i}" for i in issues))


class ScriptExhaustedError(SimError, AssertionError):
    """The loop asked the model for more turns than the script has."""


class ScriptedFault(SimError, RuntimeError):
    """Raised by a turn with ``fault: raise``: a provider that crashes mid-stream."""


class ToolFailure(SimError, RuntimeError):
    """What a scenario tool with ``raises:`` raises."""


class WireEncodeError(SimError, ValueError):
    """The turn cannot be expressed on this API's wire."""


class MatchTimeoutError(SimError):
    """A ``$regex`` matcher took longer than its time limit against one value (a pattern
    that backtracks catastrophically); the message names the pattern and the value."""


class MisuseError(SimError, RuntimeError):
    """The harness was called the wrong way (e.g. ``run_scenario`` inside a running event
    loop); the message says what to call instead."""
