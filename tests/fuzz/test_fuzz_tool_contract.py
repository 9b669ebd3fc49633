"""The tool contract, checked on runs of real tools in the sandbox process: a value JSON
cannot encode, an exception that leaves exec, a tool that hangs (awaiting forever, or
blocking the event loop, which in the sandbox only killing the process stops), each named
with the call that broke it; tools that raise ordinary exceptions keep the contract. A tool
that blocks the event loop still gets a regression file, which ``openprogram-sim run`` fails
in time (its SIGALRM deadline); one that ends its process gets none."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from openprogram_sim.fuzz import FuzzFailure, ToolTarget
from openprogram_sim.fuzz.tools import _campaign as _tools_campaign
from openprogram_sim.fuzz.tools._regression import NOT_JSON
from openprogram_sim.fuzz.tools._sandbox import Sandbox
from openprogram_sim.trace import matches

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
def stubborn(x: int) -> str:
    """Blocks the event loop and swallows every interrupt.

    Args:
        x: A number.
    """
    while True:
        try:
            time.sleep(600)
        except BaseException:
            pass

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


@pytest.mark.slow
def test_a_tool_that_blocks_the_event_loop_is_killed_and_named(sandbox: Any) -> None:
    starts = sandbox.start().starts  # started (when this test runs alone, it was not yet)
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


# --------------------------------------------------------------------------- regression files


def _failure(sandbox: Any, kind: str, tool: str, args: dict[str, Any]) -> FuzzFailure:
    """A campaign's failure for one call, as the sandbox reported it when it had to kill the
    run (a hang that blocked the event loop, or a tool that ended the process)."""
    report = _run(sandbox, {tool: args}, timeout=0.5)
    assert report.killed
    [breach] = report.breaches
    assert (breach.kind, breach.call.tool, breach.call.args) == (kind, tool, args)
    return FuzzFailure({}, report.violations, report.trace, 0, 0, 0, breach=breach)


def _run_file(path: Path, target: ToolTarget) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "openprogram_sim.cli", "run", str(path)]
    command += [a for folder in target.pythonpath for a in ("--pythonpath", folder)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the run's deadline needs SIGALRM")
def test_a_tool_that_blocks_the_event_loop_gets_a_file_that_run_fails_in_time(
    sandbox: Any, tmp_path: Path
) -> None:
    failure = _failure(sandbox, "hangs", "nap", {"seconds": 600})
    _tools_campaign._write(failure, sandbox.target, tmp_path, 0, 0.5)
    assert failure.unexpressed is None, failure.unexpressed
    assert failure.reproduced is True and failure.path is not None
    assert list(tmp_path.iterdir()) == [failure.path]
    doc = yaml.safe_load(failure.path.read_text())
    assert doc["timeout"] == 0.5 and doc["model"][0]["tool_calls"] == [{"nap": {"seconds": 600}}]
    assert "interrupt a tool still blocking it 1 s after `timeout:` (SIGALRM)" in doc["description"]

    start = time.perf_counter()
    done = _run_file(failure.path, sandbox.target)
    assert time.perf_counter() - start < 15  # the deadline fired: no 600 s nap
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "did not finish within its timeout of 0.5 s (real time): tool 'nap' blocked the event "
        "loop and was interrupted"
    ) in done.stdout


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the run's deadline needs SIGALRM")
def test_a_tool_that_swallows_the_deadline_s_interrupt_gets_no_file(
    sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tools_campaign, "REPRODUCE_MARGIN", 3.0)  # not the 20 s it is
    failure = _failure(sandbox, "hangs", "stubborn", {"x": 0})
    _tools_campaign._write(failure, sandbox.target, tmp_path, 0, 0.5)
    assert failure.path is None and failure.reproduced is False and not list(tmp_path.iterdir())
    assert failure.unexpressed is not None
    assert failure.unexpressed.startswith(
        "the regression file would not reproduce it: `openprogram-sim run` did not finish on "
        "it within 4 s: something held it past the file's `timeout:` that the run's SIGALRM "
        "deadline (1 s later) could not interrupt either"
    )
    assert "a tool that catches BaseException and goes on blocking" in failure.unexpressed


@pytest.mark.slow
def test_without_sigalrm_no_file_can_hold_a_tool_that_blocks_the_event_loop(
    sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tools_campaign, "_DEADLINE", False)  # as on a system without SIGALRM
    failure = _failure(sandbox, "hangs", "nap", {"seconds": 600})
    _tools_campaign._write(failure, sandbox.target, tmp_path, 0, 0.5)
    assert failure.path is None and not list(tmp_path.iterdir())
    assert failure.unexpressed == (
        "nap blocks the event loop, and without SIGALRM (this is not a POSIX system) "
        "`openprogram-sim run` keeps a file's `timeout:` on its event loop alone, which cannot "
        "stop such a tool, so a file replaying the call would hang rather than fail"
    )


def test_a_tool_that_ends_its_process_gets_no_file(sandbox: Any, tmp_path: Path) -> None:
    failure = _failure(sandbox, "escapes", "vanish", {"code": 1})
    _tools_campaign._write(failure, sandbox.target, tmp_path, 0, 0.5)
    assert failure.path is None and not list(tmp_path.iterdir())
    assert failure.unexpressed is not None
    assert failure.unexpressed.startswith("replayed alone, the call ends the process that runs it")
    assert "ended its process (exit code 1) while vanish" in failure.unexpressed
    assert "would end `openprogram-sim run` or pytest rather than fail" in failure.unexpressed


# --------------------------------------------------------------------------- NOT_JSON

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None, database=None)
@given(_JSON, st.sampled_from([None, 2]))
def test_text_json_wrote_never_matches_the_not_json_matcher(value: Any, indent: Any) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    assert not matches(NOT_JSON, text), text


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
    assert matches(NOT_JSON, text)


def test_a_target_loads_from_a_folder(tmp_path: Path) -> None:
    (tmp_path / "solo_tools_mod.py").write_text(
        "from openprogram import function\n\n"
        "@function\ndef solo(x: int) -> int:\n"
        '    """One.\n\n    Args:\n        x: A number.\n    """\n    return x\n'
    )
    target = ToolTarget.load(tools=["solo_tools_mod"], pythonpath=[str(tmp_path)])
    assert target.names == ["solo"] and target.label == "solo_tools_mod:solo"
    assert target.scenario_refs() == {"tools": {"solo": {"python": "solo_tools_mod:solo"}}}
