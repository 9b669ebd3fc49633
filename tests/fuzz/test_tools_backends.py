"""Deeper search over your tools: ``--coverage-guided`` feeds Hypothesis's ``target()`` the
lines of your tools' code each run executes (measured in the sandbox), and ``--backend
crosshair`` runs the search on CrossHair's solver (an extra; a clear error without it)."""

from __future__ import annotations

import importlib.util
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from openprogram_sim.cli import main
from openprogram_sim.fuzz import ToolTarget, run_tool_campaign
from openprogram_sim.fuzz.tools import (
    SearchError,
    SearchOptions,
    UserOptions,
    _campaign,
    _search,
    user_scenario_strategy,
)
from openprogram_sim.fuzz.tools._corpus import Corpus, guided_scenarios
from openprogram_sim.fuzz.tools._sandbox import Sandbox

TOOLS = '''
from openprogram import ToolRegistry, function

registry = ToolRegistry()

@function(registry=registry)
def grade(score: int, bonus: int) -> str:
    """Grades a score.

    Args:
        score: The score.
        bonus: Extra points.
    """
    if score > 50:
        total = score + bonus
        if total > 500:
            return "high"
        return "pass"
    return "fail"
'''


@pytest.fixture
def target(tmp_path: Path) -> ToolTarget:
    module = f"backend_tools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(TOOLS))
    return ToolTarget.load(registry=f"{module}:registry", pythonpath=[str(tmp_path)])


def _scenario(target: ToolTarget, **args: int) -> dict[str, Any]:
    return {
        "scenario": "lines",
        "registry": target.registry_ref,
        "exec": {"content": "go"},
        "model": [{"tool_calls": [{"grade": args}]}, {"text": "done"}],
    }


@pytest.mark.slow
def test_the_sandbox_counts_the_lines_of_your_tools_each_run_executes(target: ToolTarget) -> None:
    runs = [{"score": 1, "bonus": 0}, {"score": 60, "bonus": 0}, {"score": 60, "bonus": 600},
            {"score": 60, "bonus": 0}]  # fmt: skip
    with Sandbox(target, lines=True) as box:
        reports = box.run_batch([_scenario(target, **args) for args in runs])
    # the def line, then fail: the test, its return; pass: the test, total, its test, the
    # return; high: the same but another return (one new line); pass again: nothing new
    assert [(r.lines, r.new_lines) for r in reports] == [(3, 3), (5, 3), (5, 1), (5, 0)]
    with Sandbox(target) as box:  # not measured unless asked
        assert box.run_batch([_scenario(target, score=1, bonus=0)])[0].lines == 0


@pytest.mark.slow
def test_a_coverage_guided_campaign_feeds_target_the_lines_each_run_executes(
    target: ToolTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    fed: list[tuple[float, str]] = []
    real = _campaign.target

    def recording(observation: float, *, label: str = "") -> None:
        fed.append((observation, label))
        real(observation, label=label)

    monkeypatch.setattr(_campaign, "target", recording)
    guided = SearchOptions(coverage_guided=True)
    result = run_tool_campaign(target, 60, seed=2, workers=1, regressions=None, search=guided)
    assert result.failure is None and result.stats.runs == 60
    assert len(fed) >= 60 and {label for _, label in fed} == {"lines of your tools run"}
    assert max(score for score, _ in fed) >= 4  # some run got past the first branch
    fed.clear()
    run_tool_campaign(target, 20, seed=2, workers=1, regressions=None)
    assert fed == []  # plain generation does not target


def test_crosshair_without_its_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_search, "_CROSSHAIR_MODULE", "no_such_crosshair_provider")
    with pytest.raises(SearchError) as caught:
        SearchOptions(backend="crosshair").checked()
    message = (
        "--backend crosshair needs the hypothesis-crosshair package, which is not installed: "
        "pip install 'openprogram-sim[crosshair]'"
    )
    assert str(caught.value) == message
    code = main(["fuzz", "--tools", "weather_agent.tools:convert", "--backend", "crosshair"])
    assert code == 2 and capsys.readouterr().err == f"openprogram-sim fuzz: {message}\n"


def test_an_unknown_backend_is_refused() -> None:
    with pytest.raises(SearchError, match=r"^--backend 'z3' is not one of hypothesis, crosshair$"):
        SearchOptions(backend="z3").checked()


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("hypothesis_crosshair_provider") is None,
    reason="hypothesis-crosshair is not installed (pip install 'openprogram-sim[crosshair]')",
)
def test_a_crosshair_campaign_runs_your_tools(
    target: ToolTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    backends: list[str] = []
    real = _campaign.chunk_settings

    def recording(chunk: Any, search: SearchOptions) -> Any:
        made = real(chunk, search)
        backends.append(made.backend)
        return made

    monkeypatch.setattr(_campaign, "chunk_settings", recording)
    search = SearchOptions(backend="crosshair")
    result = run_tool_campaign(target, 2, seed=1, workers=1, regressions=None, search=search)
    assert backends == ["crosshair"]
    assert result.failure is None, result.failure.violations
    assert result.stats.runs == 2 and result.stats.rounds >= 2  # every run went through


def test_the_corpus_keeps_runs_that_went_deeper_until_a_failure_freezes_it(
    target: ToolTarget,
) -> None:
    corpus = Corpus()
    shallow, deep = _scenario(target, score=1, bonus=0), _scenario(target, score=60, bonus=0)
    corpus.offer(shallow, 3, 3)
    corpus.offer(shallow, 3, 0)  # nothing new, no more lines: not kept
    corpus.offer(deep, 5, 3)
    assert corpus.items == [shallow, deep] and corpus.deepest(0) == deep
    corpus.frozen = True
    corpus.offer(_scenario(target, score=60, bonus=600), 5, 1)
    assert len(corpus.items) == 2


def test_guided_scenarios_mostly_mutate_one_argument_of_the_deepest_runs(
    target: ToolTarget,
) -> None:
    corpus = Corpus()
    deep = _scenario(target, score=60, bonus=7)
    corpus.offer(deep, 5, 5)
    drawn: list[dict[str, Any]] = []

    # derandomized: Hypothesis's draws are biased toward simple values, so "three in four"
    # is a tendency over many draws, and 80 random ones fell under half now and then
    @settings(max_examples=80, database=None, deadline=None, derandomize=True)
    @given(guided_scenarios(user_scenario_strategy(target, UserOptions()), target, corpus))
    def collect(data: dict[str, Any]) -> None:
        drawn.append(data)

    collect()
    mutants = [d for d in drawn if d["scenario"] == "lines"]
    assert len(mutants) > len(drawn) / 2
    for mutant in mutants:
        [[call]] = [t["tool_calls"] for t in mutant["model"] if "tool_calls" in t]
        changed = {k for k, v in call["grade"].items() if v != {"score": 60, "bonus": 7}[k]}
        assert len(changed) <= 1 and set(call["grade"]) == {"score", "bonus"}
    assert any(m != deep for m in mutants)
