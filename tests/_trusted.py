"""The files the trusted-code tests share (tests/sim, tests/plugin): a tool module that
writes ``imported.marker`` beside itself when it is imported, a scenario naming it (``MOD``
stands for the module's name) and a scenario that names no Python."""

TOOLS = '''
from pathlib import Path

from openprogram import ToolRegistry, function

Path(__file__).with_name("imported.marker").write_text("imported")  # top-level code


@function(registry=ToolRegistry())
def lookup(q: str) -> str:
    """Look a word up."""
    return f"found {q}"
'''

TRUSTED = """\
scenario: uses my tool
tags: [mine]
tools:
  lookup: {python: "MOD:lookup"}
exec: {content: "Look it up.", tools: [lookup]}
model:
  - tool_calls: [{lookup: {q: tides}}]
  - text: "Done."
expect:
  result: "Done."
  events:
    - tool_execution_end: {tool_name: lookup, result: "found tides"}
"""

PLAIN = """\
scenario: plain data
exec: {content: "Hi."}
model: [{text: "Hello."}]
expect: {result: "Hello."}
"""
