"""Your own properties as fuzz invariants (``openprogram-sim fuzz --properties FILE``, issue 25
item 3): a rule of ``expect.properties`` that a generated run breaks is a violation like the
built-in ones, shrunk, and written into the regression file under ``expect.properties``; the
file fails on the bug and passes on the fix. Real campaigns, real ``openprogram-sim run``s."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support import run_cli

from openprogram_sim.fuzz import UserProperties, run_campaign, run_generated

AT_MOST = {"at_most": {"tool": "search", "times": 2}}


def _calls(document: dict[str, Any]) -> list[str]:
    return [next(iter(c)) for turn in document["model"] for c in turn.get("tool_calls", ())]


@pytest.mark.slow
def test_a_loop_campaign_breaks_a_property_and_shrinks_it_to_three_calls(tmp_path: Path) -> None:
    props = UserProperties.of([AT_MOST], where=["props.yaml:2"])
    result = run_campaign(400, seed=1, regressions=tmp_path / "regs", properties=props)

    failure = result.failure
    assert failure is not None
    [violation] = failure.violations
    assert violation.startswith("#")
    assert (
        ' property at_most: {"tool": "search", "times": 2} (props.yaml:2) does not hold: '
        "search was called 3 times, at most 2 allowed: #"
    ) in violation
    assert failure.broke_properties == {"properties": [AT_MOST]}
    assert failure.path is not None and failure.reproduced
    [written] = (tmp_path / "regs").iterdir()
    assert written == failure.path
    document = yaml.safe_load(written.read_text())
    assert _calls(document) == ["search", "search", "search"]  # shrunk: no call to spare
    assert list(document["tools"]) == ["search"]
    assert document["expect"]["properties"] == [AT_MOST]

    failing = run_cli("run", str(written), cwd=tmp_path)
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "property 1 (at_most) does not hold" in failing.stdout, failing.stdout
    # the loop itself is correct: the file's other expectations are the seed's rules
    document["expect"]["properties"] = [{"at_most": {"tool": "search", "times": 3}}]
    relaxed = tmp_path / "relaxed.yaml"
    relaxed.write_text(yaml.safe_dump(document, sort_keys=False))
    passing = run_cli("run", str(relaxed), cwd=tmp_path)
    assert passing.returncode == 0, passing.stdout + passing.stderr


def test_properties_that_every_run_keeps_find_nothing(tmp_path: Path) -> None:
    keeps = [{"at_least": {"tool": {"$regex": ".*"}, "times": 0}}]
    result = run_campaign(64, seed=3, regressions=tmp_path, properties=keeps)
    assert result.failure is None, result.failure and result.failure.violations
    assert not list(tmp_path.iterdir())


def test_each_broken_rule_and_a_missed_trajectory_is_one_line_and_goes_into_the_file() -> None:
    outcome = run_generated({
        "scenario": "one search",
        "tools": {"search": {"returns": "ok"}, "fetch": {"returns": "x"}},
        "exec": {"content": "go"},
        "model": [{"tool_calls": [{"search": {"q": "a"}}]}, {"text": "done"}],
    })  # fmt: skip
    rules = [{"ends_with": {"reason": "stop"}}, {"ends_with": {"reason": "error"}}]
    trajectory = {"mode": "subset", "calls": ["fetch"]}
    props = UserProperties.of(rules, where=["p.yaml:2", "p.yaml:3"], trajectory=trajectory,
                              trajectory_where="p.yaml:4")  # fmt: skip
    assert props.violations(outcome.trace) == [
        '#15 property ends_with: {"reason": "error"} (p.yaml:3) does not hold: the run ended '
        'with reason "stop" at #15, expected "error"',
        "the trajectory (subset, p.yaml:4) did not match: score 0.00, min_score 1; unexpected "
        'call: #6 search({"q": "a"}) d0 r1',
    ]
    assert props.broken(outcome.trace) == {"properties": [rules[1]], "trajectory": trajectory}
    assert UserProperties.of(rules[:1]).violations(outcome.trace) == []


def test_bad_properties_are_refused_by_the_python_api() -> None:
    with pytest.raises(ValueError) as bad_rule:
        run_campaign(8, regressions=None, properties=[{"at_most": {"tool": "search"}}])
    assert str(bad_rule.value) == "property 1: at_most.times: missing required key 'times'"
    with pytest.raises(ValueError) as a_mapping:
        run_campaign(8, regressions=None, properties=AT_MOST)  # type: ignore[arg-type]
    assert str(a_mapping.value) == (
        "properties= takes a list of rules ([{'at_most': {'tool': 'search', 'times': 3}}]) "
        "or a UserProperties; got dict"
    )


REFUND = '''
from openprogram import ToolRegistry, function

registry = ToolRegistry()


@function(registry=registry)
def refund(amount: int) -> str:
    """Refund an amount to the customer.

    Args:
        amount: How much.
    """
    return f"refunded {FIX(amount)}"


@function(registry=registry)
def lookup_order(order: str) -> str:
    """Look an order up.

    Args:
        order: Its id.
    """
    return f"order {order}: paid"
'''
"""A registry with a planted bug: ``refund`` refunds a negative amount (``refunded -5``);
the fix clamps it at 0."""

NEVER_NEGATIVE = """\
# what every run must keep
properties:
  - never: {tool: refund, result: {$regex: "refunded -"}}
