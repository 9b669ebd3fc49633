"""The pytest plugin's overhead per scenario item, measured so a shared machine's noise shows:
``python bench/plugin_overhead.py [--size N] [--repeats R] [--json]``.

The same figure as ``bench/run.py``'s ``plugin_overhead_ms_per_item`` (a ``pytest
--openprogram-scenarios`` session over a library of ``--size`` scenario files, less a
session of as many trivial test items, less the scenarios' own in-process time, per item),
with two differences:

- each repeat takes the three measurements back to back (the scenario session, the trivial
  session, the in-process pass in a fresh process), so a repeat's overhead is computed from
  figures taken in the same seconds; the repeats' minimum and median are reported with the
  load average beside each;
- the library is ``scenarios/`` copied with its helper modules (``*.py`` beside the YAML
  files: ``scenarios/setup/library_notes.py`` is imported by ``python:`` tools), which
  ``bench/run.py``'s copy of the YAML files alone leaves out;
- beside the wall clock, each figure by the CPU clock (the sessions' user + system time,
  the in-process pass's ``process_time``), which a loaded machine disturbs far less; and
  each again with the import of ``play`` and ``scenario`` counted as the scenarios' own
  (the in-process pass imports them before its timer; the session pays them once, as
  ``openprogram-sim run`` does, whatever the plugin does per item).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

OWN = """
import sys, time
from pathlib import Path
start, cpu = time.perf_counter(), time.process_time()
from openprogram_sim.play import check_outcome, run_scenario
from openprogram_sim.scenario import load_scenario
imported = time.perf_counter() - start, time.process_time() - cpu
files = [Path(line) for line in Path(sys.argv[1]).read_text().splitlines()]
start, cpu = time.perf_counter(), time.process_time()
for path in files:
    check_outcome(run_scenario(load_scenario(path)))
print((time.perf_counter() - start) / len(files), (time.process_time() - cpu) / len(files),
      imported[0] / len(files), imported[1] / len(files))
"""


def library(target: Path, size: int) -> list[Path]:
    """``scenarios/`` copied into ``target`` (helper modules included) until it holds
    ``size`` scenario files; the scenario files, in order."""
    source = ROOT / "scenarios"
    yamls = sorted(source.rglob("*.yaml"))
    helpers = sorted(p for p in source.rglob("*.py") if "__pycache__" not in p.parts)
    files: list[Path] = []
    copy = 0
    while len(files) < size:
        for path in yamls:
            if len(files) == size:
                break
            dest = target / f"c{copy}" / path.relative_to(source)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
            files.append(dest)
        for path in helpers:
            dest = target / f"c{copy}" / path.relative_to(source)
            if dest.parent.exists():
                shutil.copyfile(path, dest)
        copy += 1
    return files


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as bench/run.py: bytecode caches on
    return env


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pytest_session(folder: Path, *args: str) -> tuple[float, float]:
    """The session's wall time and its process's CPU time (user + system)."""
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env=_env(),
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-2000:])
    return elapsed, _children_cpu() - cpu


def own_pass(listing: Path) -> tuple[float, float, float, float]:
    """The scenarios' own in-process time per file, wall and CPU (a fresh process), and
    the import of what runs them (``play``, ``scenario``: what ``openprogram-sim run`` imports
    too) shared out per file."""
    done = subprocess.run(
        [sys.executable, "-c", OWN, str(listing)], capture_output=True, text=True, env=_env()
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    wall, cpu, import_wall, import_cpu = map(float, done.stdout.strip().splitlines()[-1].split())
    return wall, cpu, import_wall, import_cpu


def load() -> float:
    return os.getloadavg()[0]


def measure(size: int, repeats: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "scen").mkdir()
        files = library(base / "scen" / "scenarios", size)
        listing = base / "files.txt"
        listing.write_text("\n".join(map(str, files)))
        (base / "trivial").mkdir()
        (base / "trivial" / "test_trivial.py").write_text(
            f"import pytest\n\n@pytest.mark.parametrize('i', range({size}))\n"
            "def test_item(i):\n    assert i >= 0\n"
        )
        pytest_session(base / "scen", "--openprogram-scenarios")  # warm the bytecode caches
        pytest_session(base / "trivial")
        rows = []
        for _ in range(repeats):
            before = load()
            scen, scen_cpu = (
                t / size for t in pytest_session(base / "scen", "--openprogram-scenarios")
            )
            trivial, trivial_cpu = (t / size for t in pytest_session(base / "trivial"))
            own, own_cpu, imp, imp_cpu = own_pass(listing)
            rows.append(
                {
                    "overhead_ms": round((scen - trivial - own) * 1000, 3),
                    "overhead_cpu_ms": round((scen_cpu - trivial_cpu - own_cpu) * 1000, 3),
                    # the same with the import of play and scenario counted as the scenarios' own
                    "overhead_less_import_ms": round((scen - trivial - own - imp) * 1000, 3),
                    "overhead_cpu_less_import_ms": round(
                        (scen_cpu - trivial_cpu - own_cpu - imp_cpu) * 1000, 3
                    ),
                    "import_ms": round(imp * 1000, 3),
                    "scenario_item_ms": round(scen * 1000, 3),
                    "trivial_item_ms": round(trivial * 1000, 3),
                    "own_ms": round(own * 1000, 3),
                    "load": [round(before, 2), round(load(), 2)],
                }
            )
    overheads = [r["overhead_ms"] for r in rows]
    cpu = [r["overhead_cpu_ms"] for r in rows]
    less = [r["overhead_less_import_ms"] for r in rows]
    less_cpu = [r["overhead_cpu_less_import_ms"] for r in rows]
    best = {k: min(r[k] for r in rows) for k in ("scenario_item_ms", "trivial_item_ms")}
    return {
        "size": size,
        "repeats": rows,
        "overhead_ms_min": min(overheads),
        "overhead_ms_median": round(statistics.median(overheads), 3),
        "overhead_cpu_ms_min": min(cpu),
        "overhead_cpu_ms_median": round(statistics.median(cpu), 3),
        "overhead_less_import_ms_min": min(less),
        "overhead_less_import_ms_median": round(statistics.median(less), 3),
        "overhead_cpu_less_import_ms_min": min(less_cpu),
        "overhead_cpu_less_import_ms_median": round(statistics.median(less_cpu), 3),
        # bench/run.py's formula: best scenario session less best trivial session less own
        "overhead_ms_run_py_formula": round(
            best["scenario_item_ms"] - best["trivial_item_ms"] - rows[0]["own_ms"], 3
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.size, args.repeats)
    for row in result["repeats"]:  # type: ignore[union-attr]
        print(row)
    print(f"overhead per item: min {result['overhead_ms_min']} ms, "
          f"median {result['overhead_ms_median']} ms; CPU: min {result['overhead_cpu_ms_min']} "
          f"ms, median {result['overhead_cpu_ms_median']} ms")  # fmt: skip
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
