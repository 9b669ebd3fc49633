"""Scenario files: the contract users author, and running and checking them.

::

    from openprogram_sim.scenario import check_outcome, load_scenario, run_scenario

    scenario = load_scenario("scenarios/steering/skip_remaining.yaml")  # file:line errors
    verdict = check_outcome(run_scenario(scenario))                    # provider=... optional
    assert verdict.passed, verdict.report()

- the schema (pydantic models; :func:`json_schema` for editors),
- the loader (:func:`load_scenario`, :func:`parse_scenario`, :func:`discover`): one parse,
  a line map, every mistake reported at once with a did-you-mean,
- the runner (:func:`run_scenario`, :func:`arun_scenario`) with a ``provider=`` seam,
- the check (:func:`check_outcome`): the outcome against every ``expect:`` key.
"""

from openprogram_sim.scenario._check import Failure, Verdict, check_outcome, check_requests
from openprogram_sim.scenario._jsonschema import json_schema
from openprogram_sim.scenario._loader import discover, load_scenario, parse_scenario
from openprogram_sim.scenario._runner import (
    RecordingProvider,
    RunOutcome,
    arun_scenario,
    build_model,
    request_to_dict,
    run_scenario,
)
from openprogram_sim.scenario._schema import (
    AbortPoint,
    CassetteModel,
    EventExpect,
    ExecArgs,
    Expect,
    FollowUp,
    ForcedChoice,
    HistoryMessage,
    ModelTurn,
    RaisesSpec,
    RequestExpect,
    Scenario,
    Steering,
    ToolDef,
)
from openprogram_sim.trace import EVENT_FIELDS

__all__ = [
    "EVENT_FIELDS",
    "AbortPoint",
    "CassetteModel",
    "EventExpect",
    "ExecArgs",
    "Expect",
    "Failure",
    "FollowUp",
    "ForcedChoice",
    "HistoryMessage",
    "ModelTurn",
    "RaisesSpec",
    "RecordingProvider",
    "RequestExpect",
    "RunOutcome",
    "Scenario",
    "Steering",
    "ToolDef",
    "Verdict",
    "arun_scenario",
    "build_model",
    "check_outcome",
    "check_requests",
    "discover",
    "json_schema",
    "load_scenario",
    "parse_scenario",
    "request_to_dict",
    "run_scenario",
]

for _cls in (
    AbortPoint, CassetteModel, ExecArgs, Expect, Failure, FollowUp, ForcedChoice,
    HistoryMessage, ModelTurn,
    RaisesSpec, RecordingProvider, RequestExpect, RunOutcome, Scenario, Steering, ToolDef,
    Verdict,
):  # fmt: skip
    _cls.__module__ = __name__
del _cls
