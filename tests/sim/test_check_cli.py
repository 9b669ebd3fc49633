"""``openprogram-sim check TRACE_FILE --properties FILE [--trajectory FILE]``: a trace that
did not come from a run here, checked with the rules a scenario uses, with the same verdict;
the files it reads named with their line when they are wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _support import run_cli

SCENARIO = """\
scenario: two searches, one fetch
tools:
  search: {returns: "hit"}
  fetch: {returns: "page"}
exec: {content: "Find it.", tools: [search, fetch]}
model:
  - tool_calls: [{search: {q: weather in Paris}}, {fetch: {url: "http://a"}}]
  - tool_calls: [{search: {q: weather in Lyon}}]
  - text: "Found."
expect:
  properties:
    - ends_with: {reason: stop}
    - at_most: {tool: search, times: 1}
"""

RULES = """\
# the rules the scenario uses, for traces from production
properties:
  - ends_with: {reason: stop}
  - at_most: {tool: search, times: 1}
"""

TRAJECTORY = """\
mode: in_order
calls:
  - search
  - [fetch, search]
"""

BROKEN = [
    "  search was called 2 times, at most 1 allowed: #6, #18 (beyond the limit: #18)",
    '    #18  tool_execution_start   d0 r2 search({"q": "weather in Lyon"})',
]
"""What the scenario's run and the check both say of rule 2."""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "search.yaml").write_text(SCENARIO)
    (tmp_path / "rules.yaml").write_text(RULES)
    (tmp_path / "trajectory.yaml").write_text(TRAJECTORY)
    ran = run_cli("run", "--json", "search.yaml", cwd=tmp_path)
    assert ran.returncode == 1
    (tmp_path / "run.json").write_text(ran.stdout)
    return tmp_path


