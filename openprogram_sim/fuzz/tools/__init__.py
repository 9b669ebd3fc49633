"""The campaign over the user's own tools (``openprogram-sim fuzz --registry REF``).

A :class:`ToolTarget` is the user's tools, loaded as ``openprogram-sim run`` loads them;
:func:`run_tool_campaign` (re-exported by :mod:`openprogram_sim.fuzz`) calls them with
arguments valid and invalid for their real schemas, each run in a sandbox process under a
real-time limit, checking the loop's invariants and the tool contract, and writes a breach
as a scenario file that replays the breaking call. :func:`user_scenario_strategy` and
:func:`tool_call_strategy` draw those scenarios and calls (the public
:mod:`openprogram_sim.fuzz.strategies` build on them).
"""

from openprogram_sim.fuzz.tools._campaign import DEFAULT_WORKERS, run_tool_campaign
from openprogram_sim.fuzz.tools._search import BACKENDS, SearchError, SearchOptions
from openprogram_sim.fuzz.tools._target import TargetError, ToolTarget
from openprogram_sim.fuzz.tools._usergen import (
    USER_KINDS,
    UserOptions,
    tool_call_strategy,
    user_scenario_strategy,
)

__all__ = [
    "BACKENDS",
    "DEFAULT_WORKERS",
    "USER_KINDS",
    "SearchError",
    "SearchOptions",
    "TargetError",
    "ToolTarget",
    "UserOptions",
    "run_tool_campaign",
    "tool_call_strategy",
    "user_scenario_strategy",
]

# One home per class in reprs (and pickles): the fuzz face for what it re-exports.
UserOptions.__module__ = __name__
SearchOptions.__module__ = __name__
SearchError.__module__ = __name__
for _cls in (TargetError, ToolTarget):
    _cls.__module__ = "openprogram_sim.fuzz"
del _cls
