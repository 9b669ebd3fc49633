"""Which files under a folder are scenario files: collection, for the CLI and the plugin.

A scenario folder holds more than scenarios: the cassettes its scenarios replay
(``model: {cassette: cassettes/x.yaml}`` is relative to the scenario file, so they sit
below it), and beside them, perhaps, the JSON Schema, coverage JSON and reports. Only
``*.yaml``/``*.yml`` files are candidates, so JSON and HTML are never collected. A YAML
file is recognised once, here, by what it is, from its first :data:`HEAD_BYTES` bytes, and
a cassette is left alone: it is never loaded as a scenario to find out.

A **cassette** is a YAML mapping whose top-level keys include ``interactions`` (vcrpy's
format: ``interactions`` and ``version``; ours writes ``version``, ``metadata``,
``interactions``) and not ``scenario`` (every scenario file has it). Fuzz regression files
(``scenarios/regressions/fuzz_*.yaml``) are scenarios and are collected.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from openprogram_sim.errors import ScenarioError, ScenarioIssue

__all__ = ["CASSETTE_REASON", "HEAD_BYTES", "SUFFIXES", "discover", "not_a_scenario"]

SUFFIXES = (".yaml", ".yml")
"""The file names collected (anything else under a scenario folder is left alone)."""

HEAD_BYTES = 8192
"""How much of a YAML file is read to recognise it (a cassette's ``interactions:`` comes
after ``version: 1`` and a few lines of metadata)."""

CASSETTE_REASON = "a cassette (a recorded session: top-level `interactions:`), not a scenario"

_TOP_KEY = re.compile(r"""(["']?)([A-Za-z_][\w.-]*)\1[ \t]*:(?:[ \t]|$)""")


def _top_level_keys(head: bytes, whole: bool) -> list[str]:
    """The block-mapping keys at column 0 of ``head`` (comments, directives and indented
    lines skipped); the last line is dropped when ``head`` is not the whole file."""
    lines = head.decode("utf-8", errors="replace").removeprefix("\ufeff").splitlines()
    if not whole and lines:
        lines.pop()  # cut mid-line
    keys = []
    for line in lines:
        if not line or line[0] in " \t#%-.":  # indented, a comment, a directive, ---, ...
            continue
        match = _TOP_KEY.match(line)
        if match:
            keys.append(match.group(2))
    return keys


def not_a_scenario(path: Path) -> str | None:
    """Why the YAML file at ``path`` is not a scenario file (:data:`CASSETTE_REASON`), or
    None: a scenario, or a file to load and report (unreadable, not a regular file, not
    YAML). Reads at most :data:`HEAD_BYTES` bytes of a regular file; opens nothing else."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return None
        with path.open("rb") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError:
        return None
    keys = _top_level_keys(head, whole=len(head) < HEAD_BYTES)
    if "interactions" in keys and "scenario" not in keys:
        return CASSETTE_REASON
    return None


def discover(
    paths: list[str | Path], *, on_skip: Callable[[Path, str], None] | None = None
) -> list[Path]:
    """Every scenario file under ``paths``, sorted per folder; files named in ``paths`` are
    taken as given (loading a cassette named so says what it is).

    Under a folder, ``*.yaml``/``*.yml`` files are collected unless they are something else
    (:func:`not_a_scenario`: a cassette); ``on_skip(path, reason)`` is told of each file left
    alone. Folders are walked following links, each real folder once (a link back to a folder
    already walked is not entered again, so a link loop cannot recurse). Entries that are
    not regular files (FIFOs, devices, folders named ``*.yaml``) are skipped; a link that
    cannot be resolved (a loop, a dangling target) is kept, so loading it reports why.
    """
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for path in sorted(_walk(p)):
                reason = not_a_scenario(path)
                if reason is None:
                    found.append(path)
                elif on_skip is not None:
                    on_skip(path, reason)
        elif p.exists() or p.is_symlink():
            found.append(p)
        else:
            raise ScenarioError([ScenarioIssue(str(p), None, "", "no such file or directory")])
    return found


def _walk(root: Path) -> list[Path]:
    seen: set[tuple[int, int]] = set()
    out: list[Path] = []
    for folder, dirs, files in os.walk(root, followlinks=True):
        info = os.stat(folder)
        if (info.st_dev, info.st_ino) in seen:
            dirs[:] = []
            continue
        seen.add((info.st_dev, info.st_ino))
        for name in files + dirs:
            if not name.endswith(SUFFIXES):
                continue
            path = Path(folder, name)
            try:
                regular = stat.S_ISREG(path.stat().st_mode)
            except OSError:
                regular = True  # a link loop or a dangling link: loading it says which
            if regular:
                out.append(path)
    return out
