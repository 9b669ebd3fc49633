"""bench/wire_app_cost.py, the in-process cost of a model call through ``WireApp``: what it
times is what the server does (each timed request answered whole at once, in the two states
of a session it names). Its figures are not asserted (timed tests are flaky)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_wire_app_cost", BENCH / "wire_app_cost.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_it_times_requests_kept_and_past_the_budget_each_answered_whole() -> None:
    bench = _module()
    result = bench.measure(repeats=2)
    assert result["kept_batches"] == 2 and result["past_budget_batches"] == 2
    assert result["kept_us"] > 0 and result["past_budget_us"] > 0
    assert result["kept_us"] <= result["kept_us_median"]
    # the reply a streamed chat call gets: 14 SSE events ending in [DONE]
    caller = bench._Caller()
    import asyncio

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(caller.run(3))
    finally:
        loop.close()
    session = caller.app.session(None)
    assert (session.count, session.not_kept, caller.answers, caller.sent) == (3, 0, 2, 2)
    assert [r.url for r in session.requests] == ["http://127.0.0.1:8000/v1/chat/completions"] * 3


def test_its_count_mode_runs_untimed_for_cachegrind() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "wire_app_cost.py"), "--count", "50", "--before", "10"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "59 answers"  # the first answer is sent step by step
    assert done.stdout == ""
