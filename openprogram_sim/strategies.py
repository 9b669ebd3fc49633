"""Deprecated alias of ``openprogram_sim.fuzz.strategies`` (was ``openprogram_sim.strategies``);
it goes in the next release."""

import warnings

warnings.warn(
    "openprogram_sim.strategies moved to openprogram_sim.fuzz.strategies;"
    " import from there (or from openprogram_sim)",
    DeprecationWarning,
    stacklevel=2,
)

from openprogram_sim.fuzz.strategies import *  # noqa: E402, F403
from openprogram_sim.fuzz.strategies import __all__  # noqa: E402, F401
