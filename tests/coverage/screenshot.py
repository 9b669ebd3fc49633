"""Regenerate docs/coverage.png: the scenario library's report with the behaviour table and
the matrix open, in headless Chromium.

    .venv/bin/python tests/coverage/screenshot.py [docs/coverage.png]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from coverage_browser import chromium, missing

ROOT = Path(__file__).resolve().parents[2]


def main(target: Path) -> None:
    reason = missing()
    if reason is not None:
        raise SystemExit(f"screenshot: {reason}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(ROOT / "scenarios", work / "scenarios")
        cli = Path(sys.executable).parent / "openprogram-sim"
        subprocess.run([str(cli), "run", "scenarios", "--report", "report.html"], cwd=work,
                       check=True, capture_output=True)  # fmt: skip
        with chromium(work / "profile", width=1280, height=1700) as driver:
            driver.get((work / "report.html").as_uri())
            driver.execute_script(
                "document.getElementById('coverage').open = true;"
                "document.getElementById('matrix').open = true;"
                "window.openprogramReport.matrix();"
                "var rows = document.querySelectorAll('table.behaviours tbody tr');"
                "for (var i = 7; i < rows.length - 1; i++) rows[i].hidden = true;"
            )
            section = driver.find_element("id", "coverage")
            target.parent.mkdir(parents=True, exist_ok=True)
            section.screenshot(str(target))
    print(f"wrote {target}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "coverage.png")