def test_a_run_json_is_checked_with_the_same_verdict_as_the_scenario(files: Path) -> None:
    ran = run_cli("run", "search.yaml", cwd=files)
    assert "\n".join(BROKEN) in ran.stdout
    result = run_cli(
        "check", "run.json", "--properties", "rules.yaml", "--trajectory", "trajectory.yaml",
        cwd=files,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout == "\n".join(
        [
            "FAIL  run.json: search.yaml  (trajectory score 0.67)",
            "  - trajectory (in_order) did not match: score 0.67, min_score 1.0",
            "    at trajectory.yaml:1",
            "    score 0.67 (recall); precision 2/3 = 0.67, recall 2/3 = 0.67, F1 0.67",
            "    expected call 3 of 3 (round group 2: [fetch, search]) had no match: search "
            "(line 4)",
            "      calls that match it (#6, #18) are not in one round with its group, in order",
            "    calls made at depth 0, by round:",
            '      #6 search({"q": "weather in Paris"}) d0 r1  <- expected call 1',
            '      #10 fetch({"url": "http://a"}) d0 r1  <- expected call 2',
            '      #18 search({"q": "weather in Lyon"}) d0 r2',
            '  - property 2 (at_most) does not hold: at_most: {"tool": "search", "times": 1}',
            "    at rules.yaml:4",
            *(f"  {line}" for line in BROKEN),
            "",
            "1 trace(s) checked against a trajectory and 2 properties: 0 held, 1 failed",
            "",
        ]
    )


def test_a_trace_that_holds_exits_0(files: Path) -> None:
    (files / "rules.yaml").write_text(RULES.replace("times: 1", "times: 2"))
    result = run_cli("check", "run.json", "--properties", "rules.yaml", cwd=files)
    assert (result.returncode, result.stdout) == (
        0,
        "PASS  run.json: search.yaml\n\n1 trace(s) checked against 2 properties: 1 held, "
        "0 failed\n",
    )
    (files / "trajectory.yaml").write_text(TRAJECTORY + "min_score: 0.6\n")
    result = run_cli("check", "run.json", "--trajectory", "trajectory.yaml", cwd=files)
    # recall 2/3 = 0.67 >= 0.6: it holds, and the score is shown
    assert (result.returncode, result.stdout) == (
        0,
        "PASS  run.json: search.yaml  (trajectory score 0.67)\n\n1 trace(s) checked against "
        "a trajectory: 1 held, 0 failed\n",
    )


def test_a_trace_written_by_hand_is_a_list_or_a_trace_key(tmp_path: Path) -> None:
    trace = [
        {"type": "agent_start", "depth": 0, "round": 0},
        {
            "type": "tool_execution_start",
            "depth": 0,
            "round": 1,
            "tool_call_id": "c1",
            "tool_name": "send_email",
            "args": {"to": "boss"},
        },
        {"type": "agent_end", "depth": 0, "round": 1, "reason": "stop"},
    ]
    (tmp_path / "list.json").write_text(json.dumps(trace))
    (tmp_path / "one.json").write_text(json.dumps({"path": "prod-42", "trace": trace}))
    (tmp_path / "rules.yaml").write_text("- never: send_email\n- ends_with: {reason: stop}\n")
    for name in ("list.json", "one.json"):
        result = run_cli("check", name, "--properties", "rules.yaml", cwd=tmp_path)
        assert result.returncode == 1
        assert result.stdout.splitlines()[:5] == [
            f"FAIL  {name}",
            '  - property 1 (never) does not hold: never: "send_email"',
            "    at rules.yaml:1",
            '    send_email was called: #1 send_email({"to": "boss"}) d0 r1',
            '      #1   tool_execution_start   d0 r1 send_email({"to": "boss"})',
        ]


@pytest.mark.parametrize(
    ("file", "text", "args", "error"),
    [
        ("rules.yaml", "- at_most: {tool: search, times: many}\n- nevr: x\n", ["--properties"],
         "openprogram-sim check: 2 problems:\n  rules.yaml:1: ([0].at_most.times) Input "
         "should be a valid integer, unable to parse string as an integer (got \"many\")\n"
         "  rules.yaml:2: ([1].nevr) unknown rule 'nevr'; did you mean 'never'?\n"),
        ("rules.yaml", "at_most: 3\n", ["--properties"],
         "openprogram-sim check: rules.yaml: a properties file is a list of rules (- at_most: "
         "{tool: search, times: 3}), or a mapping whose properties: holds them\n"),
        ("rules.yaml", "- &a {never: x}\n- *a\n", ["--properties"],
         "openprogram-sim check: rules.yaml:2: an alias (*name); write the value out (aliases "
         "are not read here)\n"),
        ("rules.yaml", "- never: [x\n", ["--properties"],
         "openprogram-sim check: rules.yaml:2: not YAML: expected ',' or ']', but got "
         "'<stream end>'\n"),
        ("trajectory.yaml", "mode: sorted\ncalls: [a]\n", ["--trajectory"],
         "openprogram-sim check: trajectory.yaml:1: (mode) Input should be 'exact', "
         "'in_order', 'any_order', 'subset' or 'superset' (got \"sorted\")\n"),
        ("trajectory.yaml", "calls: [a]\nmod: exact\n", ["--trajectory"],
         "openprogram-sim check: trajectory.yaml:2: (mod) unknown key 'mod'; did you mean "
         "'mode'?\n"),
        ("run.json", '{"trace": [1]', ["--properties", "rules.yaml"],
         "openprogram-sim check: run.json:1: not JSON: Expecting ',' delimiter\n"),
        ("run.json", '{"trace": [1]}', ["--properties", "rules.yaml"],
         "openprogram-sim check: run.json: entry 0 is not a trace entry (a mapping with "
         "\"type\", \"depth\" and \"round\")\n"),
        ("run.json", '{"events": []}', ["--properties", "rules.yaml"],
         "openprogram-sim check: run.json: a trace file is a JSON list of trace entries, "
         "{\"trace\": [...]}, or the output of openprogram-sim run --json\n"),
    ],
)  # fmt: skip
def test_a_file_that_cannot_be_used_exits_2_naming_it(
    files: Path, file: str, text: str, args: list[str], error: str
) -> None:
    (files / file).write_text(text)
    argv = ["check", "run.json", *args]
    if args in (["--properties"], ["--trajectory"]):
        argv.append(file)
    result = run_cli(*argv, cwd=files)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", error)


def test_without_properties_or_a_trajectory_it_is_misuse(files: Path) -> None:
    result = run_cli("check", "run.json", cwd=files)
    assert (result.returncode, result.stderr) == (
        2,
        "openprogram-sim check: give --properties FILE, --trajectory FILE or both\n",
    )
