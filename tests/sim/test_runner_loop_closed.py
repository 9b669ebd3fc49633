"""``run_scenario`` reuses one event loop per thread; it is closed when the thread ends and
when the interpreter exits, so a user's script shows no "unclosed event loop" warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCENARIO = Path(__file__).parent / "data" / "one_search.yaml"

SCRIPT = """
import gc, threading
from openprogram_sim.play import run_scenario
from openprogram_sim.scenario import load_scenario

scenario = load_scenario({path!r})
worker = threading.Thread(target=lambda: print("thread", run_scenario(scenario).result))
worker.start()
worker.join()
gc.collect()
print("main", run_scenario(scenario).result)
"""


def test_no_unclosed_event_loop_from_the_main_thread_or_a_worker() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "default", "-c", SCRIPT.format(path=str(SCENARIO))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["thread Found.", "main Found."]
    assert "unclosed event loop" not in done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr
