"""Behaviour coverage: which behaviours of the loop a scenario suite exercises and asserts,
and which lines of the user's own tool code its scenarios run.

The catalogue (:data:`CATALOGUE`, explained in docs/coverage.md) is fixed: each behaviour
has a stable id and the sentence of the seed (or of DESIGN) it comes from. One run is
classified from its trace, its requests and its scenario::

    from openprogram_sim.coverage import BehaviourCoverage, behaviours_of
    from openprogram_sim.play import run_scenario
    from openprogram_sim.scenario import discover, load_scenario

    suite = BehaviourCoverage()
    for path in discover(["scenarios"]):
        suite.add(str(path), behaviours_of(run_scenario(load_scenario(path))))
    print(suite.table())                      # what `openprogram-sim run --coverage` prints
    suite.failures(require=["steering_skip"])  # [] while some scenario exercises it

**Exercised** means the run did it (each behaviour's ``exercised`` says exactly what the run
must contain). **Asserted** means an expectation of the scenario's ``expect:`` checks the
evidence of it: an expected event the check matched to one of the behaviour's witness
events, naming one of its fields (not as ``{$any: true}``); an expected request that selects
a witness request, naming one of its fields; or ``result``, ``raises``, ``model_calls`` or
``counts`` where the behaviour lists them. A behaviour that happens but that no expectation
checks is *exercised, unasserted*. ``not_events`` never asserts one. Beside the
behaviours, the suite counts the scenarios that assert with each trajectory mode and each
property rule (:data:`EXPECTATION_KEYS`: ``trajectory.in_order``, ``property.at_most``).

With ``--coverage-source PKG``, :class:`CodeCoverage` measures the user's code with
coverage.py, one dynamic context per scenario, into a normal ``.coverage`` file;
:func:`tool_code` reads it back per tool. :func:`suggest` writes a starter scenario for
each behaviour nothing exercises, on the suite's own tools.

On the wire (``openprogram-sim serve --coverage``), :data:`WIRE_CATALOGUE` lists a served
client's own behaviours (passed a tool error back, honoured ``retry-after``, recovered from
a cut stream, ...); :func:`wire_behaviours` reads them from a session's report and
:class:`WireCoverage` counts them over a server's sessions.
"""

from openprogram_sim.coverage._asserted import EXPECTATION_KEYS, expectation_keys
from openprogram_sim.coverage._catalogue import (
    CATALOGUE,
    Behaviour,
    UnknownBehaviourError,
    behaviour,
    catalogue_markdown,
    parse_ids,
)
from openprogram_sim.coverage._classify import Witness, classify
from openprogram_sim.coverage._code import (
    CodeCoverage,
    CoverageInUseError,
    CoverageNotInstalledError,
    code_table,
    combine,
    locate,
    tool_code,
    tool_locations,
)
from openprogram_sim.coverage._suggest import starter_document, starter_text, suggest
from openprogram_sim.coverage._summary import BehaviourCoverage, RunBehaviours, behaviours_of
from openprogram_sim.coverage._wire import (
    WIRE_CATALOGUE,
    WireBehaviour,
    WireCoverage,
    wire_behaviours,
)

__all__ = [
    "CATALOGUE",
    "EXPECTATION_KEYS",
    "WIRE_CATALOGUE",
    "Behaviour",
    "BehaviourCoverage",
    "CodeCoverage",
    "CoverageInUseError",
    "CoverageNotInstalledError",
    "RunBehaviours",
    "UnknownBehaviourError",
    "WireBehaviour",
    "WireCoverage",
    "Witness",
    "behaviour",
    "behaviours_of",
    "catalogue_markdown",
    "classify",
    "code_table",
    "combine",
    "expectation_keys",
    "locate",
    "parse_ids",
    "starter_document",
    "starter_text",
    "suggest",
    "tool_code",
    "tool_locations",
    "wire_behaviours",
]

for _cls in (
    Behaviour,
    BehaviourCoverage,
    CodeCoverage,
    CoverageInUseError,
    CoverageNotInstalledError,
    RunBehaviours,
    UnknownBehaviourError,
    WireBehaviour,
    WireCoverage,
    Witness,
):
    _cls.__module__ = __name__
del _cls
