"""Context variables the tool layer shares with ``Runtime.exec``.

They live here, not in :mod:`openprogram.runtime`, because the tool layer reads them and
the runtime imports the tool layer.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openprogram.runtime import Runtime

__all__ = ["active_agentic_var", "current_runtime", "current_runtime_var"]

current_runtime_var: contextvars.ContextVar[Runtime | None] = contextvars.ContextVar(
    "_current_runtime", default=None
)
"""The runtime of the innermost running exec (or ``@agentic_function`` call)."""


def current_runtime() -> Runtime | None:
    """The runtime running the current exec or ``@agentic_function`` call, if any."""
    return current_runtime_var.get()


active_agentic_var: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "_active_agentic", default=()
)
"""Names of the ``@agentic_function`` calls running now, outermost first (the recursion
guard counts them)."""
