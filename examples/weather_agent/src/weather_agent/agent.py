"""The application's entry point: what the app calls (here: from the command line)."""

from __future__ import annotations

import sys

from openprogram import Runtime
from weather_agent.tools import registry


def answer(question: str, runtime: Runtime | None = None) -> str:
    """Answer a weather question with the agent's tools (a real model by default)."""
    runtime = runtime or Runtime(model="openai:gpt-4o-mini", registry=registry)
    return str(runtime.exec(question, tools_source="chat"))


if __name__ == "__main__":
    print(answer(" ".join(sys.argv[1:]) or "What's the weather in Paris?"))
