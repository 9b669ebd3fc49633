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

Each capability has its own subpackage: :mod:`~openprogram_sim.models` (providers with no
network), :mod:`~openprogram_sim.scenario` (the file format, loading, running, checking),
:mod:`~openprogram_sim.trace` (traces, matchers, assertions), :mod:`~openprogram_sim.wire`
(scripted turns as each API's HTTP), :mod:`~openprogram_sim.fuzz` (Hypothesis strategies,
invariants, campaigns), :mod:`~openprogram_sim.report` (the HTML report),
:mod:`~openprogram_sim.cassettes` (recorded sessions), :mod:`~openprogram_sim.cli` and the
pytest plugin :mod:`~openprogram_sim.pytest_plugin`. Errors are :class:`SimError`.
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
    from openprogram_sim.scenario import (
        RunOutcome,
        Scenario,
        Verdict,
        arun_scenario,
        check_outcome,
        discover,
        json_schema,
        load_scenario,
        parse_scenario,
        run_scenario,
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
        ("RunOutcome", "Scenario", "Verdict", "arun_scenario", "check_outcome", "discover",
         "json_schema", "load_scenario", "parse_scenario", "run_scenario"),
        "openprogram_sim.scenario",
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
