"""``pytest --openprogram-scenarios --openprogram-trace-out DIR [--openprogram-otel]``: each
scenario item's run written as ``openprogram-sim run --trace-out`` writes it, and read back
by ``check`` with the item's verdict."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openprogram_sim.cli import main as cli_main

HAVE_SDK = all(
    importlib.util.find_spec(name) is not None
    for name in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.common")
)
if HAVE_SDK:
    # Imported here, in the outer session: pytester's in-process runs drop the modules a run
    # imported when it ends, and a later test of this worker would then mix a re-imported
    # copy of the OTel API (other context keys, other enums) with the SDK still held here.
    import opentelemetry.exporter.otlp.proto.common.trace_encoder
    import opentelemetry.sdk.trace
    import opentelemetry.sdk.trace.export  # noqa: F401

BROKEN = """\
scenario: a search that runs twice
tools:
  search: {returns: "3 results"}
exec: {content: "Find.", tools: [search]}
model:
  - tool_calls: [{search: {q: a}}]
  - tool_calls: [{search: {q: b}}]
  - text: done
expect:
  properties:
    - at_most: {tool: search, times: 1}
"""

HELD = """\
scenario: one search
tools:
  search: {returns: "3 results"}
exec: {content: "Find.", tools: [search]}
model:
  - tool_calls: [{search: {q: a}}]
  - text: done
expect:
  properties:
    - at_most: {tool: search, times: 1}
"""

RULES = "- at_most: {tool: search, times: 1}\n"
FILES = [
    "scenarios__broken--a-search-that-runs-twice",
    "scenarios__held--one-search",
]


def _project(path: Path) -> None:
    (path / "scenarios").mkdir()
    (path / "scenarios" / "broken.yaml").write_text(BROKEN)
    (path / "scenarios" / "held.yaml").write_text(HELD)
    (path / "rules.yaml").write_text(RULES)


def _check(path: Path, trace: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    cwd = Path.cwd()
    os.chdir(path)
    try:
        code = cli_main(["check", str(trace), "--properties", "rules.yaml"])
    finally:
        os.chdir(cwd)
    return code, capsys.readouterr().out.splitlines()[0]


def test_each_item_writes_its_trace_and_check_gives_its_verdict(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    _project(pytester.path)
    result = pytester.runpytest("--openprogram-scenarios", "--openprogram-trace-out=traces")
    result.assert_outcomes(passed=1, failed=1)
    folder = pytester.path / "traces"
    assert sorted(p.name for p in folder.iterdir()) == [f"{f}.trace.json" for f in FILES]
    broken = json.loads((folder / f"{FILES[0]}.trace.json").read_text())
    assert (broken["path"], broken["title"]) == (
        "scenarios/broken.yaml",
        "a search that runs twice",
    )
    ends = [e for e in broken["trace"] if e["type"] == "tool_execution_end"]
    assert [(e["tool_name"], e["args"], e["result"]) for e in ends] == [
        ("search", {"q": "a"}, "3 results"),
        ("search", {"q": "b"}, "3 results"),
    ]
    assert _check(pytester.path, folder / f"{FILES[0]}.trace.json", capsys) == (
        1,
        f"FAIL  {folder / FILES[0]}.trace.json",
    )
    assert _check(pytester.path, folder / f"{FILES[1]}.trace.json", capsys) == (
        0,
        f"PASS  {folder / FILES[1]}.trace.json",
    )


@pytest.mark.skipif(not HAVE_SDK, reason="needs the otel extra")
def test_otel_writes_the_spans_beside_each_trace(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    _project(pytester.path)
    result = pytester.runpytest(
        "--openprogram-scenarios", "--openprogram-trace-out", "out", "--openprogram-otel"
    )
    result.assert_outcomes(passed=1, failed=1)
    folder = pytester.path / "out"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"{f}.{kind}.json" for f in FILES for kind in ("trace", "otlp")
    )
    for name, code in zip(FILES, (1, 0), strict=True):
        assert _check(pytester.path, folder / f"{name}.otlp.json", capsys)[0] == code


def test_otel_alone_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _project(pytester.path)
    result = pytester.runpytest("--openprogram-scenarios", "--openprogram-otel")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --openprogram-otel writes spans beside the traces: give "
            "--openprogram-trace-out DIR too"
        ]
    )


def test_otel_without_the_extra_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    _project(tmp_path)
    blocked = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import pytest\n"
        "sys.exit(pytest.main(sys.argv[1:]))\n"
    )
    args = ["-p", "no:cacheprovider", "--openprogram-scenarios", "--openprogram-trace-out=out"]
    ran = subprocess.run(
        [sys.executable, "-c", blocked, *args, "--openprogram-otel"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == pytest.ExitCode.USAGE_ERROR, ran.stdout + ran.stderr
    assert (
        "ERROR: --openprogram-otel writes spans through the OpenTelemetry SDK, which is not "
        "installed (no module 'opentelemetry.exporter'); install the otel extra: pip install "
        "'openprogram-sim[otel]'"
    ) in ran.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_xdist_workers_write_every_items_trace(pytester: pytest.Pytester) -> None:
    _project(pytester.path)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--openprogram-scenarios",
        "--openprogram-trace-out=traces",
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    assert sorted(p.name for p in (pytester.path / "traces").iterdir()) == [
        f"{f}.trace.json" for f in FILES
    ]
