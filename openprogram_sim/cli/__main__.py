"""``python -m openprogram_sim.cli``: the same as ``openprogram-sim``."""

import sys

from openprogram_sim.cli._main import main

sys.exit(main())
