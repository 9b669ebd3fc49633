"""openprogram_sim: the harness that pins a tool-call loop's behaviour down in CI.

The names most tests need are here::

    from openprogram import Runtime
    from openprogram_sim import ScriptedModel, TraceRecorder, assert_events

    model = ScriptedModel([{"tool_calls": [{"search": {"q": "a"}}]}, "found it"])
    runtime = Runtime(provider=model)
    rec = TraceRecorder()
    runtime.subscribe(rec)
    runtime.exec("Find a.", tools=[search])
    assert_events(rec.trace, [{"agent_end": {"reason": "stop"}}])

    from openprogram_sim import check_outcome, load_scenario, run_scenario

    verdict = check_outcome(run_scenario(load_scenario("scenarios/x.yaml")))

Each capability has its own subpackage, each floor importing only the floors below it:
:mod:`~openprogram_sim.trace` (traces, matchers, assertions, JSON paths, failures),
:mod:`~openprogram_sim.models` (providers with no network, turns and wire faults),
:mod:`~openprogram_sim.scenario` (the file format and loading), :mod:`~openprogram_sim.wire`
(scripted turns as each API's HTTP, the loopback server), :mod:`~openprogram_sim.cassettes`
(recorded sessions), :mod:`~openprogram_sim.play` (running and checking a scenario),
:mod:`~openprogram_sim.fuzz` (Hypothesis strategies, invariants, campaigns),
:mod:`~openprogram_sim.coverage` (behaviour coverage), :mod:`~openprogram_sim.report` (the
HTML report), the pytest plugin :mod:`~openprogram_sim.plugin` and the CLI
:mod:`~openprogram_sim.cli`. Errors are :class:`SimError` (:mod:`~openprogram_sim.errors`).
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from openprogram_sim.errors import (
        ScenarioError,
        ScenarioIssue,
        ScriptedFault,
        ScriptExhaustedError,
        SimError,
        ToolFailure,
        WireEncodeError,
    )
    from openprogram_sim.models import (
        AutoModel,
        FunctionModel,
        ScriptedModel,
        ScriptedRequest,
        Turn,
        VirtualClock,
    )
    from openprogram_sim.play import RunOutcome, Verdict, arun_scenario, check_outcome, run_scenario
    from openprogram_sim.scenario import (
        Scenario,
        discover,
        json_schema,
        load_scenario,
        parse_scenario,
    )
    from openprogram_sim.trace import (
        TraceRecorder,
        assert_events,
        assert_no_events,
        event_matches,
        match_events,
        to_trace,
    )

__all__ = [
    "AutoModel",
    "FunctionModel",
    "RunOutcome",
    "Scenario",
    "ScenarioError",
    "ScenarioIssue",
    "ScriptExhaustedError",
    "ScriptedFault",
    "ScriptedModel",
    "ScriptedRequest",
    "SimError",
    "ToolFailure",
    "TraceRecorder",
    "Turn",
    "Verdict",
    "VirtualClock",
    "WireEncodeError",
    "arun_scenario",
    "assert_events",
    "assert_no_events",
    "check_outcome",
    "discover",
    "event_matches",
    "json_schema",
    "load_scenario",
    "match_events",
    "parse_scenario",
    "run_scenario",
    "to_trace",
]

_WHERE = {
    **dict.fromkeys(
        ("ScenarioError", "ScenarioIssue", "ScriptExhaustedError", "ScriptedFault", "SimError",
         "ToolFailure", "WireEncodeError"),
        "openprogram_sim.errors",
    ),
    **dict.fromkeys(
        ("AutoModel", "FunctionModel", "ScriptedModel", "ScriptedRequest", "Turn", "VirtualClock"),
        "openprogram_sim.models",
    ),
    **dict.fromkeys(
        ("Scenario", "discover", "json_schema", "load_scenario", "parse_scenario"),
        "openprogram_sim.scenario",
    ),
    **dict.fromkeys(
        ("RunOutcome", "Verdict", "arun_scenario", "check_outcome", "run_scenario"),
        "openprogram_sim.play",
    ),
    **dict.fromkeys(
        ("TraceRecorder", "assert_events", "assert_no_events", "event_matches", "match_events",
         "to_trace"),
        "openprogram_sim.trace",
    ),
}  # fmt: skip


def __getattr__(name: str) -> _typing.Any:
    # Lazy (PEP 562): ``import openprogram_sim.pytest_plugin`` must not load pydantic, YAML
    # and the engine at pytest start-up; a name loads its subpackage on first use.
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
