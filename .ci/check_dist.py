"""The distribution as a user gets it; `.ci/run` runs this after the tests (issue 22).

1. Build the sdist and, from it, the wheel (``python -m build``), and check their metadata
   (``twine check --strict``). The name is openprogram-sim: the index's "openprogram" is
   another project that also provides ``import openprogram``.
2. The wheel holds every file of the two packages (``py.typed``, the report's templates, the
   engine's ``__distribution__`` line that openprogram_sim's import guard reads), nothing else,
   and declares the ``openprogram-sim`` command and the pytest plugin.
3. In a fresh venv, the example project installed the way examples/weather_agent/README.md
   says from a clone (``pip install -e . -e examples/weather_agent``) resolves to this project:
   ``pip install --dry-run --report`` lists openprogram-sim from the clone and no "openprogram".
4. In that venv, the wheel and the example installed the wheel way (``pip install
   dist/openprogram_sim-*.whl -e examples/weather_agent``); the main job runs with that venv's
   binary from the repository root (with an HTML report, so the templates are read), and the
   example's scenarios from its folder.

Usage: ``.venv/bin/python .ci/check_dist.py`` (the venv needs the test extra: build, twine).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "weather_agent"
NAME = "openprogram-sim"
PACKAGES = ("openprogram", "openprogram_sim")
MARKER = '__distribution__ = "openprogram-sim"'


def run(*command: str | Path, cwd: Path = ROOT) -> str:
    shown = " ".join(str(c) for c in command).replace(str(ROOT) + "/", "")
    print(f"+ {shown}", flush=True)
    result = subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=900
    )
    if result.returncode != 0:
        sys.exit(
            f"check_dist: failed ({result.returncode}): {shown}\n{result.stdout}{result.stderr}"
        )
    return result.stdout


def build(out: Path) -> tuple[Path, Path]:
    # Building the sdist writes openprogram_sim.egg-info into the clone; left there, any
    # process with the clone on sys.path (python -m pytest) sees a second installed copy
    # whose file list makes pytest rewrite every module of both packages.
    egg_info = ROOT / "openprogram_sim.egg-info"
    existed = egg_info.exists()
    try:
        run(sys.executable, "-m", "build", "--outdir", out, ROOT)
    finally:
        if not existed:
            shutil.rmtree(egg_info, ignore_errors=True)
    (sdist,), (wheel,) = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    run(sys.executable, "-m", "twine", "check", "--strict", sdist, wheel)
    return sdist, wheel


def source_files() -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def check_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
        engine = archive.read("openprogram/__init__.py").decode()
    problems = [f"missing from the wheel: {n}" for n in sorted(source_files() - names)]
    problems += [
        f"not ours, in the wheel: {n}"
        for n in sorted(names)
        if n.split("/")[0] not in (*PACKAGES, info)
    ]
    if f"\nName: {NAME}\n" not in metadata:
        problems.append(f"METADATA does not say Name: {NAME}")
    for line in (
        "openprogram-sim = openprogram_sim.cli:main",
        "openprogram = openprogram_sim.plugin",
    ):
        if line not in entry_points:
            problems.append(f"entry_points.txt lacks {line!r}")
    if f"{info}/licenses/LICENSE" not in names:
        problems.append("the wheel lacks the LICENSE file (license = MIT in pyproject)")
    if MARKER not in engine:
        problems.append(f"openprogram/__init__.py lacks {MARKER!r} (the import guard reads it)")
    if problems:
        sys.exit("check_dist: " + "\n  ".join([f"{wheel.name}:", *problems]))
    print(f"  {wheel.name}: {len(names)} files, both packages whole, entry points declared")


def check_example_resolves(pip: Path, report: Path) -> None:
    run(pip, "install", "-q", "--dry-run", "--report", report, "-e", ROOT, "-e", EXAMPLE)
    installs = json.loads(report.read_text())["install"]
    found = {i["metadata"]["name"].lower().replace("_", "-"): i for i in installs}
    ours = found.get(NAME)
    if "openprogram" in found:
        other = found["openprogram"]
        sys.exit(
            f'check_dist: the example resolves to "openprogram" {other["metadata"]["version"]} '
            f"from {other['download_info']['url']}, another project, not to {NAME}"
        )
    if ours is None or "weather-agent" not in found:
        listed = sorted(f"{n} {i['metadata']['version']}" for n, i in found.items())
        sys.exit(f"check_dist: the example does not resolve to {NAME} from the clone: {listed}")
    url = ours["download_info"]["url"]
    if url.rstrip("/") != ROOT.as_uri():
        sys.exit(f"check_dist: {NAME} resolved from {url}, not from the clone {ROOT.as_uri()}")
    print(
        f"  dry run: {NAME} {ours['metadata']['version']} from {url}, weather-agent "
        f"{found['weather-agent']['metadata']['version']}, {len(found) - 2} dependencies, "
        'no "openprogram"'
    )


def run_from_wheel(venv: Path, wheel: Path, report: Path) -> None:
    run(venv / "bin" / "pip", "install", "-q", wheel, "-e", EXAMPLE)
    where = run(venv / "bin" / "python", "-P", "-c",
                "import openprogram, openprogram_sim; "
                "print(openprogram.__file__); print(openprogram_sim.__file__)")  # fmt: skip
    site = venv.resolve()
    if not all(site in Path(line).resolve().parents for line in where.split()):
        sys.exit(f"check_dist: the fresh venv imports the packages from elsewhere:\n{where}")
    main = run(venv / "bin" / "openprogram-sim", "run", "scenarios/", "--report", report)
    print(f"  {main.splitlines()[-1]}")
    html = report.read_text()
    if "<style" not in html or len(html) < 10_000:
        sys.exit(f"check_dist: the report {report} looks unrendered ({len(html)} characters)")
    example = run(venv / "bin" / "openprogram-sim", "run", "scenarios", cwd=EXAMPLE)
    print(f"  examples/weather_agent: {example.splitlines()[-1]}")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="check_dist.") as temp:
        work = Path(temp)
        _, wheel = build(work / "dist")
        check_wheel(wheel)
        venv = work / "venv"
        run(sys.executable, "-m", "venv", venv)
        check_example_resolves(venv / "bin" / "pip", work / "dry-run.json")
        run_from_wheel(venv, wheel, work / "report.html")
    print("check_dist: ok")


if __name__ == "__main__":
    main()
