"""The error tree: one root, :class:`OpenProgramError`, with a branch per cause.

Inside the loop, errors are data the model sees (``is_error`` tool results). These
exceptions are for the caller: misuse of the API, and runs that ended badly. Misuse
raises at once, with a message that names the bad value, lists what is allowed and says
what to do instead. Where a standard exception was the contract (``TypeError`` for a bad
tool entry, ``ValueError`` for a bad ``tool_choice``), the error inherits it too::

    OpenProgramError
    ├── ConfigurationError               the runtime or a provider is set up wrongly
    │   ├── ProviderNotFoundError        (LookupError) no provider under a model string's prefix
    │   └── UnknownToolsetError          (ValueError) toolset= names no toolset
    ├── UsageError                       a call the engine does not accept
    │   ├── InvalidArgumentError         (ValueError) a value that is not allowed
    │   ├── ArgumentTypeError            (TypeError) a value of the wrong kind, or none given
    │   ├── AgentBusyError               (RuntimeError) Agent.prompt() while a run is going
    │   └── NoRuntimeError               (RuntimeError) a runtime-needing tool run outside exec
    ├── ToolDefinitionError              (TypeError) a tool is defined wrongly
    │   ├── ToolEntryError               a tools= or choices= entry that is not a tool
    │   └── ToolSchemaError              (ValueError) parameters that are not a JSON Schema
    ├── ArgumentsError                   (ValueError) the model's arguments fail the schema;
    │                                    its text is for the model (openprogram.tools)
    ├── AgenticRecursionError            (RecursionError) an @agentic_function past max_depth
    ├── NestingDepthError                (RecursionError) a nested exec past Runtime.max_depth,
    │                                    or one that hit Python's recursion limit
    ├── DecisionError                    (ValueError) exec(choices=...) got no valid pick
    └── RunError                         a run ended without a normal finish
        ├── ModelError                   on an error stop (the provider failed)
        └── RunAbortedError              cancelled

Two more never leave the engine: ``PickError`` (a malformed pick, re-asked or turned into
a :class:`DecisionError`) and ``EventStreamError`` (corrupt Bedrock bytes, turned into an
``error`` event).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openprogram.types import AssistantMessage

__all__ = [
    "AgentBusyError",
    "AgenticRecursionError",
    "ArgumentTypeError",
    "ConfigurationError",
    "DecisionError",
    "InvalidArgumentError",
    "ModelError",
    "NestingDepthError",
    "NoRuntimeError",
    "OpenProgramError",
    "ProviderNotFoundError",
    "RunAbortedError",
    "RunError",
    "ToolDefinitionError",
    "ToolEntryError",
    "ToolSchemaError",
    "UnknownToolsetError",
    "UsageError",
]


class OpenProgramError(Exception):
    """Root of every error the engine raises on purpose."""


class ConfigurationError(OpenProgramError):
    """The runtime or a provider is set up wrongly (a missing key, a bad model string)."""


class ProviderNotFoundError(ConfigurationError, LookupError):
    """No provider is registered under the name a model string used."""


class UsageError(OpenProgramError):
    """The API was called with something it does not accept, or at a time it cannot run."""


class InvalidArgumentError(UsageError, ValueError):
    """An argument of the right kind with a value that is not allowed (a ``tool_choice``, an
    empty ``choices=[]``, an unknown API name)."""


class ArgumentTypeError(UsageError, TypeError):
    """An argument of the wrong kind (a string where a list of names is wanted), or a
    required one not given (``Runtime()`` with neither a model nor a provider)."""


class AgentBusyError(UsageError, RuntimeError):
    """``Agent.prompt()`` was called while a run is in progress; steer or follow up
    instead."""


class NoRuntimeError(UsageError, RuntimeError):
    """A tool that needs a runtime was run outside any ``Runtime.exec``."""


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


class ToolEntryError(ToolDefinitionError):
    """An entry of ``tools=`` (or ``choices=``) is not a tool, or its spec has no name; the
    message lists the kinds of entry accepted."""


class ToolSchemaError(ToolDefinitionError, ValueError):
    """A tool's ``parameters`` are not a valid JSON Schema object."""


class AgenticRecursionError(OpenProgramError, RecursionError):
    """An ``@agentic_function`` called itself deeper than its ``max_depth``. Raised in a
    tool body, it reaches the model as an error result telling it to stop."""


class NestingDepthError(OpenProgramError, RecursionError):
    """A nested exec was refused: it would run deeper than its runtime's ``max_depth``
    (``Runtime(max_depth=N)``, default 32; the outer exec is depth 0). Also raised, chained
    from the original, when a nested run hits Python's own recursion limit. Raised in a tool
    body, it reaches the model as an error result naming the depth and the setting.
    ``depth`` is the depth of the refused (or failed) exec, ``max_depth`` the limit."""

    def __init__(self, text: str, *, depth: int, max_depth: int) -> None:
        super().__init__(text)
        self.depth = depth
        self.max_depth = max_depth


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
