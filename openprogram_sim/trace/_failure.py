"""A failed expectation: what did not hold, where in the file, and the diff.

Every check of the harness reports in this shape (a scenario's verdict, a served session's
report, a cassette replay), so the CLI, the plugin and the report print them one way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Failure", "render_failures"]


@dataclass(slots=True)
class Failure:
    """One expectation that did not hold: what, where in the file, and the diff."""

    title: str
    detail: str = ""
    where: str = ""
    """``file:line`` of the expectation (or of the key the failure is about)."""

    @property
    def explained(self) -> str:
        """The location line, then the detail (what the CLI and the report print)."""
        at = f"at {self.where}" if self.where else ""
        return "\n".join(part for part in (at, self.detail) if part)

    def __str__(self) -> str:
        return f"{self.title}\n{self.explained}" if self.explained else self.title


def render_failures(failures: Sequence[Failure]) -> str:
    """Failures as the CLI prints them: a line each, its location and diff indented."""
    lines = [f"- {f.title}" + "".join(f"\n  {x}" for x in f.explained.splitlines())
             for f in failures]  # fmt: skip
    return "\n".join(lines)
