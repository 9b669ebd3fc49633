"""A model that varies on purpose: ``one_of`` turns drawn from a seed, per run (the scripted
model) and per session (the wire server), with their weights checked when loaded."""

from __future__ import annotations

import asyncio
import math
import random
from pathlib import Path
from typing import Any

import pytest

from openprogram_sim.cli import main
from openprogram_sim.errors import ScenarioError
from openprogram_sim.models import Draw, ScriptedModel, Turn
from openprogram_sim.play import arun_scenario, run_scenario, serve_scenario
from openprogram_sim.scenario import load_scenario
from openprogram_sim.trace import match_trajectory

ROOT = Path(__file__).resolve().parents[2]
WEIGHTED = ROOT / "scenarios" / "stochastic" / "weighted_pick.yaml"
TURNS = [
    {
        "one_of": [
            {"weight": 0.7, "tool_calls": [{"search": {"q": "a"}}]},
            {"weight": 0.3, "text": "no"},
        ]
    },
    "done",
]


def binomial_two_sided(k: int, n: int, p: float) -> float:
    """The exact two-sided binomial p-value of ``k`` in ``n`` (the outcomes no likelier than
    ``k``), computed here without the module under test."""

    def log_pmf(i: int) -> float:
        log_comb = math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
        return log_comb + i * math.log(p) + (n - i) * math.log1p(-p)

    pmf = [math.exp(log_pmf(i)) for i in range(n + 1)]
    return min(1.0, sum(q for q in pmf if q <= pmf[k] * (1 + 1e-9)))


def first_draws(seeds: range) -> list[int]:
    out = []
    for seed in seeds:
        model = ScriptedModel(TURNS, seed=seed)
        _, option = model.turns[0].draw(random.Random(model.seed))
        out.append(option)
    return out


def test_the_same_seed_plays_the_same_replies_and_names_them() -> None:
    scenario = load_scenario(WEIGHTED)
    for seed in (1, 2, 3):
        a = run_scenario(scenario.model_copy(update={"seed": seed}))
        b = run_scenario(scenario.model_copy(update={"seed": seed}))
        assert a.trace == b.trace
        assert isinstance(a.provider, ScriptedModel)
        assert a.provider.seed == seed
        assert a.provider.draws == b.provider.draws
        assert [str(d) for d in a.provider.draws] in (
            ["call #1: option 1 of 2"],
            ["call #1: option 2 of 2"],
        )


def test_without_a_seed_the_model_picks_one_and_keeps_it() -> None:
    model = ScriptedModel(TURNS)
    again = ScriptedModel(TURNS, seed=model.seed)
    assert isinstance(model.seed, int)
    mine, theirs = random.Random(model.seed), random.Random(again.seed)
    assert [model.turns[0].draw(mine)[1] for _ in range(20)] == [
        again.turns[0].draw(theirs)[1] for _ in range(20)
    ]


def test_the_scenario_file_with_its_seed_passes_under_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", str(WEIGHTED)]) == 0
    assert "1 scenarios: 1 passed" in capsys.readouterr().out


def test_over_seeded_runs_the_replies_come_at_their_weights() -> None:
    """400 runs, seeds 0..399: the runs whose trajectory holds (option 1, weight 0.7) are a
    binomial count; its exact two-sided p-value against 0.7 is far from rejecting."""
    scenario = load_scenario(WEIGHTED)
    passed = 0
    for seed in range(400):
        outcome = run_scenario(scenario.model_copy(update={"seed": seed}))
        assert isinstance(outcome.provider, ScriptedModel)
        (draw,) = outcome.provider.draws
        assert scenario.expect.trajectory is not None
        held = match_trajectory(outcome.trace, scenario.expect.trajectory).passed
        assert held == (draw.option == 0)
        passed += held
    assert passed == 289  # fixed by the seeds
    assert binomial_two_sided(passed, 400, 0.7) > 0.05
    # and a weight that was not asked for is rejected at these counts
    assert binomial_two_sided(passed, 400, 0.5) < 1e-9


