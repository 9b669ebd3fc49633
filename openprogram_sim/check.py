"""Deprecated alias of ``openprogram_sim.scenario`` (was ``openprogram_sim.check``);
it goes in the next release."""

import warnings

warnings.warn(
    "openprogram_sim.check moved to openprogram_sim.scenario;"
    " import from there (or from openprogram_sim)",
    DeprecationWarning,
    stacklevel=2,
)

from openprogram_sim.scenario import (  # noqa: E402
    Failure,
    Verdict,
    check_outcome,
)

__all__ = ["Failure", "Verdict", "check_outcome"]
