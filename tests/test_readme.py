"""The README is a contract: its example runs and prints what it shows; its test command is
what CI runs; it stays a landing page. (The pages under docs/ are checked by test_docs.py.)"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
GETTING_STARTED = (ROOT / "docs" / "getting-started.md").read_text()


def _blocks(lang: str, text: str = README) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_the_two_round_example_prints_the_events_shown() -> None:
    code = next(b for b in _blocks("python") if "ScriptedModel" in b and "show" in b)
    expected = next(b for b in _blocks("text") if "agent_start" in b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert out.getvalue() == expected


def test_ci_runs_the_readme_test_command() -> None:
    commands = [
        line for line in _blocks("bash")[0].splitlines() if line and not line.startswith("#")
    ]
    assert len(commands) == 2, commands
    test_command = commands[1]
    assert test_command.endswith("pytest -n auto")  # pytest-xdist: every core
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command.replace(" -q", "") in ci.replace(" -q", "")


def test_ci_builds_the_docs_site_strictly() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "'.[docs]'" in ci
    assert re.search(r"mkdocs build --strict", ci)


def test_the_readme_stays_a_landing_page() -> None:
    """Tutorial and reference live in docs/; the README says what this is and where to go."""
    assert len(README) < 12_000, f"README.md is {len(README)} characters"


def _printed(name: str) -> str:
    from openprogram_sim.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["run", str(ROOT / "tests" / "sim" / "data" / name)])
    assert code == 1
    printed = out.getvalue().replace(str(ROOT) + "/", "")
    return printed[printed.index("- events") :]


def test_the_failure_diff_shown_is_what_the_cli_prints() -> None:
    shown = next(b for b in _blocks("text", GETTING_STARTED) if "steering_broken.yaml" in b)
    assert "did not match" in shown
    assert _printed("steering_broken.yaml")[: len(shown)] == shown


def test_the_nested_diff_and_its_hints_shown_are_what_the_cli_prints() -> None:
    shown = next(b for b in _blocks("text", GETTING_STARTED) if "notes_broken.yaml" in b)
    assert "args.body" in shown and "hint: " in shown
    assert _printed("notes_broken.yaml")[: len(shown)] == shown


def test_docs_link_nothing_outside_the_repository() -> None:
    """A user's clone has only this repository: no link may reach out of it."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        text = page.read_text()
        assert "../shared" not in text, page
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target:
                continue
            assert (page.parent / target).resolve().exists(), f"{page.name}: {target}"
            assert ROOT in (page.parent / target).resolve().parents, f"{page.name}: {target}"


def test_the_scenario_shown_is_a_library_file_that_passes() -> None:
    """The README's scenario file is ``scenarios/setup/notes_conversation.yaml`` word for
    word (after its $schema line), and it passes."""
    from openprogram_sim import check_outcome, load_scenario, run_scenario

    path = ROOT / "scenarios" / "setup" / "notes_conversation.yaml"
    shown = next(b for b in _blocks("yaml") if "conversation:" in b)
    assert shown == path.read_text().split("\n", 1)[1]
    verdict = check_outcome(run_scenario(load_scenario(path)))
    assert verdict.passed, verdict.report()
