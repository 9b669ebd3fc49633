"""A stateful test of the Agent: prompt, steer, follow up and abort at arbitrary points.

The model is a FunctionModel fed from a queue the machine fills with generated turns
(hangs that wait for an abort and latency on the virtual clock included); tools include an
async one that yields to the event loop, so steering and aborts land mid-tool. One event
loop per machine, advanced step by step: nothing sleeps. After each run: the invariants
of its trace, the Agent's state, and the shape of the history it left. On a failure
Hypothesis prints the steps as a script that replays it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from openprogram import Agent
from openprogram.agent.agent_loop import LoopResult
from openprogram.types import AnyMessage, AssistantMessage, ToolResultMessage
from openprogram_sim.fuzz import check_trace
from openprogram_sim.fuzz import strategies as ops
from openprogram_sim.models import FunctionModel, ScriptedRequest
from openprogram_sim.trace import TraceRecorder

CAP = 6
Q = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


async def _slow(q: str) -> str:
    for _ in range(3):  # yields to the loop: steering and aborts can land mid-tool
        await asyncio.sleep(0)
    return f"slow {q}"


def _boom() -> str:
    raise RuntimeError("boom")


TOOLS = [
    {"spec": {"name": "echo", "parameters": Q}, "execute": lambda q: f"echo {q}"},
    {"spec": {"name": "slow", "parameters": Q}, "execute": _slow},
    {
        "spec": {"name": "boom", "parameters": {"type": "object", "properties": {}}},
        "execute": _boom,
    },
]
SCHEMAS = {t["spec"]["name"]: {"parameters": t["spec"]["parameters"]} for t in TOOLS}
TEXTS = st.sampled_from(["go", "stop that", "and also", "ok"])
TURNS = ops.model_turns(SCHEMAS, kinds=ops.TURN_KINDS, max_calls=3)


def check_history(new: list[AnyMessage], reason: str) -> list[str]:
    """Each assistant tool call is answered by a toolResult (ids in call order) before the
    next assistant message; after an abort the last round may have answered only a prefix.
    A reply that stopped on error/aborted gets no results."""
    problems = []
    replies = [i for i, m in enumerate(new) if isinstance(m, AssistantMessage)]
    for k, at in enumerate(replies):
        message = new[at]
        assert isinstance(message, AssistantMessage)
        end = replies[k + 1] if k + 1 < len(replies) else len(new)
        answered = [m.tool_call_id for m in new[at + 1 : end] if isinstance(m, ToolResultMessage)]
        calls = [] if message.stop_reason in ("error", "aborted") else message.tool_calls
        ids = [c.id for c in calls]
        if reason == "aborted" and k == len(replies) - 1:
            ok = answered == ids[: len(answered)]
        else:
            ok = answered == ids
        if not ok:
            problems.append(f"reply {k + 1} called {ids}, answered {answered}")
    for i, m in enumerate(new):
        if isinstance(m, ToolResultMessage) and i > 0 and new[i - 1].role == "user":
            problems.append(f"message {i}: a toolResult after a user message")
    return problems


class AgentMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.script: deque[dict[str, Any]] = deque()
        self.agent = Agent(FunctionModel(self._reply), tools=TOOLS, max_iterations=CAP)
        self.recorder = TraceRecorder()
        self.agent.subscribe(self.recorder)
        self.task: asyncio.Task[LoopResult] | None = None
        self.trace_at = 0
        self.history_at = 0

    def _reply(self, request: ScriptedRequest) -> dict[str, Any]:
        return self.script.popleft() if self.script else {"text": "done"}

    # -- rules ---------------------------------------------------------------------------

    @rule(turn=TURNS)
    def script_turn(self, turn: dict[str, Any]) -> None:
        self.script.append(turn)

    @precondition(lambda self: self.task is None)
    @rule(text=TEXTS, turns=st.lists(TURNS, max_size=4), steps=st.integers(0, 8))
    def prompt(self, text: str, turns: list[dict[str, Any]], steps: int) -> None:
        """Queue what the model will say, start a run and let it get ``steps`` far."""
        self.script.extend(turns)
        self.trace_at = len(self.recorder.trace)
        self.history_at = len(self.agent.state.messages)
        self.task = self.loop.create_task(self.agent.prompt(text))
        self.advance(steps)

    @rule(text=TEXTS)
    def steer(self, text: str) -> None:
        self.agent.steer(text)

    @rule(text=TEXTS)
    def follow_up(self, text: str) -> None:
        self.agent.follow_up(text)

    @precondition(lambda self: self.task is not None)
    @rule()
    def abort(self) -> None:
        self.agent.abort()

    @precondition(lambda self: self.task is not None)
    @rule(steps=st.integers(1, 12))
    def advance(self, steps: int) -> None:
        for _ in range(steps):
            self.loop.run_until_complete(asyncio.sleep(0))
        self._collect()

    @precondition(lambda self: self.task is not None)
    @rule()
    def settle(self) -> None:
        self._drain()

    # -- checks --------------------------------------------------------------------------

    def _drain(self) -> None:
        task = self.task
        if task is None:
            return
        for _ in range(2000):
            if task.done():
                break
            self.loop.run_until_complete(asyncio.sleep(0))
        if not task.done():  # a hang waits for an abort
            self.agent.abort()
            self.loop.run_until_complete(asyncio.wait([task]))
        self._collect()

    def _collect(self) -> None:
        task = self.task
        if task is None or not task.done():
            return
        self.task = None
        result = task.result()  # Agent.prompt ends with a result, whatever happened
        trace = self.recorder.trace[self.trace_at :]
        violations = check_trace(trace, cap_for=lambda depth, tool: CAP)
        assert violations == []
        assert trace[-1]["type"] == "agent_end" and trace[-1]["reason"] == result.reason
        new = self.agent.state.messages[self.history_at :]
        assert new == result.messages
        problems = check_history(new, result.reason)
        assert problems == []

    @invariant()
    def state_is_consistent(self) -> None:
        state = self.agent.state
        if self.task is None:
            assert not state.is_streaming
            assert not state.pending_tool_calls
            assert state.stream_message is None
        roles = {m.role for m in state.messages}
        assert roles <= {"user", "assistant", "toolResult"}

    def teardown(self) -> None:
        self._drain()
        self.loop.close()


AgentMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAgentMachine = AgentMachine.TestCase
