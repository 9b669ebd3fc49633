"""The coverage-guided mode's corpus: scenarios whose runs went deeper into the user's tools,
and the strategy that mutates them.

Hypothesis's ``target()`` climbs one choice at a time, which stalls where going one branch
deeper takes two changes at once (an argument moved from the small values mixed in to a
large one). So, as greybox fuzzers do, the campaign also keeps the scenarios whose run
executed lines of the tools no run of the chunk had, or more of them than any before
(:class:`Corpus`), and three in four of the scenarios it draws are one of the two deepest
of those with one argument of one call to a tool drawn again (:func:`guided_scenarios`): a
run that got past the first branch is the start of the next search.

The corpus grows only while the chunk searches; once a failure is found it stays as it is,
so Hypothesis replays and shrinks the failing case over the same corpus.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from openprogram_sim.fuzz.tools._target import ToolTarget
from openprogram_sim.fuzz.tools._usergen import tool_call_strategy

__all__ = ["CORPUS_LIMIT", "Corpus", "guided_scenarios"]

CORPUS_LIMIT = 256
"""Scenarios a chunk's corpus keeps (the first that went deeper)."""

DEEPEST = 2
"""A mutation starts from one of the corpus's deepest scenarios (by lines executed)."""

_INDEXES = 1023
"""The bound of each index drawn (taken modulo what it indexes)."""


class Corpus:
    """Scenarios whose runs reached new lines of the tools, or more lines than any before."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.lines: list[int] = []
        self.best = 0
        self.frozen = False

    def offer(self, data: dict[str, Any], lines: int, new_lines: int) -> None:
        """Keep ``data`` if its run went deeper (unless frozen or full)."""
        if self.frozen or len(self.items) >= CORPUS_LIMIT:
            return
        if new_lines > 0 or lines > self.best:
            self.items.append(copy.deepcopy(data))
            self.lines.append(lines)
        self.best = max(self.best, lines)

    def deepest(self, index: int) -> dict[str, Any]:
        """One of the :data:`DEEPEST` scenarios whose runs executed the most lines."""
        order = sorted(range(len(self.items)), key=lambda i: (-self.lines[i], i))
        return self.items[order[index % min(DEEPEST, len(order))]]


def _spots(data: dict[str, Any], names: set[str]) -> list[tuple[int, int]]:
    """Where ``data``'s script calls one of ``names`` with arguments (turn, call)."""
    out = []
    for t, turn in enumerate(data.get("model", [])):
        for c, call in enumerate(turn.get("tool_calls", []) if isinstance(turn, dict) else []):
            if len(call) == 1:
                ((name, args),) = call.items()
                if name in names and isinstance(args, dict) and args:
                    out.append((t, c))
    return out


def guided_scenarios(
    scenarios: st.SearchStrategy[dict[str, Any]], target: ToolTarget, corpus: Corpus
) -> st.SearchStrategy[dict[str, Any]]:
    """``scenarios``, or (three times in four, once the corpus has some) one of its deepest
    scenarios with one argument of one call to a tool drawn again from that tool's schema."""
    fresh = {
        t.name: tool_call_strategy(replace(target, tools=(t,)), True, False) for t in target.tools
    }

    @st.composite
    def draw(draw: st.DrawFn) -> dict[str, Any]:
        # The same draws every time, whatever the corpus holds (Hypothesis's record of
        # the choices must not change shape as the corpus grows): a mode, three indexes,
        # one fresh call per tool, and a plain scenario.
        mutate = draw(st.integers(0, 3)) != 0  # three in four; shrinks toward plain
        index, spot, which = (draw(st.integers(0, _INDEXES)) for _ in range(3))
        calls = {name: draw(strategy) for name, strategy in fresh.items()}
        plain = draw(scenarios)
        if not mutate or not corpus.items:
            return plain
        base = corpus.deepest(index)
        spots = _spots(base, set(fresh))
        if not spots:
            return plain
        t, c = spots[spot % len(spots)]
        ((name, args),) = base["model"][t]["tool_calls"][c].items()
        ((_, new),) = calls[name].items()
        keys = sorted(args)
        key = keys[which % len(keys)]
        if not isinstance(new, dict) or key not in new:
            return plain
        out = copy.deepcopy(base)
        out["model"][t]["tool_calls"][c] = {name: {**args, key: new[key]}}
        return out

    return draw()
