"""The README is a contract: its example runs and prints what it shows; its test command is
what CI runs."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


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
    assert test_command.endswith("pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command.replace(" -q", "") in ci.replace(" -q", "")


def test_the_failure_diff_shown_is_what_the_cli_prints() -> None:
    from openprogram_sim.cli.run import _print_text, run_paths

    shown = next(b for b in _blocks("text") if "did not match" in b)
    out = io.StringIO()
    _print_text(run_paths([ROOT / "tests" / "sim" / "data" / "steering_broken.yaml"]), 0.0, out)
    printed = out.getvalue()
    start = printed.index("- events")
    assert printed[start : start + len(shown)] == shown


def test_the_tools_example_prints_what_the_text_says() -> None:
    code = next(b for b in _blocks("python") if "agentic_function" in b and "choices" in b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_tools"})
    assert out.getvalue() == "Done: owls hoot.\nham\n"


def test_docs_link_nothing_outside_the_repository() -> None:
    """A user's clone has only this repository: no link may reach out of it."""
    import re

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text()
        assert "../shared" not in text, page
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
            if "://" in target:
                continue
            assert (page.parent / target).resolve().exists(), f"{page.name}: {target}"
