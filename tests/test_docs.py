"""The documentation pages are a contract too: every ``python`` block runs and prints what the
``text`` block after it shows, every whole scenario in a ``yaml`` block loads and passes, and
the site's nav holds every page.

A block that cannot run (it needs an API key, it is a fragment, a signature) says so with an
HTML comment on the line before it, which the test recognises::

    <!-- not-run: needs an API key -->

Such a block must still be valid: Python compiles, YAML parses.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]

_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
    re.S | re.M,
)
_NOT_RUN = re.compile(r"<!--\s*not-run:\s*(?P<why>.+?)\s*-->\s*\Z", re.S)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    not_run: str | None  # why, when marked
    output: str | None  # the ``text`` block right after it, if any

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks, each with its not-run mark and the output shown after it (a
    ``text`` block separated from it by at most one line of prose, e.g. "prints")."""
    text = page.read_text()
    found = list(_FENCE.finditer(text))
    out = []
    for i, m in enumerate(found):
        indent = m["indent"]
        code = "".join(
            line[len(indent) :] if line.startswith(indent) else line
            for line in m["body"].splitlines(keepends=True)
        )
        before = text[: m.start()]
        mark = _NOT_RUN.search(before[-300:])
        output = None
        if i + 1 < len(found) and found[i + 1]["lang"] == "text":
            between = text[m.end() : found[i + 1].start()].strip()
            if "\n" not in between and len(between) < 40:
                output = found[i + 1]["body"]
        out.append(
            Block(
                page=page,
                line=before.count("\n") + 1,
                lang=m["lang"],
                code=code,
                not_run=mark["why"] if mark else None,
                output=output,
            )
        )
    return out


ALL = [b for page in PAGES for b in blocks(page)]
PYTHON = [b for b in ALL if b.lang == "python"]
SCENARIOS = [
    b
    for b in ALL
    if b.lang == "yaml"
    and isinstance(yaml.safe_load(b.code), dict)
    and "scenario" in yaml.safe_load(b.code)
]


def _id(block: Block) -> str:
    return block.where


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize("block", [b for b in PYTHON if b.not_run is None], ids=_id)
def test_a_python_block_runs_and_prints_what_the_page_shows(block: Block, at_root: None) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.code, block.where, "exec"), {"__name__": "docs_example"})
    if block.output is not None:
        assert out.getvalue() == block.output, f"{block.where}: the text block after it differs"


@pytest.mark.parametrize("block", [b for b in PYTHON if b.not_run is not None], ids=_id)
def test_a_python_block_marked_not_run_still_compiles(block: Block) -> None:
    compile(block.code, block.where, "exec")


def test_every_yaml_block_is_valid_yaml() -> None:
    for block in ALL:
        if block.lang == "yaml":
            yaml.safe_load(block.code)  # raises with the line within the block


@pytest.mark.parametrize("block", SCENARIOS, ids=_id)
def test_a_whole_scenario_loads_and_passes(block: Block, at_root: None) -> None:
    from openprogram_sim import check_outcome, parse_scenario, run_scenario

    scenario = parse_scenario(
        block.code,
        path=block.where,
        origin=block.page,
        # the example project's tools, and the library's notes tool (the README's scenario)
        pythonpath=[ROOT / "examples" / "weather_agent" / "src", ROOT / "scenarios" / "setup"],
    )
    if block.not_run is not None:
        return
    verdict = check_outcome(run_scenario(scenario))
    assert verdict.passed, verdict


def test_the_marks_are_found() -> None:
    """A guard for the parser above: the pages do hold runnable and marked blocks."""
    assert len([b for b in PYTHON if b.not_run is None]) >= 4
    assert any(b.not_run for b in PYTHON)
    assert len(SCENARIOS) >= 10
    assert any(b.output for b in PYTHON)


def _nav_files(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [f for item in nav for f in _nav_files(item)]
    if isinstance(nav, dict):
        return [f for value in nav.values() for f in _nav_files(value)]
    return []


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["docs_dir"] == "docs"
    nav = _nav_files(config["nav"])
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert sorted(set(nav) - pages) == [], "nav entries with no page"
    assert sorted(pages - set(nav)) == [], "pages missing from the nav (mkdocs.yml)"
    assert len(nav) == len(set(nav)), "a page is in the nav twice"


def test_every_page_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    linked = set(re.findall(r"\]\(docs/([^)#]+)", readme))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")} - {"index.md"}
    assert sorted(pages - linked) == []


def test_the_api_pages_document_the_public_faces() -> None:
    for module in ("openprogram", "providers", "tools", "events", "types"):
        page = (DOCS / "api" / f"{module}.md").read_text()
        name = "openprogram" if module == "openprogram" else f"openprogram.{module}"
        assert f"::: {name}\n" in page, module


@pytest.mark.slow
def test_the_site_builds_where_mkdocs_is_installed() -> None:
    """CI runs ``mkdocs build --strict`` after the tests; this finds a broken page sooner."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as site:
        done = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", site],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        )
    assert done.returncode == 0, done.stderr[-3000:]
