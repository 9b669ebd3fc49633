"""The loop (:mod:`.agent_loop`) and the stateful :class:`Agent` around it."""

from openprogram.agent._abort import AbortSignal
from openprogram.agent.agent import Agent, AgentState
from openprogram.agent.agent_loop import (
    ABORTED_TEXT,
    MAX_INNER_ITERATIONS,
    SKIPPED_TEXT,
    AgentContext,
    Listener,
    LoopConfig,
    LoopResult,
    effective_cap,
    run_agent_loop,
    stream_agent_loop,
)

AbortSignal.__module__ = __name__  # its home is this package, not the private module

__all__ = [
    "ABORTED_TEXT",
    "MAX_INNER_ITERATIONS",
    "SKIPPED_TEXT",
    "AbortSignal",
    "Agent",
    "AgentContext",
    "AgentState",
    "Listener",
    "LoopConfig",
    "LoopResult",
    "effective_cap",
    "run_agent_loop",
    "stream_agent_loop",
]
