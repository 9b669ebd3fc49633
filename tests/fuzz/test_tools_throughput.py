"""How a campaign over your tools spends less per run, with its isolation kept: scenarios go
to the sandbox a batch at a time (a batch stops at its first broken run), one sandbox serves
every chunk of a worker until a tool breaks it, and ``--setup`` resets what the tools keep
between runs. (Speed itself is measured in ``bench/``, not asserted here.)"""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from openprogram_sim.cli import main
from openprogram_sim.fuzz import ToolTarget, run_tool_campaign
from openprogram_sim.fuzz.tools import SearchOptions
from openprogram_sim.fuzz.tools._sandbox import Sandbox

TOOLS = '''
import datetime, os, time
from openprogram import ToolRegistry, function

registry = ToolRegistry()
CALLS = []

def reset():
    CALLS.clear()

@function(registry=registry)
def ok(x: int) -> dict:
    """Fine; writes the process id that ran it.

    Args:
        x: A number.
    """
    with open(os.environ["PIDS_FILE"], "a") as out:
        out.write(f"{os.getpid()}\\n")
    return {"x": x}

@function(registry=registry)
def dated(x: int) -> dict:
    """Returns a date, which JSON cannot encode.

    Args:
        x: A number.
    """
    return {"when": datetime.date(2026, 1, 1)}

@function(registry=registry)
def nap(seconds: float) -> str:
    """Blocks the event loop.

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return "awake"
'''

LEAKY = '''
import sys
from openprogram import ToolRegistry, function

registry = ToolRegistry()
CALLS = []

def reset():
    CALLS.clear()

@function(registry=registry)
def remember(note: str) -> int:
    """Keeps every note in the process; past 20 it exits (state leaked between runs).

    Args:
        note: The note.
    """
    CALLS.append(note)
    if len(CALLS) > 20:
        sys.exit(3)
    return len(CALLS)
'''


def _target(tmp_path: Path, source: str) -> ToolTarget:
    module = f"throughput_tools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    return ToolTarget.load(registry=f"{module}:registry", pythonpath=[str(tmp_path)])


def _scenario(target: ToolTarget, *calls: dict[str, Any], timeout: float = 2.0) -> dict[str, Any]:
    return {
        "scenario": "batch",
        "registry": target.registry_ref,
        "timeout": timeout,
        "exec": {"content": "go"},
        "model": [{"tool_calls": list(calls)}, {"text": "done"}],
    }


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ToolTarget:
    monkeypatch.setenv("PIDS_FILE", str(tmp_path / "pids.txt"))
    return _target(tmp_path, TOOLS)


@pytest.mark.slow
def test_a_batch_answers_each_run_and_stops_at_the_first_broken_one(
    tools: ToolTarget, tmp_path: Path
) -> None:
    batch = [
        _scenario(tools, {"ok": {"x": 1}}),
        _scenario(tools, {"dated": {"x": 2}}),
        _scenario(tools, {"ok": {"x": 3}}),
    ]
    with Sandbox(tools) as box:
        reports = box.run_batch(batch)
        assert [r.violations == [] for r in reports] == [True, False]
        assert reports[1].breaches[0].kind == "not_json"
        assert (tmp_path / "pids.txt").read_text().count("\n") == 1  # the third never ran
        assert [r.violations for r in box.run_batch(batch[:1] * 3)] == [[], [], []]
        assert box.starts == 1


@pytest.mark.slow
def test_a_run_that_blocks_past_its_limit_ends_the_batch_and_the_next_gets_a_new_child(
    tools: ToolTarget,
) -> None:
    batch = [
        _scenario(tools, {"ok": {"x": 1}}, timeout=0.5),
        _scenario(tools, {"nap": {"seconds": 600}}, timeout=0.5),
        _scenario(tools, {"ok": {"x": 3}}, timeout=0.5),
    ]
    with Sandbox(tools) as box:
        reports = box.run_batch(batch)
        assert len(reports) == 2 and reports[1].killed
        assert reports[1].breaches[0].call.tool == "nap"
        assert box.run_batch(batch[:1])[0].violations == []
        assert box.starts == 2


@pytest.mark.slow
def test_one_sandbox_serves_every_chunk_of_a_campaign(tools: ToolTarget, tmp_path: Path) -> None:
    ok_only = ToolTarget(tuple(t for t in tools.tools if t.name == "ok"), tools.registry_ref,
                         (), tools.pythonpath)  # fmt: skip
    result = run_tool_campaign(ok_only, 120, seed=3, workers=1, chunk_size=40,
                               regressions=None)  # fmt: skip
    assert result.failure is None and result.stats.runs == 120
    pids = set((tmp_path / "pids.txt").read_text().split())
    assert len(pids) == 1, pids  # three chunks, one sandbox process


@pytest.mark.slow
def test_setup_resets_what_the_tools_keep_between_runs(tmp_path: Path) -> None:
    leaky = _target(tmp_path, LEAKY)
    module = leaky.registry_ref.partition(":")[0]
    broken = run_tool_campaign(leaky, 200, seed=1, workers=1, regressions=None)
    assert broken.failure is not None and broken.failure.breach is not None
    assert broken.failure.breach.kind == "escapes"
    reset = SearchOptions(setup=(f"{module}:reset",))
    kept = run_tool_campaign(leaky, 200, seed=1, workers=1, regressions=None, search=reset)
    assert kept.failure is None, kept.failure.violations
    assert kept.stats.runs == 200


@pytest.mark.slow
def test_the_summary_counts_valid_calls_per_tool_and_names_the_tools_that_got_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIDS_FILE", str(tmp_path / "pids.txt"))
    target = _target(tmp_path, TOOLS.replace("def nap(seconds: float)",
                                             "def nap(seconds: float, never: bool)")
                     .replace("        seconds: How long.",
                              "        seconds: How long.\n        never: Required."))  # fmt: skip
    ref = target.registry_ref
    # invalid arguments only (the rate at 1): no tool gets a valid call
    code = main(["fuzz", "--registry", ref, "--pythonpath", str(tmp_path), "--examples", "40",
                 "-j", "1", "--no-write", "--invalid-args-rate", "1", "--unknown-tool-rate",
                 "0"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "  valid calls     none\n" in out
    assert "    no valid call ok, dated, nap\n" in out
    assert "1 worker(s)" in out


def test_tool_only_flags_are_refused_for_the_loop_campaign(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["fuzz", "--examples", "1", "--setup", "pkg:reset", "--coverage-guided"])
    assert code == 2
    assert capsys.readouterr().err == (
        "openprogram-sim fuzz: --coverage-guided, --setup apply to a campaign over your "
        "tools (--registry/--tools)\n"
    )
