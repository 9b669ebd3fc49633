"""The seed's numbers and words that every check reads: the cap and the skip message.

Taken from ``tool-call-loop.md``, never from the loop's own constants: a checker that shares
the code under test cannot catch its bugs. The invariants (:mod:`._invariants`), the
generators (:mod:`._generate`) and the loop campaign's prediction of a whole run
(:mod:`.loop._predict`) all read them here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HARD_CAP", "SKIP_TEXT", "effective_cap", "is_skip_text"]

HARD_CAP = 50
"""The seed's ``MAX_INNER_ITERATIONS``: model calls per run, whatever is asked."""

SKIP_TEXT = "Skipped due to queued user message"
"""The seed's words for a skipped call's result (the loop ends the sentence with a period)."""


def effective_cap(max_iterations: int | None) -> int:
    """The model calls a run may make, by the seed: ``max(1, min(50, n))``, 50 when not
    given (kept apart from the loop's own function, which is what is under test)."""
    if max_iterations is None:
        return HARD_CAP
    return max(1, min(HARD_CAP, max_iterations))


def is_skip_text(text: Any) -> bool:
    """Whether a result text is the seed's skip message (with or without the period)."""
    return text in (SKIP_TEXT, SKIP_TEXT + ".")
