"""The regression file the fuzzer writes for a tool whose result JSON cannot encode, run as
a user runs it (``openprogram-sim run``): the file and its failure say "not JSON" with
``{$json: false}``, not a 400-character pattern of the JSON grammar; a fixed tool passes."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support import run_cli

from openprogram_sim.errors import ScenarioError
from openprogram_sim.fuzz._regression import write_document
from openprogram_sim.fuzz._results import Breach, CallRecord
from openprogram_sim.fuzz.tools import ToolTarget
from openprogram_sim.fuzz.tools._regression import contract_document, fixed_variant
from openprogram_sim.scenario import parse_scenario
from openprogram_sim.trace import describe, matches

TOOLS = '''
import datetime
from openprogram import ToolRegistry, function

registry = ToolRegistry()

@function(registry=registry)
def dated(x: int) -> dict:
    """Returns a date, which JSON cannot encode.

    Args:
        x: A number.
    """
    return {"x": x, "when": datetime.date(2026, 1, 1)}
'''

LINE = (
    '- an event that must not occur occurred 1 time(s): {"tool_execution_end": '
    '{"tool_call_id": "call_1", "is_error": false, "result": {"$json": false}}}'
)


@pytest.fixture
def target(tmp_path: Path) -> ToolTarget:
    module = f"not_json_tools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(TOOLS)
    return ToolTarget.load(registry=f"{module}:registry", pythonpath=[str(tmp_path)])


def _document(target: ToolTarget) -> dict[str, Any]:
    call = CallRecord(tool="dated", call_id="call_1", args={"x": 2}, depth=0, started=0.0)
    breach = Breach("not_json", "dated returned a dict that JSON cannot encode", call)
    violations = ["#7 dated returned a dict that JSON cannot encode"]
    return contract_document(target, breach, violations, nested_runs=0, limit=2.0)


def _run(path: Path, target: ToolTarget) -> Any:
    return run_cli("run", str(path), "--pythonpath", target.pythonpath[0], cwd=path.parent)


def test_the_failure_says_not_json_in_plain_words(target: ToolTarget, tmp_path: Path) -> None:
    path = write_document(tmp_path / "regressions", _document(target))
    [unwanted] = yaml.safe_load(path.read_text())["expect"]["not_events"]
    assert unwanted["tool_execution_end"]["result"] == {"$json": False}
    assert "$regex" not in path.read_text()
    done = _run(path, target)
    assert done.returncode == 1, done.stdout + done.stderr
    assert LINE in done.stdout.splitlines(), done.stdout
    assert "(?(DEFINE)" not in done.stdout
    assert "-> ok: \"{'x': 2, 'when': datetime.date(2026, 1, 1)}\"" in done.stdout  # what it sent


def test_a_tool_that_keeps_the_contract_passes_the_file(target: ToolTarget, tmp_path: Path) -> None:
    fixed = fixed_variant(_document(target), target, "dated")
    assert fixed is not None
    path = write_document(tmp_path / "regressions", fixed)
    done = _run(path, target)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("expected", "actual", "hit"),
    [
        ({"$json": False}, "{'when': datetime.date(2026, 1, 1)}", True),
        ({"$json": False}, "plain words", True),
        ({"$json": False}, '{"x": 2, "when": "2026-01-01"}', False),
        ({"$json": False}, "NaN", False),  # as Python writes a float JSON has no word for
        ({"$json": True}, "[1, 2]", True),
        ({"$json": True}, {"already": "data"}, True),
        ({"$json": False}, None, False),  # a field that is not there matches neither
        ({"$json": True}, None, False),
    ],
)
def test_the_json_matcher(expected: Any, actual: Any, hit: bool) -> None:
    assert matches(expected, actual) is hit
    assert describe(expected) == ("JSON" if expected["$json"] else "not JSON")


def test_a_json_matcher_takes_only_true_or_false() -> None:
    text = "scenario: x\nexec: {content: hi}\nmodel: [{text: hi}]\n"
    text += "expect:\n  events:\n  - message_end: {text: {$json: maybe}}\n"
    with pytest.raises(ScenarioError, match=r"x.yaml:6: .*\$json takes true \(the text is "
                       r"JSON\) or false \(it is not\), got 'maybe'"):  # fmt: skip
        parse_scenario(text, "x.yaml")
