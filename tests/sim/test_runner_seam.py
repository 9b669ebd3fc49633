"""The runner's provider seam: a scenario file runs with any provider in place of its
scripted turns, and its expectations (``requests`` included) apply to that provider."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from openprogram.events import ProviderEvent
from openprogram.providers import Context, StreamOptions
from openprogram.providers.anthropic import AnthropicProvider
from openprogram_sim import ScriptedModel, check_outcome, load_scenario, run_scenario
from openprogram_sim.play import arun_scenario, build_model
from openprogram_sim.scenario import parse_scenario
from openprogram_sim.wire import ScriptedWire

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"
ONE_PICK = LIBRARY / "basics" / "one_pick.yaml"


class Relay:
    """A provider that is not a ScriptedModel (no ``requests`` of its own): it relays the
    events of an inner scripted model."""

    api = "relay"

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner

    async def stream(
        self, context: Context, options: StreamOptions
    ) -> AsyncIterator[ProviderEvent]:
        async for event in self.inner.stream(context, options):
            yield event


def test_no_provider_plays_the_files_turns_on_a_scripted_model() -> None:
    outcome = run_scenario(load_scenario(ONE_PICK))
    assert isinstance(outcome.provider, ScriptedModel)
    assert outcome.scripted_turns == 2 and outcome.unconsumed == 0
    assert outcome.model_calls == 2 == len(outcome.requests)
    assert check_outcome(outcome).passed


def test_any_provider_gets_the_files_tools_exec_and_expectations() -> None:
    scenario = load_scenario(ONE_PICK)
    relay = Relay(build_model(scenario))
    outcome = run_scenario(scenario, relay)
    scripted = run_scenario(scenario)

    assert outcome.provider is relay
    assert outcome.scripted_turns is None and outcome.unconsumed == 0
    assert outcome.trace == scripted.trace
    assert outcome.result == "Paris."
    assert outcome.requests == scripted.requests  # recorded for any provider
    verdict = check_outcome(outcome)
    assert verdict.passed, verdict.report()


def test_requests_expectations_fail_against_another_provider_too() -> None:
    text = ONE_PICK.read_text().replace("{round: 1, tools: [search], message_count: 1}",
                                        "{round: 1, tools: [], message_count: 1}")  # fmt: skip
    scenario = parse_scenario(text, "one_pick_wrong.yaml")
    verdict = check_outcome(run_scenario(scenario, Relay(build_model(scenario))))
    assert [f.title for f in verdict.failures] == ["request 1 (depth 0, round 1) differs"]
    assert 'tools: expected [], actual ["search"]' in verdict.failures[0].detail


def test_a_real_adapter_over_the_wire_runs_the_scenario() -> None:
    scenario = load_scenario(ONE_PICK)
    wire = ScriptedWire(build_model(scenario).turns)
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="test", client=wire.client())

    async def go() -> Any:
        try:
            return await arun_scenario(scenario, provider)
        finally:
            await provider.client.aclose()

    outcome = asyncio.run(go())
    wire.assert_consumed()
    assert outcome.provider is provider
    assert [r["round"] for r in outcome.requests] == [1, 2]
    assert [u.output for u in outcome.usage if u is not None] == [0, 0]
    verdict = check_outcome(outcome)
    assert verdict.passed, verdict.report()


@pytest.mark.parametrize(
    "path", [ONE_PICK, LIBRARY / "steering" / "after_tool_skips_remaining.yaml"]
)
def test_a_scripted_model_passed_in_is_used_as_is(path: Path) -> None:
    scenario = load_scenario(path)
    model = build_model(scenario)
    outcome = run_scenario(scenario, model)
    assert outcome.provider is model and model.calls == outcome.model_calls
    assert outcome.trace == run_scenario(scenario).trace


def test_run_scenario_inside_a_running_loop_says_to_await_instead() -> None:
    from openprogram_sim.errors import MisuseError

    scenario = load_scenario(ONE_PICK)

    async def misuse() -> None:
        with pytest.raises(MisuseError, match="use `await arun_scenario"):
            run_scenario(scenario)
        assert check_outcome(await arun_scenario(scenario)).passed

    asyncio.run(misuse())


def test_a_background_task_a_tool_leaves_is_cancelled_after_the_run() -> None:
    from openprogram import Runtime, ToolRegistry
    from openprogram_sim.play._runner import _cancel_leftovers, _loop

    scenario = load_scenario(ONE_PICK)
    started: list[asyncio.Task[None]] = []

    async def forever() -> None:
        await asyncio.Event().wait()

    async def spawn(**_: object) -> str:
        started.append(asyncio.get_running_loop().create_task(forever()))
        return "spawned"

    async def run_spawning() -> str:
        runtime = Runtime(provider=build_model(scenario), registry=ToolRegistry())
        spec = {"name": "search", "parameters": {"type": "object", "properties": {}}}
        return str(await runtime.aexec("go", tools=[{"spec": spec, "execute": spawn}]))

    loop = _loop()  # the loop run_scenario reuses
    assert loop.run_until_complete(run_spawning()) == "Paris."
    assert started and not started[0].done()
    _cancel_leftovers(loop)  # what run_scenario does after each run
    assert started[0].cancelled()
    assert check_outcome(run_scenario(scenario)).passed
