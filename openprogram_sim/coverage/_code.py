"""The user's own tool code measured with coverage.py, one dynamic context per scenario.

:class:`CodeCoverage` starts a ``coverage.Coverage`` over the packages named (``source=``,
with branch coverage), switches its dynamic context to each scenario's path before the
scenario runs, and saves a normal data file: ``coverage report``, ``coverage html
--show-contexts`` and ``coverage json --show-contexts`` read it as they read pytest-cov's.
Lines run outside any scenario (imports, a test's own code) are in the empty context.
Under pytest-xdist each worker saves a part (``suffix=``), and :func:`combine` merges the
parts into the data file on the controller.

:func:`tool_code` reads a saved data file back per tool: the lines and branches of each
tool's function that ran, and for each line the scenarios that ran it.
"""

from __future__ import annotations

import inspect
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from openprogram_sim.errors import SimError

__all__ = [
    "CoverageInUseError",
    "CoverageNotInstalledError",
    "CodeCoverage",
    "code_table",
    "combine",
    "locate",
    "tool_code",
    "tool_locations",
]


_QUIET = ["module-not-measured", "module-not-imported", "no-data-collected"]


class CoverageInUseError(SimError, RuntimeError):
    """coverage.py already measures the process (pytest-cov, ``coverage run``)."""


class CoverageNotInstalledError(SimError, ImportError):
    """Measuring tool code was asked for and coverage.py is not installed."""


# What to install, named by the extra that holds coverage.py (pyproject.toml).
INSTALL_HINT = "pip install 'openprogram-sim[coverage]' (or pip install 'coverage>=7.4')"


def _coverage() -> Any:
    """The coverage module, or :class:`CoverageNotInstalledError` saying what to install."""
    try:
        import coverage
    except ImportError:
        raise CoverageNotInstalledError(
            f"measuring tool code needs coverage.py, which is not installed: {INSTALL_HINT}"
        ) from None
    return coverage


class CodeCoverage:
    """coverage.py measuring ``source`` (package or module names, or folders)."""

    def __init__(
        self,
        source: Sequence[str],
        data_file: str | os.PathLike[str] = ".coverage",
        *,
        suffix: str | None = None,
    ) -> None:
        coverage = _coverage()
        self.data_file = Path(data_file).resolve()
        self.source = list(source)
        self._cov = coverage.Coverage(
            data_file=str(self.data_file),
            data_suffix=suffix,
            source=self.source,
            branch=True,
            config_file=False,
            messages=False,
        )
        # What the table says itself ("no measured tool"), and what is no news here (the
        # user's package imported before the start, as a conftest does), never as a warning
        # a session with filterwarnings=error would turn into a failure.
        self._cov.set_option("run:disable_warnings", _QUIET)
        self._started = False

    def start(self) -> CodeCoverage:
        """Start measuring (before the user's modules are imported, so their definitions
        count as run); :class:`CoverageInUseError` when coverage.py already measures this
        process (it has one tracer at a time: starting would pause the other)."""
        import coverage

        if coverage.Coverage.current() is not None:
            raise CoverageInUseError(
                "coverage.py is already measuring this process (pytest-cov's --cov, or "
                "`coverage run`); starting a second measurement would pause it. With "
                "pytest-cov, use --cov=PKG --cov-context=test for per-scenario contexts"
            )
        self._cov.erase()
        self._cov.start()
        self._started = True
        return self

    def switch(self, context: str) -> None:
        """Attribute what runs from now on to ``context`` (a scenario's path)."""
        if self._started:
            self._cov.switch_context(context)

    def stop(self) -> Path:
        """Stop, save, and return the data file written (a part when ``suffix`` was given)."""
        if self._started:
            self._cov.switch_context("")
            self._cov.stop()
            self._started = False
        self._cov.save()
        return Path(self._cov.get_data().data_filename())


def combine(data_file: str | os.PathLike[str], parts: Iterable[str | os.PathLike[str]]) -> Path:
    """Merge the parts workers saved into ``data_file`` (the parts are removed)."""
    coverage = _coverage()
    target = Path(data_file).resolve()
    found = [str(p) for p in parts if Path(p).exists()]
    cov = coverage.Coverage(data_file=str(target), config_file=False, messages=False)
    cov.erase()
    if found:
        cov.combine(found, strict=False, keep=False)
    cov.save()
    return target


def locate(function: Any, ref: str = "") -> dict[str, Any] | None:
    """Where a tool's Python function is, JSON-safe (it travels from pytest-xdist workers):
    ``{ref, file, qualname, start, lines}`` (None for what is not a Python function)."""
    function = inspect.unwrap(function) if callable(function) else function
    if not inspect.isfunction(function):
        return None
    try:
        lines, start = inspect.getsourcelines(function)
        path = inspect.getsourcefile(function)
    except (OSError, TypeError):
        return None
    if path is None:
        return None
    return {
        "ref": ref,
        "file": str(Path(path).resolve()),
        "qualname": function.__qualname__,
        "start": start,
        "lines": [line.rstrip("\n") for line in lines],
    }


