"""Atomic writes of the files users keep (cassettes, the HTML report, fuzz regressions,
``init``'s files): a temporary file beside the target, then ``os.replace``.

A crash part-way leaves the old file (or none), never half a file. The temporary file is
removed whatever happens in this process; a process killed outright (SIGKILL, power loss)
cannot remove it, so it stays, named ``.NAME.PID.XXXX.tmp``, until the next write of
``NAME`` sweeps it (its process gone and the file older than that write). Collection never
takes it for a scenario (its suffix is ``.tmp``). Standard library only: cheap to import.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from pathlib import Path

__all__ = ["atomic_write", "sweep_temporary"]


def atomic_write(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and
    ``os.replace`` (its permissions set to ``mode`` first, if given); the temporary file
    never outlives the call unless the process is killed, and the temporary files
    that killed saves of ``path`` left are swept first (:func:`sweep_temporary`)."""
    started = time.time()
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_temporary(path, before=started)
    fd, temp = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        # a failure (or KeyboardInterrupt) mid-save: the old cassette stays as it was
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def sweep_temporary(path: Path, *, before: float) -> list[Path]:
    """Remove the temporary files that killed saves of ``path`` left beside it and return
    them: ``.NAME.PID.XXXX.tmp`` whose process is gone (``.NAME.XXXX.tmp``, the naming of
    earlier versions, has no process to ask) and that was last written before ``before``.
    A save under way, here or in another process, is never touched; nothing fails a save."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(?:(\d+)\.)?[a-z0-9_]+\.tmp")
    swept: list[Path] = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return swept
    for entry in entries:
        found = pattern.fullmatch(entry.name)
        if found is None or (found[1] is not None and _alive(int(found[1]))):
            continue
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < before:
                os.unlink(entry.path)
                swept.append(Path(entry.path))
    return swept


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (``kill(pid, 0)`` sends nothing). On Windows, where
    ``os.kill`` would end the process, every process counts as alive: nothing is swept."""
    if os.name == "nt" or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True
