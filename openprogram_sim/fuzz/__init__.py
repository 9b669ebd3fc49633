"""Fuzzing the tool-call loop: the invariants every run keeps, and campaigns that check them.

Every generated scenario (see :mod:`openprogram_sim.fuzz.strategies`) is run through the real
runner and its trace checked::

    from openprogram_sim.fuzz import check_invariants, run_generated

    outcome = run_generated(scenario)           # a Scenario, or a dict in its shape
    assert check_invariants(outcome) == []      # each violation is one readable line

The invariants: exactly one ``agent_end`` per run, last of it; runs, turns, messages and
tool calls balanced at every depth; every tool call of a reply gets exactly one result,
in call order, ids paired with its toolResult message; skipped results only as the tail of
a round where a steering message was queued, followed by that message; model calls within
the cap; no tool after an ``error``/``aborted`` stop; only the documented exceptions
(:data:`DOCUMENTED_ERRORS`) leave exec, matching ``agent_end.reason``; steering and
follow-ups delivered once; the trace JSON-serializable and, run again, identical.
(Scenarios that use ``choices:`` are outside these checks: a decision re-asks in a second
run.)

:func:`run_campaign` is what ``openprogram-sim fuzz`` runs: many scenarios, spread over
processes, with the first violation shrunk and written as a regression scenario file. The
file's expectations are the seed's rules applied to its script (:func:`derive_expect`),
never the failing run, and it is kept only if ``openprogram-sim run`` on it fails against
the loop that produced it (:func:`reproduces`); a correct loop passes it.

:func:`run_tool_campaign` (``openprogram-sim fuzz --registry pkg.module:registry``) fuzzes
*your* tools (a :class:`ToolTarget`): generated calls with arguments valid and invalid for
their real schemas, run for real in a sandbox process under a real-time limit, checked
against the invariants and the tool contract every tool keeps (:data:`BREACH_KINDS`: what
a tool raises becomes an error result and never leaves exec, results are JSON, a run ends
in time). A :class:`Breach` is written as a scenario file that replays the breaking call,
naming your tools by import path, and kept only if it passes once the tool is stubbed as
fixed and ``openprogram-sim run`` fails on it as the code is.
"""

from openprogram_sim.fuzz._campaign import (
    CampaignResult,
    ChunkResult,
    FuzzFailure,
    FuzzStats,
    chunk_count,
    reproduces,
    run_campaign,
    run_chunk,
    scenario_from_bytes,
)
from openprogram_sim.fuzz._contract import BREACH_KINDS, Breach
from openprogram_sim.fuzz._invariants import DOCUMENTED_ERRORS
from openprogram_sim.fuzz._regression import derive_expect, write_regression
from openprogram_sim.fuzz._rules import UnpredictableScenario
from openprogram_sim.fuzz._run import check_invariants, run_generated
from openprogram_sim.fuzz._target import TargetError, ToolTarget
from openprogram_sim.fuzz._tools_campaign import run_tool_campaign
from openprogram_sim.fuzz._trace_invariants import check_trace

__all__ = [
    "BREACH_KINDS",
    "DOCUMENTED_ERRORS",
    "Breach",
    "CampaignResult",
    "ChunkResult",
    "FuzzFailure",
    "FuzzStats",
    "TargetError",
    "ToolTarget",
    "UnpredictableScenario",
    "check_invariants",
    "check_trace",
    "chunk_count",
    "derive_expect",
    "reproduces",
    "run_campaign",
    "run_chunk",
    "run_generated",
    "run_tool_campaign",
    "scenario_from_bytes",
    "write_regression",
]

for _cls in (Breach, CampaignResult, ChunkResult, FuzzFailure, FuzzStats, TargetError, ToolTarget,
             UnpredictableScenario):  # fmt: skip
    _cls.__module__ = __name__
del _cls
