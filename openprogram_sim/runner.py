"""Deprecated alias of ``openprogram_sim.scenario`` (was ``openprogram_sim.runner``);
it goes in the next release."""

import warnings

warnings.warn(
    "openprogram_sim.runner moved to openprogram_sim.scenario;"
    " import from there (or from openprogram_sim)",
    DeprecationWarning,
    stacklevel=2,
)

from openprogram_sim.scenario import (  # noqa: E402
    RunOutcome,
    arun_scenario,
    build_model,
    request_to_dict,
    run_scenario,
)

__all__ = ["RunOutcome", "build_model", "request_to_dict", "run_scenario", "arun_scenario"]

from openprogram_sim.errors import ToolFailure  # noqa: E402

__all__ += ["ToolFailure"]
