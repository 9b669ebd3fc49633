"""Python tools for the coverage tests' scenarios (``python: coverage_tools:NAME``)."""

from __future__ import annotations

from openprogram.tools import ToolRegistry, ToolResult, function

_OWN = ToolRegistry()  # kept out of the default registry


@function(registry=_OWN)
def refuse(q: str) -> ToolResult:
    """Answers with an error result of its own, without raising."""
    return ToolResult.text(f"no results for {q}", is_error=True)


@function(registry=_OWN)
def explode(q: str) -> str:
    """Raises."""
    raise RuntimeError(f"index for {q} is gone")
