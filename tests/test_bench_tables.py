"""bench/run.py's and bench/scaling.py's Markdown: the table a run leaves in bench/README.md.

Speed itself is never asserted here (timed tests are flaky); what is tested is what a reader
of bench/README.md gets: each run's table with its load average, put at the top of the runs,
and every goal's row named where the README explains the rows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run() -> ModuleType:
    return _module("run")


ROWS = {
    "floor_us_per_round": 0.78,
    "loop_x_floor": 25.1,
    "loop_minimal_x_floor": 9.4,
    "fuzz_examples_per_s": 1412,
    "run_scenarios": [1000, 10000],
    "serve_x_aimock_c1": 1.46,
    "commit": "abc1234",
    "date": "2026-12-02 17:00 UTC",
    "python": "3.11.7",
    "cpus": 2,
    "load_average": 0.63,
    "load_average_after": 1.9,
    "quick": False,
}
PARTS = {
    "loop": {"load": 0.63, "keys": ["floor_us_per_round", "loop_x_floor", "loop_minimal_x_floor"]},
    "fuzz": {"load": 1.2, "keys": ["fuzz_examples_per_s"]},
    "memory": {"load": 1.5, "keys": ["run_scenarios"]},
    "serve_peers": {"load": 1.9, "keys": ["serve_x_aimock_c1"]},
}


def test_a_run_is_one_table_headed_with_its_load_average(run: ModuleType) -> None:
    assert run.markdown(ROWS, PARTS).splitlines() == [
        "### 2026-12-02 17:00 UTC, commit `abc1234`, load average 0.63 → 1.9",
        "",
        "Python 3.11.7, 2 cpus.",
        "",
        "| part | row | value | goal | | load |",
        "|---|---|---:|---|---|---:|",
        "| loop | `floor_us_per_round` | 0.78 |  |  | 0.63 |",
        "| loop | `loop_x_floor` | 25.1 | ≤ 20x | **not met** | 0.63 |",
        "| loop | `loop_minimal_x_floor` | 9.4 | ≤ 10x | met | 0.63 |",
        "| fuzz | `fuzz_examples_per_s` | 1,412 | ≥ 1,300 | met | 1.2 |",
        "| serve_peers | `serve_x_aimock_c1` | 1.46 | ≥ 1.5x | **not met** | 1.9 |",
    ]


def test_record_puts_the_newest_run_first_and_keeps_the_rest(
    run: ModuleType, tmp_path: Path
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# Benchmarks\n\n## Runs\n\n{run.RUNS_MARK}\n\n### older run\n\n## Next\n")
    run.record("### newer run\n\n| a |", readme)
    run.record("### newest run\n\n| b |", readme)
    assert readme.read_text() == (
        f"# Benchmarks\n\n## Runs\n\n{run.RUNS_MARK}\n\n### newest run\n\n| b |\n\n"
        "### newer run\n\n| a |\n\n### older run\n\n## Next\n"
    )


def test_record_without_the_mark_says_what_to_add(run: ModuleType, tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# Benchmarks\n")
    with pytest.raises(SystemExit) as stop:
        run.record("### a run", readme)
    assert str(stop.value) == (
        f"{readme}: no line {run.RUNS_MARK!r} to put the run below; add it back"
    )
    assert readme.read_text() == "# Benchmarks\n"


def test_the_readme_holds_the_mark_and_names_every_goal(run: ModuleType) -> None:
    text = (BENCH / "README.md").read_text(encoding="utf-8")
    assert text.count(run.RUNS_MARK) == 1
    missing = [key for key in run.GOALS if f"`{key}`" not in text]
    assert missing == []


def test_the_scaling_curves_as_tables() -> None:
    scaling = _module("scaling")
    data = {
        "history_lengths": [10, 5000],
        "history_round_us": [14.6, 14.8],
        "history_round_us_median": [15.9, 15.2],
        "history_exec_us": [19.8, 102.6],
        "history_load_average": [1.71, 1.8],
        "serve_clients": [1, 10],
        "serve_stack": "uvloop + httptools",
        "serve_rps": [4000, 12000],
        "serve_cpu_us": [176.0, 85.0],
        "serve_floor_rps": [5000, 24000],
        "serve_floor_cpu_us": [105.0, 40.0],
        "aimock": "aimock not available: node is not on PATH (install Node.js 20+)",
        "serve_load_average": [0.2, 0.4],
    }
    assert scaling.markdown(data).splitlines() == [
        "**Streamed replies per second by clients (uvloop + httptools)** (load average 0.2 → 0.4):",
        "",
        "| clients | 1 | 10 |",
        "|---|---:|---:|",
        "| `openprogram-sim serve`, replies/s | 4,000 | 12,000 |",
        "| `openprogram-sim serve`, CPU µs a reply | 176.0 | 85.0 |",
        "| hello-world floor, replies/s | 5,000 | 24,000 |",
        "| hello-world floor, CPU µs a reply | 105.0 | 40.0 |",
        "| serve ÷ floor | 0.8 | 0.5 |",
        "",
        "aimock not available: node is not on PATH (install Node.js 20+)",
        "",
        "**`Runtime.aexec` per round against the history it continues** (load average 1.71 → 1.8):",
        "",
        "| messages of history | 10 | 5,000 |",
        "|---|---:|---:|",
        "| µs a round (best) | 14.6 | 14.8 |",
        "| µs a round (median) | 15.9 | 15.2 |",
        "| the whole exec, µs a round (best) | 19.8 | 102.6 |",
    ]
