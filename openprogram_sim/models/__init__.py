"""Providers with no network, for tests and scenarios.

- :class:`ScriptedModel` plays a list of turns in call order (across nesting levels) and
  records every request it was sent.
- :class:`FunctionModel` computes each turn from the request.
- :class:`AutoModel` calls every offered tool once with arguments built from its schema,
  then answers (a smoke test for any toolset).
- :class:`Turn` is one scripted reply (or a weighted ``one_of`` choice of replies, each a
  :class:`Choice`, drawn from a seed; :class:`Draw` records one), :class:`WireFault` what
  it does to the HTTP exchange when served over the wire (a script is a list of
  ``(Turn, WireFault)`` steps);
  :class:`VirtualClock` is the time scripted latency advances (nothing sleeps for real).

::

    from openprogram import Runtime
    from openprogram_sim.models import ScriptedModel

    model = ScriptedModel([{"tool_calls": [{"search": {"q": "a"}}]}, "found it"])
    Runtime(provider=model).exec("Find a.", tools=[search])
    model.requests[1].messages   # what the model saw on its second call
"""

from openprogram_sim.errors import ScriptedFault, ScriptExhaustedError
from openprogram_sim.models._clock import VirtualClock
from openprogram_sim.models._faults import (
    NO_FAULT,
    ErrorMode,
    ScriptStep,
    TurnLike,
    WireFault,
    refuse_scenario,
    split_turn,
)
from openprogram_sim.models._function import (
    AutoModel,
    FunctionModel,
    TurnSource,
    example_arguments,
    example_value,
)
from openprogram_sim.models._scripted import Draw, ScriptedModel, ScriptedRequest
from openprogram_sim.models._turns import Choice, Turn, TurnToolCall, script_seed, session_seed

__all__ = [
    "NO_FAULT",
    "AutoModel",
    "Choice",
    "Draw",
    "ErrorMode",
    "FunctionModel",
    "ScriptExhaustedError",
    "ScriptedFault",
    "ScriptedModel",
    "ScriptStep",
    "ScriptedRequest",
    "Turn",
    "TurnLike",
    "TurnSource",
    "TurnToolCall",
    "VirtualClock",
    "WireFault",
    "example_arguments",
    "example_value",
    "refuse_scenario",
    "script_seed",
    "session_seed",
    "split_turn",
]

for _cls in (
    AutoModel,
    Choice,
    Draw,
    FunctionModel,
    ScriptedModel,
    ScriptedRequest,
    Turn,
    TurnToolCall,
    VirtualClock,
    WireFault,
):
    _cls.__module__ = __name__
del _cls