def tool_locations(scenarios: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Each of the user's tools (and ``call:`` entry points) the scenarios use, by name, as
    :func:`locate` gives it (the first definition of a name wins)."""
    from openprogram_sim.coverage._toolbox import python_tools

    found: dict[str, dict[str, Any]] = {}
    for scenario in scenarios:
        for name, tool, ref in python_tools(scenario):
            if name not in found:
                source = getattr(tool.source, "__wrapped__", tool.source)
                if isinstance(source, dict):
                    source = source.get("execute")
                where = locate(source, ref)
                if where is not None:
                    found[name] = where
        if scenario.call is not None and scenario.call not in found:
            where = _entry_point(scenario)
            if where is not None:
                found[scenario.call] = where
    return found


def _entry_point(scenario: Any) -> dict[str, Any] | None:
    from openprogram_sim.errors import ScenarioError
    from openprogram_sim.scenario import resolve_python

    try:
        function = resolve_python(scenario)[scenario.call]
    except ScenarioError:  # the run reports it, with its line
        return None
    return locate(function, scenario.call)


def _report(data_file: Path, files: Sequence[str]) -> dict[str, Any]:
    import coverage

    cov = coverage.Coverage(data_file=str(data_file), config_file=False, messages=False)
    cov.load()
    fd, name = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        cov.json_report(morfs=list(files), outfile=name, show_contexts=True, ignore_errors=True)
        data: dict[str, Any] = json.loads(Path(name).read_text(encoding="utf-8"))
    except coverage.exceptions.NoDataError:
        data = {"files": {}}
    finally:
        Path(name).unlink(missing_ok=True)
    return data


def _file_entry(report: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    files = report.get("files") or {}
    for name, entry in files.items():
        if Path(name).resolve() == Path(path):
            return entry  # type: ignore[no-any-return]
    return None


def tool_code(
    data_file: str | os.PathLike[str],
    tools: Mapping[str, Mapping[str, Any]],
    *,
    base: str | os.PathLike[str] | None = None,
) -> list[dict[str, Any]]:
    """Per tool (``{name: location}`` as :func:`tool_locations` gives them), what the data
    file says of its function, as JSON-safe dicts (what the table and the report show)::

        {name, ref, file, qualname, start, lines: {covered, total, percent},
         branches: {covered, total, percent}, missing_branches, scenarios: [...],
         source: [{n, text, status ("run" | "missed" | ""), scenarios: [...]}]}

    ``scenarios`` are the dynamic contexts (scenario paths) that ran a line; ``file`` is
    relative to ``base`` (default: the current directory). Tools whose code was not
    measured (outside ``source``) are left out."""
    files = sorted({str(t["file"]) for t in tools.values()})
    if not files:
        return []
    report = _report(Path(data_file).resolve(), files)
    root = Path(base or Path.cwd()).resolve()
    out = []
    for name in sorted(tools):
        where = tools[name]
        entry = _file_entry(report, str(where["file"]))
        function = (entry or {}).get("functions", {}).get(where["qualname"])
        if function is not None:
            out.append(_tool_entry(name, where, function, root))
    return out


def _ratio(covered: int, total: int) -> dict[str, Any]:
    percent = 100.0 if total == 0 else round(100.0 * covered / total, 1)
    return {"covered": covered, "total": total, "percent": percent}


def _tool_entry(
    name: str, where: Mapping[str, Any], function: Mapping[str, Any], root: Path
) -> dict[str, Any]:
    summary = function.get("summary") or {}
    run = set(function.get("executed_lines") or ())
    missed = set(function.get("missing_lines") or ())
    contexts = {
        int(k): sorted(c for c in v if c) for k, v in (function.get("contexts") or {}).items()
    }
    source = []
    for offset, text in enumerate(where["lines"]):
        n = int(where["start"]) + offset
        status = "run" if n in run else "missed" if n in missed else ""
        source.append({"n": n, "text": text, "status": status, "scenarios": contexts.get(n, [])})
    try:
        shown = Path(where["file"]).relative_to(root).as_posix()
    except ValueError:
        shown = str(where["file"])
    covered = int(summary.get("covered_lines", 0))
    branches = int(summary.get("covered_branches", 0))
    return {
        "name": name,
        "ref": where.get("ref", ""),
        "file": shown,
        "qualname": where["qualname"],
        "start": int(where["start"]),
        "lines": _ratio(covered, int(summary.get("num_statements", 0))),
        "branches": _ratio(branches, int(summary.get("num_branches", 0))),
        "missing_branches": [list(arc) for arc in function.get("missing_branches") or ()],
        "scenarios": sorted({c for cs in contexts.values() for c in cs}),
        "source": source,
    }


def code_table(tools: Sequence[Mapping[str, Any]], data_file: str) -> str:
    """The per-tool table ``--coverage-source`` prints."""
    if not tools:
        return f"tool code coverage ({data_file}): no measured tool (is --coverage-source right?)"
    rows = [
        (
            t["name"],
            f"{t['file']}:{t['start']} {t['qualname']}",
            f"{t['lines']['covered']}/{t['lines']['total']} {t['lines']['percent']:.0f}%",
            f"{t['branches']['covered']}/{t['branches']['total']} {t['branches']['percent']:.0f}%",
            str(len(t["scenarios"])),
        )
        for t in tools
    ]
    head = ("tool", "function", "lines", "branches", "scenarios")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    out = [
        f"tool code coverage ({data_file}; per line scenarios: coverage html --show-contexts "
        f"--data-file {data_file}):"
    ]
    for row in [head, *rows]:
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(out)
