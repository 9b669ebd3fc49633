"""The tool contract, checked on runs of real tools in the sandbox process: a value JSON
cannot encode, an exception that leaves exec, a tool that hangs (awaiting forever, or
blocking the event loop, which only killing the process stops), each named with the call
that broke it; tools that raise ordinary exceptions keep the contract."""

from __future__ import annotations

import json
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram_sim.fuzz import ToolTarget
from openprogram_sim.fuzz._regression import NOT_JSON
from openprogram_sim.fuzz._sandbox import Sandbox

TOOLS = '''
import asyncio, datetime, os, sys, time
from openprogram import ToolRegistry, agentic_function, function

registry = ToolRegistry()

@function(registry=registry)
def ok(x: int) -> dict:
    """Fine.

    Args:
        x: A number.
    """
    if x < 0:
        raise ValueError("negative")
    return {"x": x}

@function(registry=registry)
def dated(x: int) -> dict:
    """Returns a date, which JSON cannot encode.

    Args:
        x: A number.
    """
    return {"x": x, "when": datetime.date(2026, 1, 1)}

@function(registry=registry)
def nap(seconds: float) -> str:
    """Blocks the event loop.

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return "awake"

@function(registry=registry)
async def wait_forever(x: int) -> str:
    """Awaits an answer that never comes.

    Args:
        x: A number.
    """
    await asyncio.Event().wait()
    return "never"

@function(registry=registry)
def quit_(code: int) -> str:
    """Exits.

    Args:
        code: The exit code.
    """
    sys.exit(code)

@function(registry=registry)
def vanish(code: int) -> str:
    """Ends the process.

    Args:
        code: The exit code.
    """
    os._exit(code)

@agentic_function(registry=registry)
def nested(x: int, runtime) -> str:
    """Runs dated in a nested run.

    Args:
        x: A number.
    """
    return str(runtime.exec("use dated", tools=[dated]))
'''


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("contract_tools")
    module = f"contract_tools_{uuid.uuid4().hex[:8]}"  # one module name per test process
    (folder / f"{module}.py").write_text(textwrap.dedent(TOOLS))
    target = ToolTarget.load(registry=f"{module}:registry", pythonpath=[str(folder)])
    with Sandbox(target) as box:
        box.ref = target.registry_ref  # type: ignore[attr-defined]
        yield box


def _run(box: Any, *calls: dict[str, Any], timeout: float = 2.0, **extra: Any) -> Any:
    data = {
        "scenario": "contract",
        "registry": box.ref,
        "timeout": timeout,
        "exec": {"content": "go"},
        "model": [{"tool_calls": list(calls)}, *extra.pop("turns", []), {"text": "done"}],
    }
    return box.run(data)


def test_tools_that_raise_ordinary_exceptions_keep_the_contract(sandbox: Any) -> None:
    report = _run(sandbox, {"ok": {"x": 1}}, {"ok": {"x": -1}}, {"ok": {"x": "many"}})
    assert report.violations == [] and report.breaches == []
    assert report.stats.results == {"ok": 1, "tool error": 1, "invalid arguments": 1}


def test_a_value_json_cannot_encode_is_named_with_what_the_model_was_sent(sandbox: Any) -> None:
    report = _run(sandbox, {"ok": {"x": 1}}, {"dated": {"x": 2}})
    [breach] = report.breaches
    assert breach.kind == "not_json"
    assert (breach.call.tool, breach.call.args, breach.call.call_id) == ("dated", {"x": 2},
                                                                          "call_2")  # fmt: skip
    assert "returned a dict that JSON cannot encode" in breach.message
    assert "datetime.date(2026, 1, 1)" in breach.message  # the str() the model saw
    assert report.trace  # a failing run sends its trace back


def test_a_breach_in_a_nested_run_names_the_nested_call(sandbox: Any) -> None:
    nested_turns = [{"tool_calls": [{"dated": {"x": 3}}]}, {"text": "nested done"}]
    report = _run(sandbox, {"nested": {"x": 1}}, turns=nested_turns)
    [breach] = report.breaches
    assert (breach.kind, breach.call.tool, breach.call.depth) == ("not_json", "dated", 1)


