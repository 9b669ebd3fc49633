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

The two campaigns have their own subpackages, :mod:`~openprogram_sim.fuzz.loop` (with
``run_chunk`` and ``chunk_count``, one seeded chunk at a time, as the pytest plugin runs a
campaign) and :mod:`~openprogram_sim.fuzz.tools`; the strategies, the invariants and what a
campaign reports are shared. Importing this face loads nothing else: Hypothesis loads with
the first campaign or strategy used.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from openprogram_sim.fuzz._invariants import DOCUMENTED_ERRORS
    from openprogram_sim.fuzz._properties import UserProperties
    from openprogram_sim.fuzz._results import BREACH_KINDS, Breach, CampaignResult, FuzzFailure
    from openprogram_sim.fuzz._run import check_invariants, run_generated
    from openprogram_sim.fuzz._stats import FuzzStats
    from openprogram_sim.fuzz._trace_invariants import check_trace
    from openprogram_sim.fuzz.loop import (
        UnpredictableScenario,
        derive_expect,
        reproduces,
        run_campaign,
        write_regression,
    )
    from openprogram_sim.fuzz.tools import TargetError, ToolTarget, run_tool_campaign

__all__ = [
    "BREACH_KINDS",
    "DOCUMENTED_ERRORS",
    "Breach",
    "CampaignResult",
    "FuzzFailure",
    "FuzzStats",
    "TargetError",
    "ToolTarget",
    "UnpredictableScenario",
    "UserProperties",
    "check_invariants",
    "check_trace",
    "derive_expect",
    "reproduces",
    "run_campaign",
    "run_generated",
    "run_tool_campaign",
    "write_regression",
]

_WHERE = {
    **dict.fromkeys(("BREACH_KINDS", "Breach", "CampaignResult", "FuzzFailure"), "_results"),
    "DOCUMENTED_ERRORS": "_invariants",
    "FuzzStats": "_stats",
    "UserProperties": "_properties",
    **dict.fromkeys(("check_invariants", "run_generated"), "_run"),
    "check_trace": "_trace_invariants",
    **dict.fromkeys(
        ("UnpredictableScenario", "derive_expect", "reproduces", "run_campaign",
         "write_regression"),
        "loop",
    ),
    **dict.fromkeys(("TargetError", "ToolTarget", "run_tool_campaign"), "tools"),
}  # fmt: skip


def __getattr__(name: str) -> _typing.Any:
    # Lazy (PEP 562): the invariants need no Hypothesis, and the campaigns load it; a name
    # loads its module on first use. Classes say they live here (one home in reprs).
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{where}"), name)
    if isinstance(value, type) and value.__module__.startswith(f"{__name__}._"):
        value.__module__ = __name__
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
