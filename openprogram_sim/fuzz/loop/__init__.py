"""The loop campaign: generated scenarios over simulated tools, run through the real runner,
every trace checked against the invariants, the first violation shrunk and written as a
regression scenario whose expectations are the seed's rules applied to its script.

:func:`run_campaign` is what ``openprogram-sim fuzz`` runs (re-exported by
:mod:`openprogram_sim.fuzz`). :func:`run_chunk` and :func:`chunk_count` run one seeded chunk
of a campaign alone, the same cases whichever process runs it (the pytest plugin's
``--openprogram-fuzz`` items); :func:`scenario_from_bytes` is the scenario the campaign
builds from one byte string of :data:`SCENARIO_BYTES` bytes.
"""

from openprogram_sim.fuzz._chunks import ChunkResult
from openprogram_sim.fuzz.loop._campaign import (
    SCENARIO_BYTES,
    chunk_count,
    reproduces,
    run_campaign,
    run_chunk,
    scenario_from_bytes,
)
from openprogram_sim.fuzz.loop._predict import UnpredictableScenario
from openprogram_sim.fuzz.loop._regression import derive_expect, write_regression

__all__ = [
    "SCENARIO_BYTES",
    "ChunkResult",
    "UnpredictableScenario",
    "chunk_count",
    "derive_expect",
    "reproduces",
    "run_campaign",
    "run_chunk",
    "scenario_from_bytes",
    "write_regression",
]

# One home per class in reprs (and pickles): the fuzz face for what it re-exports.
ChunkResult.__module__ = __name__
UnpredictableScenario.__module__ = "openprogram_sim.fuzz"
