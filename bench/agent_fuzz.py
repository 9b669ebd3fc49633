"""Fuzzed sessions per second of ``openprogram-sim fuzz --agent``, for an in-process Python
agent (``--agent module:function``) and for an agent command (``--agent CMD``, a new process
per session).

The agent is the test suite's small agent on the plain ``openai`` SDK
(``tests/fuzz/agents/openai_loop.py``) with both planted bugs fixed, so every session runs to
its end and nothing is shrunk: each figure is sessions over the campaign's wall time
(Hypothesis drawing the scripts, the loopback server serving them, the agent running,
each session checked), after the discovery run. The scripts are the default campaign's:
429s whose ``retry-after`` (0.05 to 0.2 s) the agent honours, cut streams and in-stream
errors it retries, so part of each figure is the agent waiting as it was asked to.

    python bench/agent_fuzz.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ROOT / "tests" / "fuzz" / "agents"
SESSIONS = {"inprocess": (60, 200), "command": (8, 24)}
"""Sessions per campaign (quick, full)."""


def _rate(spec: str, sessions: int) -> float:
    from openprogram_sim.fuzz.agent import AgentTarget, run_agent_campaign

    target = AgentTarget.load(spec, pythonpath=[str(AGENTS)])
    result = run_agent_campaign(target, sessions, seed=1, regressions=None)
    assert result.failure is None, result.failure.violations
    assert result.stats.runs == sessions, result.stats.runs
    return result.runs_per_second


def measure(quick: bool = False) -> dict[str, Any]:
    """Both figures, in fuzzed sessions per second."""
    k = 0 if quick else 1
    command = f"{sys.executable} {AGENTS / 'openai_loop.py'} --fix results --fix retry_after"
    return {
        "agent_fuzz_sessions_per_s_inprocess": round(
            _rate("openai_loop:fixed", SESSIONS["inprocess"][k]), 2
        ),
        "agent_fuzz_sessions_per_s_command": round(_rate(command, SESSIONS["command"][k]), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sessions")
    parser.add_argument("--json", action="store_true", help="print one JSON line only")
    args = parser.parse_args()
    row = measure(args.quick)
    if args.json:
        print(json.dumps(row))
        return
    print(f"in process   {row['agent_fuzz_sessions_per_s_inprocess']:7.1f} sessions/s")
    print(f"command      {row['agent_fuzz_sessions_per_s_command']:7.1f} sessions/s")


if __name__ == "__main__":
    main()