def test_the_draw_follows_the_weights_not_their_sum() -> None:
    draws = first_draws(range(3000))
    ones = draws.count(0)
    assert ones == 2138  # fixed by the seeds
    assert binomial_two_sided(ones, 3000, 0.7) > 0.05
    scaled = ScriptedModel(
        [{"one_of": [{"weight": 7, "text": "a"}, {"weight": 3, "text": "b"}]}], seed=5
    )
    same = ScriptedModel(
        [{"one_of": [{"weight": 0.7, "text": "a"}, {"weight": 0.3, "text": "b"}]}], seed=5
    )
    mine, theirs = random.Random(scaled.seed), random.Random(same.seed)
    assert [scaled.turns[0].draw(mine)[1] for _ in range(50)] == [
        same.turns[0].draw(theirs)[1] for _ in range(50)
    ]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("weight: 0", "(model[0].one_of[1].weight) Input should be greater than 0 (got 0)"),
        ("weight: -1", "(model[0].one_of[1].weight) Input should be greater than 0 (got -1)"),
        ("weight: .nan", "(model[0].one_of[1].weight) Input should be a finite number"),
        ("thinking: hm", "(model[0].one_of[1]) missing required key 'weight'"),
    ],
)
def test_a_bad_weight_is_named_with_its_file_and_line(
    tmp_path: Path, option: str, message: str
) -> None:
    text = WEIGHTED.read_text().replace("- weight: 0.3", f"- {option}")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    line = text.splitlines().index(f"      - {option}") + 1
    with pytest.raises(ScenarioError) as caught:
        load_scenario(bad)
    assert f"{bad}:{line}: {message}" in str(caught.value)


def test_a_one_of_turn_takes_its_keys_in_its_options(tmp_path: Path) -> None:
    text = WEIGHTED.read_text().replace("  - one_of:", "  - text: hi\n    one_of:")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(bad)
    assert "a one_of turn takes no text: put them in each option" in str(caught.value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"one_of": []}, "one_of must be a non-empty list of options"),
        ({"one_of": [{"text": "a"}]}, "one_of[0] must be {weight: W, ...turn keys}"),
        (
            {"one_of": [{"weight": 0, "text": "a"}]},
            "one_of[0].weight must be a positive number, got 0",
        ),
        ({"one_of": [{"weight": True, "text": "a"}]}, "one_of[0].weight must be a positive number"),
        (
            {"one_of": [{"weight": 1, "text": "a"}], "text": "b"},
            "a one_of turn takes no other key, got ['text']",
        ),
    ],
)
def test_a_bad_choice_in_python_says_what_to_write(value: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        Turn.coerce(value)
    assert message in str(caught.value)


def test_each_served_session_draws_from_its_seed_and_reports_it() -> None:
    """Over real HTTP through the openai adapter: a session's draws follow the scenario's
    seed and the session's name (the same name draws the same reply in another server),
    and its report carries the seed."""
    scenario = load_scenario(WEIGHTED)
    picks: list[list[tuple[int, int]]] = []
    for _ in range(2):
        with serve_scenario(scenario) as server:
            seen = []
            for k in range(12):
                name = f"s{k}"
                run_scenario(scenario, server.provider("openai", session=name))
                report = server.end_session(name)
                assert report.seed is not None and report.to_json()["seed"] == report.seed
                assert report.to_json()["draws"] == [list(d) for d in report.draws]
                seen.append(report.draws[0])
            picks.append(seen)
    assert picks[0] == picks[1]
    assert {option for _, option in picks[0]} == {0, 1}  # both replies were served


def test_draw_records_are_plain() -> None:
    assert str(Draw(3, 1, 2)) == "call #3: option 2 of 2"


def test_the_in_process_wire_draws_as_the_scripted_model_does() -> None:
    """ScriptedWire (the wire without a server) draws a one_of turn from the same seed with
    the same stream of numbers: the anthropic adapter over it plays the scripted run's
    replies, seed by seed."""
    from openprogram.providers.anthropic import AnthropicProvider
    from openprogram_sim.wire import ScriptedWire

    scenario = load_scenario(WEIGHTED)

    async def over_the_wire(seeded: Any) -> tuple[list[str], int]:
        wire = ScriptedWire([turn for turn, _ in seeded.script()])
        client = wire.client()
        provider = AnthropicProvider("claude-sonnet-4-5", api_key="test", client=client)
        try:
            outcome = await arun_scenario(seeded, provider)
        finally:
            await client.aclose()
        return [e["type"] for e in outcome.trace], wire.seed

    options = set()
    for seed in range(12):
        seeded = scenario.model_copy(update={"seed": seed})
        scripted = run_scenario(seeded)
        types, wire_seed = asyncio.run(over_the_wire(seeded))
        assert wire_seed == seed
        assert types == [e["type"] for e in scripted.trace], seed
        options |= {d.option for d in scripted.provider.draws}  # type: ignore[union-attr]
    assert options == {0, 1}
