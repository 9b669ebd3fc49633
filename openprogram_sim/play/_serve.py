"""A scenario file served over the wire: its script, with its ``expect.requests`` checked on
every session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from openprogram_sim.play._check import request_check
from openprogram_sim.scenario import Scenario, load_scenario
from openprogram_sim.wire import WireServer, serve

__all__ = ["scenario_server", "serve_scenario"]


def _loaded(scenario: Scenario | str | os.PathLike[str]) -> Scenario:
    return scenario if isinstance(scenario, Scenario) else load_scenario(os.fspath(scenario))


def scenario_server(scenario: Scenario | str | os.PathLike[str], **options: Any) -> WireServer:
    """A :class:`~openprogram_sim.wire.WireServer` (not started) for ``scenario`` (loaded, or
    a path): its :meth:`~openprogram_sim.scenario.Scenario.script`, and its
    ``expect.requests`` as the server's request check. ``options`` are WireServer's."""
    loaded = _loaded(scenario)
    return WireServer(loaded.script(), check=request_check(loaded), **options)


@contextmanager
def serve_scenario(
    scenario: Scenario | str | os.PathLike[str], **options: Any
) -> Iterator[WireServer]:
    """Serve a scenario (loaded, or the path to its file) on a real loopback port from a
    background thread, as :func:`~openprogram_sim.wire.serve` serves a script::

        with serve_scenario("scenarios/basics/one_tool.yaml") as server:
            client = openai.OpenAI(base_url=server.base_url("openai"), api_key="x")
            ...  # your agent, against the scripted model
            assert server.check().passed, server.check().render()

    :meth:`WireServer.check <openprogram_sim.wire.WireServer.check>` then also holds what
    each session's client sent against the scenario's ``expect.requests``. ``options`` are
    :func:`~openprogram_sim.wire.serve`'s (``port``, ``cycle``, ``session_ttl``, ...).
    """
    loaded = _loaded(scenario)
    with serve(loaded.script(), check=request_check(loaded), **options) as server:
        yield server
