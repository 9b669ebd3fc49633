"""Fixtures for the plugin and report tests.

Inner in-process sessions (pytester) drop every module they import when they end; the
harness and hypothesis (whose pytest plugin imports it at every session's end) are imported
once here so that each inner session stays fast.
"""

from __future__ import annotations

import hypothesis
import pytest
from plugin_data import write_scenarios

import openprogram_sim.play
import openprogram_sim.plugin._objects
import openprogram_sim.report
import openprogram_sim.scenario

PRELOADED = (
    hypothesis,
    openprogram_sim.plugin._objects,
    openprogram_sim.play,
    openprogram_sim.report,
    openprogram_sim.scenario,
)


@pytest.fixture
def scenario_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester project holding the six scenario files under scenarios/."""
    write_scenarios(pytester.path)
    return pytester
