"""Your own properties as fuzz invariants (``openprogram-sim fuzz --properties FILE``, issue 25
item 3): a rule of ``expect.properties`` that a generated run breaks is a violation like the
built-in ones, shrunk, and written into the regression file under ``expect.properties``; the
file fails on the bug and passes on the fix. Real campaigns, real ``openprogram-sim run``s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from _support import run_cli

from openprogram_sim.fuzz import UserProperties, run_campaign

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
