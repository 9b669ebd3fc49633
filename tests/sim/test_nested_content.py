"""A nested tool's ``exec.content`` fills in plain ``{name}`` placeholders only: a format
spec, an attribute or an index stays as written, and the filled-in prompt is held to the
scenario file's size limit."""

from __future__ import annotations

from pathlib import Path

from _support import run_cli

from openprogram_sim.scenario import MAX_BYTES

SCENARIO = """\
scenario: nested content
tools:
  research:
    parameters: {{type: object, properties: {{topic: {{type: string}}}}, required: [topic]}}
    exec: {{content: {content}}}
exec:
  content: "Research owls."
  tools: [research]
model:
  - tool_calls: [{{research: {{topic: {topic}}}}}]
  - text: "Owls hoot."
  - text: "They hoot."
expect:
  result: "They hoot."
{expect}
"""


def run(tmp_path: Path, content: str, topic: str, expect: str) -> str:
    (tmp_path / "nested.yaml").write_text(
        SCENARIO.format(content=f'"{content}"', topic=topic, expect=expect)
    )
    result = run_cli("run", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    return result.stdout


def test_only_plain_names_are_filled_in(tmp_path: Path) -> None:
    content = (
        "look into {topic}, {topic:>200}, {topic.__class__.__mro__}, {topic[0]}, {topic!r}, "
        "{{topic}}, {missing}"
    )
    prompt = (
        "look into owls, {topic:>200}, {topic.__class__.__mro__}, {topic[0]}, {topic!r}, "
        "{topic}, {missing}"
    )
    expect = f'  requests:\n    - {{depth: 1, round: 1, last_message: {{text: "{prompt}"}}}}'
    assert "1 passed" in run(tmp_path, content, "owls", expect)


def test_a_huge_width_spec_is_not_applied(tmp_path: Path) -> None:
    """The 362-byte file of the report: ``{topic:>2000000000}`` asked for a 2 GB prompt."""
    expect = '  requests:\n    - {depth: 1, round: 1, last_message: {text: "{topic:>2000000000}"}}'
    assert "1 passed" in run(tmp_path, "{topic:>2000000000}", "owls", expect)


def test_a_prompt_filled_in_past_the_size_limit_is_the_tools_error(tmp_path: Path) -> None:
    """Plain names still multiply an argument: eleven placeholders of a 1 MiB argument."""
    topic = "o" * (1024 * 1024)
    expect = (
        "  events:\n    - tool_execution_end: {tool_name: research, is_error: true, result: "
        "\"the nested exec's content would be 11,534,336 characters once its arguments are "
        f"filled in; the limit is {MAX_BYTES:,} (the scenario file's, fixed): pass shorter "
        'arguments or fewer placeholders"}'
    )
    (tmp_path / "nested.yaml").write_text(
        SCENARIO.format(content='"' + "{topic}" * 11 + '"', topic=topic, expect=expect).replace(
            '  - text: "Owls hoot."\n', ""
        )
    )
    result = run_cli("run", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:]
