"""The progress bar of ``eval``: on a terminal (stderr a pseudo-terminal here), drawn with
rich, or as a plain line without it; never with ``-q``, never when stderr is not a
terminal, never on stdout or in the ``--json`` file."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_concurrency import SLOW
from test_eval_cli import KEY, ROOT, sessions_url

from openprogram_sim.eval import ProgressBar, Tally
from openprogram_sim.eval._progress import describe
from openprogram_sim.play import serve_scenario


def on_a_terminal(
    tmp_path: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], str]:
    """``eval`` of 6 samples of two 0.15 s replies, stderr a pseudo-terminal: the run and
    what the terminal showed."""
    scenario = tmp_path / "slow.yaml"
    scenario.write_text(SLOW.format(wait=0.15))
    master, slave = pty.openpty()
    shown: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    full = {**os.environ, "OPENAI_API_KEY": KEY, "TERM": "xterm", "COLUMNS": "120", **(env or {})}
    full.pop("CI", None)
    with serve_scenario(scenario) as server:
        done = subprocess.run(
            [sys.executable, "-m", "openprogram_sim.cli", "eval", str(scenario),
             "--model", "openai:gpt-4o-mini", "--base-url", sessions_url(server),
             "--samples", "6", "--out", str(tmp_path / "eval"),
             "--json", str(tmp_path / "results.json"), *extra],
            stdout=subprocess.PIPE, stderr=slave, text=True, cwd=ROOT, env=full, timeout=120,
        )  # fmt: skip
    os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    assert done.returncode == 0, done.stdout
    return done, b"".join(shown).decode("utf-8", "replace")


def clean(stdout: str, tmp_path: Path) -> None:
    """The summary and the results file hold no trace of the bar."""
    assert "\x1b" not in stdout and "\r" not in stdout
    assert stdout.startswith("PASS      ") and "6/6 passed" in stdout
    text = (tmp_path / "results.json").read_text()
    assert "samples  pass" not in text and json.loads(text)["scenarios"][0]["samples"] == 6


@pytest.mark.slow
def test_rich_draws_samples_done_the_pass_rate_and_the_time_left(tmp_path: Path) -> None:
    done, shown = on_a_terminal(tmp_path)
    frames = re.findall(r"(\d)/6 samples  pass (\S+)  (\S+)", shown)
    assert frames, shown
    assert ("0", "-", "ETA") in frames  # before the first sample
    counted = [(int(n), rate) for n, rate, _ in frames if n != "0"]
    assert counted and all(rate == "1.000" for _, rate in counted)
    assert re.search(r"[1-5]/6 samples  pass 1\.000  ≤\d+:\d\d left", shown), shown
    assert "\x1b[" in shown  # drawn by rich, in place
    clean(done.stdout, tmp_path)


@pytest.mark.slow
def test_without_rich_a_plain_line_is_rewritten_in_place(tmp_path: Path) -> None:
    blocked = tmp_path / "no_rich"
    (blocked / "rich").mkdir(parents=True)
    (blocked / "rich" / "__init__.py").write_text('raise ImportError("rich is not installed")\n')
    path = os.pathsep.join([str(blocked), os.environ.get("PYTHONPATH", "")])
    done, shown = on_a_terminal(tmp_path, env={"PYTHONPATH": path})
    assert "\reval  0/6 samples  pass -  ETA -" in shown
    assert re.search(r"\reval  [1-5]/6 samples  pass 1\.000  ≤\d+:\d\d left", shown), shown
    assert "\x1b[" not in shown
    assert shown.endswith("\r")  # the line cleared at the end
    clean(done.stdout, tmp_path)


@pytest.mark.slow
def test_quiet_draws_nothing(tmp_path: Path) -> None:
    done, shown = on_a_terminal(tmp_path, "-q")
    assert shown == ""
    clean(done.stdout, tmp_path)


def test_no_bar_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    stream = (tmp_path / "log").open("w")
    with ProgressBar(10, stream=stream) as bar:
        bar.update(Tally(done=1, passed=1, remaining=9, elapsed=1.0, slots=1))
        bar.echo("a summary line", stream)
    stream.close()
    assert (tmp_path / "log").read_text() == "a summary line\n"


def test_what_the_bar_says() -> None:
    assert describe(Tally(done=0, passed=0, remaining=40, elapsed=0.0, slots=1)) == (
        "0/40 samples  pass -  ETA -"
    )
    assert describe(Tally(done=10, passed=7, remaining=30, elapsed=20.0, slots=4)) == (
        "10/40 samples  pass 0.700  ≤1:00 left"
    )
    assert describe(Tally(done=30, passed=30, remaining=0, elapsed=4000.0, slots=1)) == (
        "30/30 samples  pass 1.000  done"
    )
    assert describe(Tally(done=1, passed=0, remaining=2, elapsed=3600.0, slots=1)) == (
        "1/3 samples  pass 0.000  ≤2:00:00 left"
    )