"""


def _refund_module(folder: Path, *, fixed: bool = False, name: str = "") -> str:
    module = name or f"refunds_{uuid.uuid4().hex[:8]}"
    fix = "FIX = lambda amount: max(0, amount)\n" if fixed else "FIX = lambda amount: amount\n"
    (folder / f"{module}.py").write_text(fix + textwrap.dedent(REFUND))
    return module


@pytest.mark.slow
def test_a_tool_campaign_finds_a_broken_property_and_its_file_fails_on_the_bug_only(
    tmp_path: Path,
) -> None:
    module = _refund_module(tmp_path)
    (tmp_path / "props.yaml").write_text(NEVER_NEGATIVE)
    done = run_cli("fuzz", "--registry", f"{module}:registry", "--pythonpath", str(tmp_path),
                   "--properties", "props.yaml", "--examples", "200", "--seed", "1",
                   "--regressions", "regs", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "PROPERTY BROKEN (chunk 0, seed 1), shrunk case:" in done.stdout, done.stdout
    [violation] = [line for line in done.stdout.splitlines() if line.startswith("  - ")]
    assert violation == (
        '  - #6 property never: {"tool": "refund", "result": {"$regex": "refunded -"}} '
        '(props.yaml:3) does not hold: refund was called: #6 refund({"amount": -1}) d0 r1'
    )
    [path] = (tmp_path / "regs").iterdir()
    assert f"regression scenario written: regs/{path.name} (reproduces it)" in done.stdout
    document = yaml.safe_load(path.read_text())
    assert document["registry"] == f"{module}:registry"
    assert document["expect"]["properties"] == [
        {"never": {"tool": "refund", "result": {"$regex": "refunded -"}}}
    ]
    [call] = [c for turn in document["model"] for c in turn.get("tool_calls", ())]
    assert next(iter(call)) == "refund" and call["refund"]["amount"] < 0  # shrunk: one call

    failing = run_cli("run", str(path), "--pythonpath", str(tmp_path), cwd=tmp_path)
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "property 1 (never) does not hold" in failing.stdout
    _refund_module(tmp_path, fixed=True, name=module)  # the fix, in the same module
    passing = run_cli("run", str(path), "--pythonpath", str(tmp_path), cwd=tmp_path)
    assert passing.returncode == 0, passing.stdout + passing.stderr


@pytest.mark.slow
def test_a_loop_campaign_takes_the_properties_file_too(tmp_path: Path) -> None:
    (tmp_path / "props.yaml").write_text(
        "properties:\n  - at_most: {tool: search, times: 2}\n"
        "trajectory: {mode: subset, calls: [search], min_score: 0}\n"  # every run keeps it
    )
    done = run_cli("fuzz", "--properties", "props.yaml", "--examples", "400", "--seed", "1",
                   "--regressions", "regs", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "PROPERTY BROKEN" in done.stdout
    assert "(props.yaml:2) does not hold: search was called 3 times" in done.stdout
    [path] = (tmp_path / "regs").iterdir()
    assert yaml.safe_load(path.read_text())["expect"]["properties"] == [AT_MOST]
    assert run_cli("run", str(path), cwd=tmp_path).returncode == 1


BAD_FILES = {
    "an unknown rule": (
        "properties:\n  - at_most: {tool: search, times: 2}\n  - nevr: {tool: refund}\n",
        "props.yaml:3: (properties[1].nevr) unknown rule 'nevr'; did you mean 'never'?",
    ),
    "a missing parameter": (
        "properties:\n  - at_most: {tool: search}\n",
        "props.yaml:2: (properties[0].at_most.times) missing required key 'times'",
    ),
    "an unknown key": (
        "properties: []\ntrajectroy: {calls: [search]}\n",
        "props.yaml:2: unknown key 'trajectroy'; did you mean 'trajectory'?",
    ),
    "a bad trajectory": (
        "properties: []\ntrajectory: {mode: sometimes, calls: [search]}\n",
        "props.yaml:2: (trajectory.mode) ",
    ),
    "not YAML": ("properties: [\n", "props.yaml:2: not YAML: "),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
@pytest.mark.parametrize("campaign", ["loop", "registry"])
def test_a_bad_properties_file_is_refused_before_any_run(
    case: str, campaign: str, tmp_path: Path
) -> None:
    text, message = BAD_FILES[case]
    (tmp_path / "props.yaml").write_text(text)
    where: list[str] = []
    if campaign == "registry":
        module = _refund_module(tmp_path)
        where = ["--registry", f"{module}:registry", "--pythonpath", str(tmp_path)]
    done = run_cli("fuzz", *where, "--properties", "props.yaml", "--examples", "10",
                   "--regressions", "regs", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"openprogram-sim fuzz: {message}"), done.stderr
    assert done.stdout == ""  # no campaign started
    assert not (tmp_path / "regs").exists()
