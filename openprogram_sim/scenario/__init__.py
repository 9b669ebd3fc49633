"""Scenario files: the contract users author.

::

    from openprogram_sim.scenario import load_scenario

    scenario = load_scenario("scenarios/steering/skip_remaining.yaml")  # file:line errors
    scenario.script()        # its model: turns, as the scripted model and the wire play them
    scenario.where("expect", "events", 0)                               # "…yaml:31"

- the schema (pydantic models; :func:`json_schema` for editors),
- the loader (:func:`load_scenario`, :func:`parse_scenario`): one parse, a line map, every
  mistake reported at once with a did-you-mean,
- collection (:func:`discover`, :func:`not_a_scenario`): the scenario files under a folder,
  the cassettes beside them recognised from their first bytes and left alone,
- what ``expect.judge`` asks a model and how its verdicts are read (:func:`judge_request`,
  :func:`read_verdicts`, :func:`ask_judge` over any provider; :func:`criterion_failures`),
- the Python references a file may name (``python:``, ``registry:``, ``call:``), imported
  when a run starts, never at load (:func:`resolve_python`; a standard-library callable only
  when ``[tool.openprogram]`` :data:`STDLIB_SETTING` allows it): :func:`import_ref`,
  :func:`import_roots`, :func:`scenario_env`.

Running and checking a scenario is :mod:`openprogram_sim.play`'s.
"""

from openprogram_sim.scenario._discover import discover, not_a_scenario
from openprogram_sim.scenario._jsonschema import json_schema
from openprogram_sim.scenario._judge import (
    VERDICT_TOOL,
    CriterionVerdict,
    JudgedRun,
    JudgeError,
    ask_judge,
    criterion_failures,
    judge_changes,
    judge_request,
    read_verdicts,
)
from openprogram_sim.scenario._loader import load_scenario, parse_scenario
from openprogram_sim.scenario._python import (
    STDLIB_SETTING,
    PythonRefError,
    import_ref,
    import_roots,
    ref_of,
    refuse_stdlib,
    scenario_env,
)
from openprogram_sim.scenario._resolve import resolve_python
from openprogram_sim.scenario._schema import (
    AbortPoint,
    CallRange,
    CassetteModel,
    ConversationStep,
    EventExpect,
    ExecArgs,
    Expect,
    FollowUp,
    ForcedChoice,
    HistoryMessage,
    JudgeCriterion,
    JudgeSpec,
    MessageExpect,
    ModelTurn,
    RaisesSpec,
    RequestExpect,
    Scenario,
    Steering,
    StepExecArgs,
    ToolDef,
    ToolOutcome,
)
from openprogram_sim.scenario._yaml import MAX_BYTES

__all__ = [
    "MAX_BYTES",
    "STDLIB_SETTING",
    "VERDICT_TOOL",
    "AbortPoint",
    "CallRange",
    "CassetteModel",
    "ConversationStep",
    "CriterionVerdict",
    "EventExpect",
    "ExecArgs",
    "Expect",
    "FollowUp",
    "ForcedChoice",
    "HistoryMessage",
    "JudgeCriterion",
    "JudgeError",
    "JudgeSpec",
    "JudgedRun",
    "MessageExpect",
    "ModelTurn",
    "PythonRefError",
    "RaisesSpec",
    "RequestExpect",
    "Scenario",
    "Steering",
    "StepExecArgs",
    "ToolDef",
    "ToolOutcome",
    "ask_judge",
    "criterion_failures",
    "discover",
    "import_ref",
    "import_roots",
    "json_schema",
    "judge_changes",
    "judge_request",
    "load_scenario",
    "not_a_scenario",
    "parse_scenario",
    "read_verdicts",
    "ref_of",
    "refuse_stdlib",
    "resolve_python",
    "scenario_env",
]

for _cls in (
    AbortPoint, CallRange, CassetteModel, ConversationStep, CriterionVerdict, ExecArgs,
    Expect, FollowUp, ForcedChoice, HistoryMessage, JudgeCriterion, JudgedRun, JudgeError,
    JudgeSpec, MessageExpect, ModelTurn,
    PythonRefError, RaisesSpec, RequestExpect, Scenario, Steering, StepExecArgs, ToolDef,
    ToolOutcome,
):  # fmt: skip
    _cls.__module__ = __name__
del _cls
