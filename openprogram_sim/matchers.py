"""Deprecated alias of ``openprogram_sim.trace`` (was ``openprogram_sim.matchers``);
it goes in the next release."""

import warnings

warnings.warn(
    "openprogram_sim.matchers moved to openprogram_sim.trace;"
    " import from there (or from openprogram_sim)",
    DeprecationWarning,
    stacklevel=2,
)

from openprogram_sim.trace import (  # noqa: E402
    OPERATORS,
    check_matcher,
    describe,
    matches,
)

__all__ = ["OPERATORS", "check_matcher", "describe", "matches"]
