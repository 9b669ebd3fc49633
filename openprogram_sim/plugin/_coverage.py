"""The pytest side of coverage: ``--openprogram-coverage*`` (the options are declared in
:mod:`openprogram_sim.plugin`, which registers :class:`CoverageHooks` only when one
of them is given, so a session without them pays nothing).

Each scenario item's behaviours (and, with ``--openprogram-coverage-source``, where its
tools' code is) travel to the pytest-xdist controller on its test report, as the report's
records do; the controller adds them up, checks the floor and prints the table. Code
coverage runs where tests run: in the one process, or in each worker, which saves a part
of the data file that the controller combines.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Generator
from typing import Any

import pytest

from openprogram_sim.coverage import (
    BehaviourCoverage,
    UnknownBehaviourError,
    behaviours_of,
    parse_ids,
)

__all__ = ["REPORT_ATTR", "CoverageHooks"]

REPORT_ATTR = "openprogram_behaviours"
"""The attribute of a scenario item's call report that carries its behaviours."""


def _ids(values: list[str]) -> list[str]:
    try:
        return parse_ids(values)
    except UnknownBehaviourError as exc:
        raise pytest.UsageError(f"--openprogram-coverage-require: {exc}") from None


class CoverageHooks:
    """One session's behaviour coverage and code measurement (a pytest plugin object)."""

    def __init__(self, config: pytest.Config) -> None:
        opt = config.getoption
        self.config = config
        self.show = bool(opt("openprogram_coverage", False))
        self.json_path = opt("openprogram_coverage_json", None)
        self.fail_under: float | None = opt("openprogram_coverage_fail_under", None)
        self.required = _ids(list(opt("openprogram_coverage_require", None) or []))
        sources = opt("openprogram_coverage_source", None) or []
        self.sources = [s.strip() for v in sources for s in str(v).split(",") if s.strip()]
        base = config.invocation_params.dir
        self.data_file = (base / str(opt("openprogram_coverage_data", ".coverage"))).resolve()
        self.parts = self.data_file.with_name(self.data_file.name + ".openprogram-parts")
        self.worker = getattr(config, "workerinput", None)
        self.controller = self.worker is None and opt("dist", "no") != "no"
        self.runs: dict[str, Any] = {}
        self.locations: dict[str, Any] = {}
        self.tool_code: list[dict[str, Any]] | None = None
        self.problems: list[str] = []
        self.coverage: BehaviourCoverage | None = None
        self.code: Any = None
        if self.fail_under is not None and not 0 <= self.fail_under <= 100:
            raise pytest.UsageError(
                "--openprogram-coverage-fail-under takes a per cent from 0 to 100, "
                f"got {self.fail_under:g}"
            )

    # ------------------------------------------------------------------ measuring

    def start(self) -> None:
        """Start coverage.py where tests run (not on an xdist controller)."""
        if not self.sources:
            return
        from openprogram_sim.coverage import (
            CodeCoverage,
            CoverageInUseError,
            CoverageNotInstalledError,
        )

        try:
            if self.controller:  # said here once, not by every worker
                CodeCoverage(self.sources, self.data_file)
                shutil.rmtree(self.parts, ignore_errors=True)
                return
            if self.worker is not None:
                self.parts.mkdir(parents=True, exist_ok=True)
                part = self.parts / self.data_file.name
                suffix = str(self.worker["workerid"])
                self.code = CodeCoverage(self.sources, part, suffix=suffix)
            else:
                self.code = CodeCoverage(self.sources, self.data_file)
            self.code.start()
        except (CoverageInUseError, CoverageNotInstalledError) as exc:
            self.code = None
            raise pytest.UsageError(f"--openprogram-coverage-source: {exc}") from None

    def _context(self, item: pytest.Item) -> str:
        from openprogram_sim.plugin._items import ScenarioItem

        if isinstance(item, ScenarioItem):
            try:
                return item.path.resolve().relative_to(self.config.rootpath).as_posix()
            except (ValueError, OSError):
                return str(item.path)
        return item.nodeid

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.code is not None:
            self.code.switch(self._context(item))

    @pytest.hookimpl(wrapper=True, trylast=True)  # inside the plugin's: it lets the run go
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report: pytest.TestReport = yield
        verdict = getattr(item, "verdict", None)  # a scenario item's, until it lets it go
        scenario = getattr(item, "scenario", None)
        if report.when == "call" and verdict is not None and scenario is not None:
            data: dict[str, Any] = {"path": self._context(item)}
            data.update(behaviours_of(verdict.outcome).to_json())
            if self.sources:
                from openprogram_sim.coverage import tool_locations

                data["tools"] = tool_locations([scenario])
            setattr(report, REPORT_ATTR, data)
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, REPORT_ATTR, None)
        if data is None:
            return
        self.runs[data["path"]] = data
        for name, where in (data.get("tools") or {}).items():
            self.locations.setdefault(name, where)

    # ------------------------------------------------------------------ the end

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.code is not None:
            self.code.stop()
        if self.worker is not None:
            return
        if self.sources:
            self.tool_code = self._tool_code()
        coverage = self.coverage = BehaviourCoverage()
        for path, data in sorted(self.runs.items()):
            coverage.add(path, data)
        if self.json_path:
            self._write_json(coverage)
        self.problems = coverage.failures(fail_under=self.fail_under, require=self.required)
        if self.problems and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _tool_code(self) -> list[dict[str, Any]]:
        from openprogram_sim.coverage import combine, tool_code

        if self.controller:
            combine(self.data_file, sorted(self.parts.glob(self.data_file.name + ".*")))
            shutil.rmtree(self.parts, ignore_errors=True)
        base = self.config.invocation_params.dir
        return tool_code(self.data_file, self.locations, base=base)

    def _write_json(self, coverage: BehaviourCoverage) -> None:
        data = coverage.to_json()
        if self.tool_code is not None:
            data["tools"] = [{k: v for k, v in t.items() if k != "source"} for t in self.tool_code]
            data["coverage_data"] = str(self.data_file)
        target = self.config.invocation_params.dir / str(self.json_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.worker is not None or self.coverage is None:
            return
        write = terminalreporter.write_line
        if self.show:
            terminalreporter.write_sep("-", "openprogram behaviour coverage")
            for line in self.coverage.table().splitlines():
                write(line)
        if self.tool_code is not None:
            from openprogram_sim.coverage import code_table

            terminalreporter.write_sep("-", "openprogram tool code coverage")
            for line in code_table(self.tool_code, str(self.data_file)).splitlines():
                write(line)
        for problem in self.problems:
            for k, line in enumerate(problem.splitlines()):
                write(("FAIL openprogram coverage: " if k == 0 else "") + line, red=True)
