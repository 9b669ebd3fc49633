"""Saves are atomic: a crash part-way through writing leaves the old cassette (or none),
never half a file, and no temporary file behind."""

from __future__ import annotations

import os

import pytest

from openprogram_sim.cassettes._persist import atomic_write

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