def test_an_exception_that_leaves_exec_breaks_the_contract(sandbox: Any) -> None:
    report = _run(sandbox, {"quit_": {"code": 3}})
    [breach] = report.breaches
    assert breach.kind == "escapes" and breach.call.tool == "quit_"
    assert "raised SystemExit: 3, which left exec" in breach.message
    assert not report.killed  # caught in the sandbox: the next run goes on in it
    assert _run(sandbox, {"ok": {"x": 1}}).violations == []


def test_a_tool_that_awaits_forever_is_stopped_by_the_run_s_limit(sandbox: Any) -> None:
    start = time.perf_counter()
    report = _run(sandbox, {"wait_forever": {"x": 1}}, timeout=0.5)
    assert time.perf_counter() - start < 3
    [breach] = report.breaches
    assert (breach.kind, breach.call.tool, breach.blocked) == ("hangs", "wait_forever", False)
    assert "did not end within its time limit of 0.5 s" in breach.message
    assert not report.killed


def test_a_tool_that_blocks_the_event_loop_is_killed_and_named(sandbox: Any) -> None:
    starts = sandbox.starts
    report = _run(sandbox, {"ok": {"x": 1}}, {"nap": {"seconds": 600}}, timeout=0.5)
    assert report.killed
    [breach] = report.breaches
    assert (breach.kind, breach.call.tool, breach.call.args) == ("hangs", "nap", {"seconds": 600})
    assert breach.blocked and "blocked the event loop" in breach.message
    assert "its process was killed" in breach.message
    assert _run(sandbox, {"ok": {"x": 1}}).violations == []  # a new process takes over
    assert sandbox.starts == starts + 1


def test_a_slow_tool_that_blocks_past_the_limit_breaks_it_though_it_returns(
    sandbox: Any,
) -> None:
    report = _run(sandbox, {"nap": {"seconds": 0.4}}, timeout=0.2)
    [breach] = report.breaches
    assert breach.kind == "hangs" and breach.call.tool == "nap" and not report.killed
    assert "took 0.4 s and blocked the event loop" in breach.message


def test_a_tool_that_ends_its_process_is_reported(sandbox: Any) -> None:
    report = _run(sandbox, {"vanish": {"code": 7}})
    assert report.killed
    assert "ended its process (exit code 7) while vanish" in report.violations[0]


# --------------------------------------------------------------------------- NOT_JSON

_PATTERN = regex.compile(NOT_JSON)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None, database=None)
@given(_JSON, st.sampled_from([None, 2]))
def test_text_json_wrote_never_matches_the_not_json_pattern(value: Any, indent: Any) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    assert _PATTERN.search(text, timeout=1) is None, text


@pytest.mark.parametrize(
    "text",
    [
        "{'when': datetime.date(2026, 1, 1)}",
        "{1, 2}",
        "<weather.Station object at 0x7f3e>",
        "b'raw'",
        "Decimal('1.5')",
        "plain words",
        '{"cut": ',
        "",
    ],
)
def test_python_s_str_of_other_values_matches_it(text: str) -> None:
    assert _PATTERN.search(text) is not None


def test_a_target_loads_from_a_folder(tmp_path: Path) -> None:
    (tmp_path / "solo_tools_mod.py").write_text(
        "from openprogram import function\n\n"
        "@function\ndef solo(x: int) -> int:\n"
        '    """One.\n\n    Args:\n        x: A number.\n    """\n    return x\n'
    )
    target = ToolTarget.load(tools=["solo_tools_mod"], pythonpath=[str(tmp_path)])
    assert target.names == ["solo"] and target.label == "solo_tools_mod:solo"
    assert target.scenario_refs() == {"tools": {"solo": {"python": "solo_tools_mod:solo"}}}
