"""The error tree: one root, :class:`OpenProgramError`, with a branch per cause.

Inside the loop, errors are data the model sees (``is_error`` tool results). These
exceptions are for the caller: misuse of the API, and runs that ended badly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openprogram.types import AssistantMessage

__all__ = [
    "ConfigurationError",
    "DecisionError",
    "ModelError",
    "OpenProgramError",
    "ProviderNotFoundError",
    "RunAbortedError",
    "RunError",
    "ToolDefinitionError",
    "UnknownToolsetError",
]


class OpenProgramError(Exception):
    """Root of every error the engine raises on purpose."""


class ConfigurationError(OpenProgramError):
    """The runtime or a provider is set up wrongly (a missing key, a bad model string)."""


class ProviderNotFoundError(ConfigurationError, LookupError):
    """No provider is registered under the name a model string used."""


class RunError(OpenProgramError):
    """A run ended without a normal finish. ``message`` is its final assistant message."""

    def __init__(self, text: str, message: AssistantMessage | None = None) -> None:
        super().__init__(text)
        self.message = message


class ModelError(RunError):
    """The run ended on ``stop_reason="error"``: the provider failed (its message is the
    error text), or something raised during the run (chained as ``__cause__``)."""


class RunAbortedError(RunError):
    """The run was cancelled (``Agent.abort()``, or a provider ``aborted`` stop)."""


class ToolDefinitionError(OpenProgramError, TypeError):
    """A tool is defined wrongly: ``@function``/``@agentic_function`` applied to a signature
    the model cannot call, or a tool name that clashes in its registry. Raised when the
    decorator is applied, so the mistake shows at import, not in a user's run."""


class UnknownToolsetError(ConfigurationError, ValueError):
    """``toolset=`` names no toolset; the message lists the known ones."""


class DecisionError(OpenProgramError, ValueError):
    """``exec(choices=...)``: the model's reply did not end with a valid pick, even after
    one re-ask. ``reply`` is the last reply, ``replies`` both, ``reason`` what was wrong."""

    def __init__(self, text: str, *, reply: str, replies: list[str], reason: str) -> None:
        super().__init__(text)
        self.reply = reply
        self.replies = replies
        self.reason = reason
