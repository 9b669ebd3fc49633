"""``openprogram-sim serve`` plays a scenario's model turns only: it never imports the Python
the scenario names (its modules' top-level code does not run), as a real process answering
real HTTP requests."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from serve_support import interrupt, read_banner, serve_process

TOOLS = '''
from pathlib import Path

from openprogram import ToolRegistry, function

Path(__file__).with_name("imported.marker").write_text("imported")  # top-level code

registry = ToolRegistry()


@function(registry=registry)
def lookup(q: str) -> str:
    """Look a word up."""
    return f"found {q}"


def reset() -> None:
    """A setup callable."""
'''

SCENARIO = """\
scenario: served, with Python named
registry: "marker_tools:registry"
setup: "marker_tools:reset"
tools:
  lookup: {python: "marker_tools:lookup"}
exec: {content: "Hi.", tools: [lookup]}
model: [{text: "Hello."}]
expect: {result: "Hello."}
"""


@pytest.mark.slow
def test_serve_never_imports_the_scenarios_python(tmp_path: Path) -> None:
    (tmp_path / "marker_tools.py").write_text(TOOLS)
    scenario = tmp_path / "served.yaml"
    scenario.write_text(SCENARIO)
    with serve_process(scenario, "--pythonpath", str(tmp_path)) as process:
        url, _ = read_banner(process)
        with httpx2.Client(base_url=url) as client:
            reply = client.post(
                "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "Hi."}]},
            )
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"] == "Hello."
        out, err = interrupt(process)
    assert "PASS" in out, out + err
    assert not (tmp_path / "imported.marker").exists()
