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
import importlib.util as _importlib_util
import os as _os
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
        assert_properties,
        assert_trajectory,
        check_properties,
        event_matches,
        match_events,
        match_trajectory,
        to_trace,
    )

# The line of openprogram/__init__.py that says the engine is ours (see _check_engine).
_ENGINE_MARKER = b'__distribution__ = "openprogram-sim"'


def _check_engine() -> None:
    """Fail at import, with the cause and the fix, when ``import openprogram`` would not give
    the engine that ships with this package: the index's distribution "openprogram" is another
    project that also provides ``import openprogram``. Without this a user who has it gets an
    AttributeError deep in a run. Cheap, as this module must stay: the engine is located and
    its ``__init__.py`` read, never imported (the CLI and the pytest plugin import this first).
    """
    try:
        spec = _importlib_util.find_spec("openprogram")
    except (ImportError, ValueError):  # ValueError: a module in sys.modules without a spec
        spec = None
    origin = spec.origin if spec is not None else None
    if spec is not None and origin is not None:
        # the loader reads the source wherever it is (a folder, a zip), as the import would
        get_data = getattr(spec.loader, "get_data", None)
        if get_data is None or not origin.endswith(".py"):
            return  # no source to read (neither project ships that way): let the import decide
        try:
            if _ENGINE_MARKER in get_data(origin):
                return
        except OSError:
            return
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    where = _os.path.dirname(origin) if origin is not None else (places[0] if places else None)
    raise ImportError(_foreign_engine_message(where), name="openprogram", path=origin)


def _foreign_engine_message(where: str | None) -> str:
    import importlib.metadata as metadata  # the error path only: it is not cheap to import

    try:
        other = f' (the distribution "openprogram" {metadata.version("openprogram")} is installed)'
    except metadata.PackageNotFoundError:
        other = ""
    found = f"the package at {where}{other}" if where is not None else "no package"
    ours = _os.path.dirname(__file__)
    return (
        f"openprogram_sim cannot start: `import openprogram` finds {found}, not the engine that "
        f'ships with openprogram_sim (distribution "openprogram-sim", at {ours}).\n'
        'The index\'s "openprogram" is a different project. It and "openprogram-sim" both provide '
        "the `openprogram` import, so the two cannot be installed side by side.\n"
        "Fix: pip uninstall openprogram && pip install --force-reinstall openprogram-sim\n"
        "(from a clone: pip uninstall openprogram && pip install --force-reinstall -e "
        "/path/to/clone; if the folder above is on PYTHONPATH, take it off)"
    )


_check_engine()

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
    "assert_properties",
    "assert_trajectory",
    "check_outcome",
    "check_properties",
    "discover",
    "event_matches",
    "json_schema",
    "load_scenario",
    "match_events",
    "match_trajectory",
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
        ("TraceRecorder", "assert_events", "assert_no_events", "assert_properties",
         "assert_trajectory", "check_properties", "event_matches", "match_events",
         "match_trajectory", "to_trace"),
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
