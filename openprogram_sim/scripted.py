"""Deprecated alias of ``openprogram_sim.models`` (was ``openprogram_sim.scripted``);
it goes in the next release."""

import warnings

warnings.warn(
    "openprogram_sim.scripted moved to openprogram_sim.models;"
    " import from there (or from openprogram_sim)",
    DeprecationWarning,
    stacklevel=2,
)

from openprogram_sim.models import *  # noqa: E402, F403
from openprogram_sim.models import __all__  # noqa: E402, F401
