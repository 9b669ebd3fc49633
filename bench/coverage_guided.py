"""Plain generation against ``--coverage-guided`` on a bug behind nested branches, over seeds.

    python bench/coverage_guided.py [--examples 1000] [--seeds 5] [--depth 5]

The planted tool ``grade(a, b, ...)`` ends its process (``sys.exit``) only when all its
integers (``--depth``, 5) are over 1,000, each test one branch deeper: the case the
coverage-guided mode is for (each branch passed runs more lines of the tool, which
``target()`` is fed). Each
campaign is one chunk (``chunk_size=examples``), so Hypothesis's targeting phase gets the
whole budget. Prints, per mode, how many seeds found the bug and after how many runs.
Found-or-not is what is compared; the times are those of a shared machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def _tool(depth: int) -> str:
    """The planted tool's module: ``grade`` with ``depth`` nested tests, one per argument."""
    names = [chr(ord("a") + i) for i in range(depth)]
    lines = [
        "import sys",
        "from openprogram import ToolRegistry, function",
        "",
        "registry = ToolRegistry()",
        "",
        "",
        "@function(registry=registry)",
        f"def grade({', '.join(f'{n}: int' for n in names)}) -> str:",
        '    """Grades scores.',
        "",
        "    Args:",
        *(f"        {n}: A score." for n in names),
        '    """',
        '    note = "-"',
    ]
    for i, n in enumerate(names):
        pad = "    " * (i + 1)
        lines += [f"{pad}if {n} > 1000:", f"{pad}    note += {n!r}"]
    lines += ["    " * (depth + 1) + "sys.exit(9)", "    return note", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--depth", type=int, default=5, help="nested branches (5)")
    args = parser.parse_args()
    from openprogram_sim.fuzz import ToolTarget, run_tool_campaign
    from openprogram_sim.fuzz.tools import SearchOptions

    rows: dict[str, list[int | None]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "nested_grade_tool.py").write_text(_tool(args.depth))
        target = ToolTarget.load(registry="nested_grade_tool:registry", pythonpath=[tmp])
        for mode in ("plain", "coverage-guided"):
            search = SearchOptions(coverage_guided=mode != "plain")
            found: list[int | None] = []
            for seed in range(1, args.seeds + 1):
                start = time.perf_counter()
                result = run_tool_campaign(target, args.examples, seed=seed, workers=1,
                                           regressions=None, chunk_size=args.examples,
                                           search=search)  # fmt: skip
                runs = result.stats.runs if result.failure is not None else None
                found.append(runs)
                took = time.perf_counter() - start
                print(f"{mode:<16} seed {seed}: {'found after ' + str(runs) if runs else 'missed'}"
                      f" ({took:.0f} s)", flush=True)  # fmt: skip
            rows[mode] = found
    summary = {mode: sum(r is not None for r in found) for mode, found in rows.items()}
    print(f"depth {args.depth}, found in {args.examples} examples, of {args.seeds} seeds: "
          f"{summary}")  # fmt: skip
    print(json.dumps({"examples": args.examples, "seeds": args.seeds, "depth": args.depth,
                      "found": rows}))  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
