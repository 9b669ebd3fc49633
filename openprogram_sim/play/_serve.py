"""A scenario file served over the wire: its script, with its ``expect.requests`` checked on
every session, its ``expect.trajectory`` and ``expect.properties`` on each session's trace,
and the client invariants."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from openprogram_sim.play._check import check_trace, relative_where, request_check
from openprogram_sim.scenario import Scenario, load_scenario
from openprogram_sim.trace import Failure
from openprogram_sim.wire import ClientChecks, SessionCheck, TraceCheck, WireServer, serve

__all__ = ["scenario_server", "serve_scenario", "session_check"]


def trace_check(scenario: Scenario) -> TraceCheck:
    """``scenario``'s ``expect.trajectory`` and ``expect.properties`` on a served session's
    trace, with the failures ``run`` gives."""

    def check(trace: list[dict[str, Any]]) -> list[Failure]:
        found = check_trace(scenario, trace)
        return [dataclasses.replace(f, where=relative_where(f.where)) for f in found]

    return check


def session_check(scenario: Scenario, client: Any = None) -> SessionCheck:
    """What each session serving ``scenario`` is checked against: its ``expect.requests``,
    its ``expect.trajectory`` and ``expect.properties`` (on the session's trace), and the
    client invariants: the scenario's ``wire: {checks: {name: false}, max_retries: N}``
    with ``client`` on top (a :class:`~openprogram_sim.wire.ClientChecks`, the names to
    turn off, or ``{name: false, "max_retries": N}``; it turns off more, and its
    ``max_retries`` wins)."""
    wire = scenario.wire
    own = ClientChecks(
        off=frozenset(name for name, on in wire.checks.items() if not on),
        max_retries=wire.max_retries,
    )
    return SessionCheck(
        requests=request_check(scenario), trace=trace_check(scenario),
        client=ClientChecks.of(client).over(own),
    )  # fmt: skip


def _loaded(scenario: Scenario | str | os.PathLike[str]) -> Scenario:
    return scenario if isinstance(scenario, Scenario) else load_scenario(os.fspath(scenario))


def scenario_server(scenario: Scenario | str | os.PathLike[str], **options: Any) -> WireServer:
    """A :class:`~openprogram_sim.wire.WireServer` (not started) for ``scenario`` (loaded, or
    a path): its :meth:`~openprogram_sim.scenario.Scenario.script`, and its
    ``expect.requests``, ``expect.trajectory`` and ``expect.properties`` and the client
    invariants as the server's check (:func:`session_check`; ``client_checks=`` turns
    invariants off). Other ``options`` are WireServer's."""
    loaded = _loaded(scenario)
    check = session_check(loaded, options.pop("client_checks", None))
    return WireServer(loaded.script(), check=check, **options)


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
    each session's client sent against the scenario's ``expect.requests``, each session's
    trace against its ``expect.trajectory`` and ``expect.properties``, and the client
    invariants (``client_checks=``: see :func:`session_check`). Other ``options`` are
    :func:`~openprogram_sim.wire.serve`'s (``port``, ``cycle``, ``session_ttl``, ...).
    """
    loaded = _loaded(scenario)
    check = session_check(loaded, options.pop("client_checks", None))
    with serve(loaded.script(), check=check, **options) as server:
        yield server
