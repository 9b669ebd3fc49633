"""Fuzzing any agent over the wire (``openprogram-sim fuzz --agent CMD|module:function``).

The agent is a command (any language: it gets a session's base URLs and a placeholder key
in the variables the official SDKs read) or a Python function ``fn(endpoints)`` called in
process with an :class:`AgentEndpoints`. :func:`run_agent_campaign` first runs it against
a session that answers with text and reads the tools its first request declares; then each
Hypothesis example is one session with a drawn script (calls with arguments from the tools'
schemas, invalid arguments, unknown tools, several calls in a round, 429s with
``retry-after``, in-stream errors, cut streams, re-chunked deltas, a final text), checked
for turns never requested, the client invariants, your ``--properties`` and how the agent's
run ended. The first failure is shrunk to a scenario file that ``openprogram-sim serve``
replays against the same agent (:func:`replay` does it in one call)::

    from openprogram_sim.fuzz.agent import AgentTarget, run_agent_campaign

    result = run_agent_campaign(AgentTarget.load("my_agent:run"), examples=50)
    assert result.failure is None, result.failure.violations
"""

from openprogram_sim.fuzz.agent._campaign import (
    DEFAULT_REGRESSIONS,
    AgentCampaignResult,
    AgentFailure,
    Discovery,
    discover,
    run_agent_campaign,
)
from openprogram_sim.fuzz.agent._regression import Replay, replay
from openprogram_sim.fuzz.agent._scripts import FAULT_KINDS, script_strategy
from openprogram_sim.fuzz.agent._stats import AgentStats
from openprogram_sim.fuzz.agent._target import (
    PLACEHOLDER_KEY,
    AgentEndpoints,
    AgentError,
    AgentRun,
    AgentTarget,
    agent_env,
)
from openprogram_sim.fuzz.agent._tools import DeclaredTool, declared_tools

__all__ = [
    "DEFAULT_REGRESSIONS",
    "FAULT_KINDS",
    "PLACEHOLDER_KEY",
    "AgentCampaignResult",
    "AgentEndpoints",
    "AgentError",
    "AgentFailure",
    "AgentRun",
    "AgentStats",
    "AgentTarget",
    "DeclaredTool",
    "Discovery",
    "Replay",
    "agent_env",
    "declared_tools",
    "discover",
    "replay",
    "run_agent_campaign",
    "script_strategy",
]

for _cls in (
    AgentCampaignResult, AgentEndpoints, AgentError, AgentFailure, AgentRun, AgentStats,
    AgentTarget, DeclaredTool, Discovery, Replay,
):  # fmt: skip
    _cls.__module__ = __name__
del _cls
