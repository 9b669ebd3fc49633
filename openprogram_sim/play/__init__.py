"""Playing a scenario: build the run, run it under its deadline, check the outcome.

::

    from openprogram_sim.play import check_outcome, run_scenario
    from openprogram_sim.scenario import load_scenario

    scenario = load_scenario("scenarios/steering/skip_remaining.yaml")
    verdict = check_outcome(run_scenario(scenario))     # provider=... to use another model
    assert verdict.passed, verdict.report()

- :func:`run_scenario` / :func:`arun_scenario`: a fresh registry of the scenario's tools,
  its model (the scripted turns, the cassette it names, or any ``provider=``), steering and
  the abort at their points, and a real-time deadline that also stops a tool that blocks
  the event loop; the :class:`RunOutcome` holds the trace, the result and every request.
- :func:`check_outcome`: the outcome against every ``expect:`` key, as a :class:`Verdict`
  of :class:`~openprogram_sim.trace.Failure` items.
- :func:`serve_scenario`: the scenario's script over real HTTP, its ``expect.requests``
  checked on what each client sent (:func:`request_check`).
"""

import typing as _typing

from openprogram_sim.play._check import Verdict, check_outcome, check_requests, request_check
from openprogram_sim.play._deadline import DEADLINE_SUPPORTED
from openprogram_sim.play._runner import (
    GRACE_SECONDS,
    RecordingProvider,
    RunOutcome,
    arun_scenario,
    build_model,
    request_to_dict,
    run_scenario,
)
from openprogram_sim.trace import Failure

if _typing.TYPE_CHECKING:
    from openprogram_sim.play._serve import scenario_server, serve_scenario

__all__ = [
    "DEADLINE_SUPPORTED",
    "GRACE_SECONDS",
    "Failure",
    "RecordingProvider",
    "RunOutcome",
    "Verdict",
    "arun_scenario",
    "build_model",
    "check_outcome",
    "check_requests",
    "request_check",
    "request_to_dict",
    "run_scenario",
    "scenario_server",
    "serve_scenario",
]

for _cls in (RecordingProvider, RunOutcome, Verdict):
    _cls.__module__ = __name__
del _cls

_SERVING = ("scenario_server", "serve_scenario")


def __getattr__(name: str) -> object:
    # The wire server (uvicorn, starlette, httpx2) loads when a scenario is served, not
    # with the runner.
    if name in _SERVING:
        from openprogram_sim.play import _serve

        value = getattr(_serve, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
