"""What the plugin's fixtures hand to a test: a model factory, a trace recorder that keeps
usage, and a scenario runner (imported when a fixture is first used, not at start-up)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from openprogram_sim.models import AutoModel, FunctionModel, ScriptedModel
from openprogram_sim.play import Verdict, check_outcome, run_scenario
from openprogram_sim.scenario import Scenario, load_scenario, parse_scenario
from openprogram_sim.trace import TraceRecorder

__all__ = ["ModelFactory", "ScenarioRunner", "UsageRecorder"]

_SUFFIXES = (".yaml", ".yml")


class ModelFactory:
    """Makes scripted models (``openprogram_model``). Models it made are remembered so the
    report can show their usage per model call::

        model = openprogram_model([{"tool_calls": [{"add": {"a": 1}}]}, "done"])
        fn = openprogram_model.function(lambda request: "hi")
        auto = openprogram_model.auto()
    """

    def __init__(self) -> None:
        self.models: list[ScriptedModel] = []

    def __call__(self, turns: Iterable[Any] = (), **options: Any) -> ScriptedModel:
        return self._keep(ScriptedModel(turns, **options))

    def function(self, fn: Callable[..., Any], **options: Any) -> ScriptedModel:
        return self._keep(FunctionModel(fn, **options))

    def auto(self, **options: Any) -> ScriptedModel:
        return self._keep(AutoModel(**options))

    def _keep(self, model: ScriptedModel) -> ScriptedModel:
        self.models.append(model)
        return model


class UsageRecorder(TraceRecorder):
    """A TraceRecorder that also keeps each assistant message's usage (for the report);
    the trace itself is exactly TraceRecorder's."""

    def __init__(self) -> None:
        super().__init__()
        self.usage: list[Any] = []

    def __call__(self, event: Any) -> None:
        super().__call__(event)
        if event.type == "message_end" and getattr(event.message, "role", "") == "assistant":
            self.usage.append(getattr(event.message, "usage", None))


class ScenarioRunner:
    """Runs a scenario in a Python test (``openprogram_scenario``) and returns its verdict;
    by default a failed verdict raises ``AssertionError`` with the same diff the scenario
    item shows. ``source``: a path, YAML text, a mapping, or a loaded ``Scenario``."""

    def __init__(self, runs: list[Callable[[], dict[str, Any]]], base: Path) -> None:
        self._runs = runs
        self._base = base

    def __call__(self, source: Any, *, check: bool = True) -> Verdict:
        __tracebackhide__ = True
        from openprogram_sim.report import format_verdict, scenario_record

        scenario = self.load(source)
        verdict = check_outcome(run_scenario(scenario))
        run = scenario_record(verdict, id="", path="")["runs"][0]
        run["label"] = scenario.scenario
        self._runs.append(lambda: run)
        if check and not verdict.passed:
            raise AssertionError(
                f"scenario failed: {scenario.scenario}\n\n{format_verdict(verdict)}"
            )
        return verdict

    def load(self, source: Any) -> Scenario:
        """A Scenario from a path, YAML text, a mapping or a Scenario."""
        if isinstance(source, Scenario):
            return source
        if isinstance(source, Path):
            return load_scenario(source if source.is_absolute() else self._base / source)
        if isinstance(source, Mapping):
            return parse_scenario(yaml.safe_dump(dict(source)), "<mapping>")
        if isinstance(source, str) and "\n" not in source and source.endswith(_SUFFIXES):
            return load_scenario(self._base / source)
        if isinstance(source, str):
            return parse_scenario(source, "<string>")
        raise TypeError(
            f"openprogram_scenario takes a path, YAML text, a mapping or a Scenario, "
            f"got {type(source).__name__}"
        )
