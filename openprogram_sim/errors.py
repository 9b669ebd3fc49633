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
    ├── LoopBlockedError         a run's tool blocked the event loop past the scenario's
    │                            deadline and was interrupted (also a TimeoutError)
    ├── MisuseError              the harness was called the wrong way (a RuntimeError)
    ├── WireEncodeError          a scripted turn cannot be expressed on an API's wire
    │                            (also a ValueError)
    └── CassetteError            a cassette cannot be used as asked
        ├── CassetteFormatError  a cassette file cannot be read (file, place, reason)
        ├── SecretLeakError      the final scan found a key shape: nothing was written
        └── CassetteMismatchError requests the cassette could not answer, or recorded
                                 interactions never requested (also an AssertionError)

Errors of the engine (``ModelError``, ``RunAbortedError``, ...) are
:class:`openprogram.OpenProgramError`; a scenario run records them as data, it does not
raise them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CassetteError",
    "CassetteFormatError",
    "CassetteMismatchError",
    "LoopBlockedError",
    "MatchTimeoutError",
    "MisuseError",
    "ScenarioError",
    "ScenarioIssue",
    "ScriptExhaustedError",
    "ScriptedFault",
    "SecretLeakError",
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


class LoopBlockedError(SimError, TimeoutError):
    """A run's error (``RunOutcome.error``) when its deadline interrupted code that blocked
    the event loop; the message names what was running."""

    @classmethod
    def of(cls, blocked: str, timeout: float, grace: float) -> LoopBlockedError:
        return cls(
            f"{blocked} blocked the event loop past the run's deadline ({timeout:g} s "
            f"timeout + {grace:g} s grace) and was interrupted"
        )


class MatchTimeoutError(SimError):
    """A ``$regex`` matcher took longer than its time limit against one value (a pattern
    that backtracks catastrophically); the message names the pattern and the value."""


class MisuseError(SimError, RuntimeError):
    """The harness was called the wrong way (e.g. ``run_scenario`` inside a running event
    loop); the message says what to call instead."""


class CassetteError(SimError):
    """A cassette cannot be used as asked (see the subclasses)."""


class CassetteFormatError(CassetteError, ValueError):
    """A cassette file cannot be read: the message names the file, the place in it and
    what is wrong."""


class SecretLeakError(CassetteError):
    """A cassette still held a key shape after scrubbing; nothing was written.
    ``findings`` lists each place (``interactions[0].request.headers.x-api-key``) and the
    kind of secret, never the secret itself."""

    def __init__(self, path: str, findings: list[tuple[str, str]]) -> None:
        self.path = path
        self.findings = findings
        places = "\n".join(f"  {where}: {kind}" for where, kind in findings)
        super().__init__(
            f"{path}: not saved: {len(findings)} secret(s) left after scrubbing:\n{places}\n"
            "scrubbing could not reach them (binary data, an unusual form); keep the secret "
            "out of what the session sends, or name its value: Cassette(..., secrets=[...])"
        )


class CassetteMismatchError(CassetteError, AssertionError):
    """A cassette replay went wrong: requests it had no answer for, or recorded
    interactions that were never requested."""
