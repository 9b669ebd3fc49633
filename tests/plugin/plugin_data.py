"""Small scenario files for the plugin and report tests (independent of scenarios/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openprogram_sim import report as report_pkg

ONE_PICK = """\
scenario: one pick then a text answer
tags: [basics]
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
    returns: "3 results"
exec:
  content: "Find a thing."
  tools: [search]
model:
  - tool_calls: [{search: {q: a}}]
    usage: {input: 12, output: 3}
  - text: "Found it."
expect:
  result: "Found it."
  model_calls: 2
  events:
    - tool_execution_end: {tool_name: search, is_error: false, result: "3 results"}
    - agent_end: {reason: stop}
"""

BROKEN = """\
scenario: steering skips the remaining calls (broken on purpose)
tags: [steering]
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
    returns: "3 results"
exec:
  content: "Find three things."
  tools: [search]
model:
  - tool_calls: [{search: {q: a}}, {search: {q: b}}, {search: {q: c}}]
  - text: "Switching to the new request."
steering:
  - after_tool: 1
    text: "Stop, do X instead."
expect:
  result: "Switching to the new request."
  events:
    - tool_execution_end: {tool_name: search, is_error: false}
    - tool_execution_end: {tool_name: search, is_error: false, result: "3 results"}
    - agent_end: {reason: stop}
"""

NESTED = """\
scenario: a nested exec under its tool call </script><script>alert(1)</script>
tags: [nested, tricky]
tools:
  search:
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
    returns: "<b>bold</b> & </script>"
  research:
    parameters: {type: object, properties: {topic: {type: string}}, required: [topic]}
    exec: {content: "look into {topic}"}
exec:
  content: "Research tides."
  tools: [research, search]
model:
  - tool_calls: [{research: {topic: tides}}]
  - tool_calls: [{search: {q: tides}}]
  - text: "Tides follow the moon. </script><!--"
  - text: "Research says: tides follow the moon."
expect:
  result: "Research says: tides follow the moon."
  model_calls: 4
"""

CAP = """\
scenario: the round cap ends a polling loop
tags: [cap]
tools:
  poll: {returns: "not ready"}
  flaky: {raises: "disk full"}
exec:
  content: "Wait until ready."
  tools: [poll, flaky]
  max_iterations: 2
model:
  - tool_calls: [{flaky: {}}]
  - tool_calls: [{poll: {}}]
expect:
  model_calls: 2
  events:
    - tool_execution_end: {tool_name: flaky, is_error: true, result: {$contains: "disk full"}}
    - agent_end: {reason: cap}
"""

FOLLOW_UP = """\
scenario: a follow-up starts another pass
tags: [follow_ups]
exec:
  content: "Check X."
  tools: []
model:
  - text: "X is fine."
  - text: "Y is fine."
follow_ups:
  - text: "Also check Y."
expect:
  result: "Y is fine."
"""

INVALID = """\
scenario: a typo in a key
exec:
  content: "hi"
  toolz: []
model:
  - text: "hello"
"""

FILES = {
    "scenarios/basics/one_pick.yaml": ONE_PICK,
    "scenarios/steering/broken.yaml": BROKEN,
    "scenarios/nested/research.yaml": NESTED,
    "scenarios/cap/polling.yaml": CAP,
    "scenarios/follow_ups/another_pass.yaml": FOLLOW_UP,
    "scenarios/bad/typo.yaml": INVALID,
}
"""Six files: four pass, one fails (broken), one does not load (typo)."""

TITLES = {
    "scenarios/basics/one_pick.yaml": "one pick then a text answer",
    "scenarios/steering/broken.yaml": "steering skips the remaining calls (broken on purpose)",
    "scenarios/nested/research.yaml": (
        "a nested exec under its tool call </script><script>alert(1)</script>"
    ),
    "scenarios/cap/polling.yaml": "the round cap ends a polling loop",
    "scenarios/follow_ups/another_pass.yaml": "a follow-up starts another pass",
}


def write_scenarios(root: Path, files: dict[str, str] | None = None) -> Path:
    for name, text in (FILES if files is None else files).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "scenarios"


def bulk_record(i: int, **extra: Any) -> dict[str, Any]:
    """A synthetic Python-test record with one tool round (for big reports)."""
    trace = [
        {"type": "agent_start", "depth": 0, "round": 0},
        {"type": "turn_start", "depth": 0, "round": 1},
        {"type": "message_end", "depth": 0, "round": 1, "role": "user", "text": f"go {i}"},
        {
            "type": "message_end",
            "depth": 0,
            "round": 1,
            "role": "assistant",
            "text": "",
            "tool_calls": ["search"],
            "stop_reason": "toolUse",
        },
        {
            "type": "tool_execution_start",
            "depth": 0,
            "round": 1,
            "tool_call_id": "c1",
            "tool_name": "search",
            "args": {"q": i},
        },
        {
            "type": "tool_execution_end",
            "depth": 0,
            "round": 1,
            "tool_call_id": "c1",
            "tool_name": "search",
            "args": {"q": i},
            "result": "x" * 300,
            "is_error": False,
        },
        {"type": "turn_end", "depth": 0, "round": 1},
        {"type": "agent_end", "depth": 0, "round": 1, "reason": "stop"},
    ]
    run = report_pkg.run_entry(trace, label=f"run {i}")
    base = report_pkg.python_record(
        id=f"tests/test_x.py::test_{i:05d}",
        title=f"test {i}",
        path="tests/test_x.py",
        tags=["bulk"],
        status="passed",
        duration=0.001,
        runs=[run],
    )
    base.update(extra)
    return base
