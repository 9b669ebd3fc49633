"""Saves are atomic: a crash part-way through writing leaves the old cassette (or none),
never half a file, and no temporary file behind; a process killed outright leaves its
temporary file, which the next save sweeps and collection never takes for a scenario."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from openprogram_sim.cassettes._persist import atomic_write
from openprogram_sim.report import write_report
from openprogram_sim.scenario import discover

OLD = "version: 1\ninteractions: []\n"
NEW = "version: 1\ninteractions: []\n# " + "x" * 100_000 + "\n"


class Crash(BaseException):
    """What a kill mid-write looks like to the code: it never gets to finish."""


def _crash_on_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    # The temporary file already holds part of the new text when the crash comes.
    def crash(fd: int) -> None:
        raise Crash("killed while saving")

    monkeypatch.setattr(os, "fsync", crash)


def test_a_crash_mid_save_leaves_the_old_cassette(tmp_path, monkeypatch) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(OLD, encoding="utf-8")
    _crash_on_fsync(monkeypatch)
    with pytest.raises(Crash):
        atomic_write(path, NEW)
    assert path.read_text(encoding="utf-8") == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]


def test_a_crash_on_the_first_save_leaves_no_file(tmp_path, monkeypatch) -> None:
    _crash_on_fsync(monkeypatch)
    with pytest.raises(Crash):
        atomic_write(tmp_path / "new" / "c.yaml", NEW)
    assert list((tmp_path / "new").iterdir()) == []


def test_a_failed_rename_leaves_the_old_cassette(tmp_path, monkeypatch) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(OLD, encoding="utf-8")

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        atomic_write(path, NEW)
    assert path.read_text(encoding="utf-8") == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]


def test_a_save_replaces_the_file_whole(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(OLD, encoding="utf-8")
    atomic_write(path, NEW)
    assert path.read_text(encoding="utf-8") == NEW
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]


SCENARIO = "scenario: left by a killed save\nmodel: []\nexec: {content: hi}\n"


def _dead_pid() -> int:
    """The id of a process that has ended (ids are not reused this soon)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _left_by_a_kill(folder: Path, name: str, *, pid: int | None, age: float = 60.0) -> Path:
    """A temporary file as a save killed ``age`` seconds ago leaves it (``pid`` None: the
    naming of earlier versions, with no process id)."""
    middle = f"{pid}.k3x9_q2a" if pid is not None else "k3x9_q2a"
    path = folder / f".{name}.{middle}.tmp"
    path.write_text(SCENARIO + "# " + "x" * 10_000, encoding="utf-8")
    then = time.time() - age
    os.utime(path, (then, then))
    return path


@pytest.mark.skipif(os.name == "nt", reason="no process is asked on Windows: nothing is swept")
def test_the_next_save_sweeps_what_a_killed_save_left(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(OLD, encoding="utf-8")
    _left_by_a_kill(tmp_path, "c.yaml", pid=_dead_pid())
    _left_by_a_kill(tmp_path, "c.yaml", pid=None)
    atomic_write(path, NEW)
    assert path.read_text(encoding="utf-8") == NEW
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]


def test_a_save_under_way_elsewhere_is_not_swept(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        running = _left_by_a_kill(tmp_path, "c.yaml", pid=live.pid)
        fresh = _left_by_a_kill(tmp_path, "c.yaml", pid=_dead_pid(), age=-60.0)
        other = _left_by_a_kill(tmp_path, "d.yaml", pid=_dead_pid())
        atomic_write(path, NEW)
    finally:
        live.kill()
        live.wait()
    # a live process's file, one written since the save began, another cassette's file
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["c.yaml", running.name, fresh.name, other.name]
    )


def test_collection_never_takes_a_temporary_file_for_a_scenario(tmp_path) -> None:
    (tmp_path / "s.yaml").write_text(SCENARIO, encoding="utf-8")
    _left_by_a_kill(tmp_path, "s.yaml", pid=_dead_pid())
    _left_by_a_kill(tmp_path, "s.yaml", pid=None)
    assert discover([tmp_path]) == [tmp_path / "s.yaml"]


@pytest.mark.skipif(os.name == "nt", reason="no process is asked on Windows: nothing is swept")
def test_the_next_report_sweeps_what_a_killed_write_left(tmp_path) -> None:
    left = _left_by_a_kill(tmp_path, "report.html", pid=_dead_pid())
    target = write_report(tmp_path / "report.html", [])
    assert target.read_text(encoding="utf-8").startswith("<!")
    assert not left.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


KILLED_MID_SAVE = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from openprogram_sim.cassettes._atomic import atomic_write

    def stuck(fd):  # the text is in the temporary file; the kill comes before the move
        print("writing", flush=True)
        time.sleep(120)

    os.fsync = stuck
    atomic_write(Path(sys.argv[1]), "version: 1\\ninteractions: []\\n# " + "x" * 16_000_000)
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_sigkill_mid_save_leaves_a_file_the_next_save_sweeps(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(OLD, encoding="utf-8")
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_MID_SAVE, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "writing\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    (left,) = tmp_path.glob(f".c.yaml.{child.pid}.*.tmp")  # what the issue saw
    assert left.stat().st_size > 16_000_000
    assert path.read_text(encoding="utf-8") == OLD
    assert discover([tmp_path]) == []  # c.yaml is a cassette; the temporary file is nothing
    then = time.time() - 1
    os.utime(left, (then, then))  # the kill came before this save (clocks tick coarsely)
    atomic_write(path, NEW)
    assert path.read_text(encoding="utf-8") == NEW
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]
