"""Record modes, as vcrpy defines them: none replays only, once records a missing cassette
and replays an existing one, new_episodes records what the cassette cannot answer, all
records everything again; CI always means none."""

from __future__ import annotations

import pytest
from cassette_support import SESSION, record, session, set_secrets

from openprogram_sim.cassettes import Cassette, resolve_record_mode
from openprogram_sim.play import serve_scenario
from openprogram_sim.wire import serve

CHANGED = SESSION.replace('["sunny, 21°C", "rain, 12°C"]', '["sunny, 25°C", "rain, 12°C"]')


def _count(path) -> int:
    return len(Cassette(path, allow_unplayed=True).load().vcr.data)


def test_new_episodes_then_all(tmp_path, monkeypatch) -> None:
    set_secrets(monkeypatch)
    path = tmp_path / "c.yaml"
    with serve_scenario(session()) as server:
        record(session(), "openai-chat", server, path)
    assert _count(path) == 2
    # round 1 is asked as before (replayed), round 2 differs: only it reaches the server
    answer = session().model[1].model_dump(exclude_none=True)
    with serve([answer]) as server:
        outcome = record(session(CHANGED), "openai-chat", server, path, mode="new_episodes")
        assert len(server.requests) == 1
    assert outcome.error is None
    assert _count(path) == 3
    with serve_scenario(session()) as server:
        record(session(CHANGED), "openai-chat", server, path, mode="all")
        assert len(server.requests) == 2  # everything asked again
    # all: the session recorded again is the whole cassette (a stale round 2 kept would fail
    # the replay as never requested)
    assert _count(path) == 2


def test_once_never_overwrites(tmp_path, monkeypatch) -> None:
    set_secrets(monkeypatch)
    path = tmp_path / "c.yaml"
    with serve_scenario(session(), cycle=True) as server:
        record(session(), "anthropic", server, path)
        before = path.read_bytes()
        served = len(server.requests)
        outcome = record(session(CHANGED), "anthropic", server, path, mode="once")
        assert len(server.requests) == served  # nothing went to the server
    assert "no recorded interaction matches request 2" in str(outcome.error)
    assert path.read_bytes() == before


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_ci_means_none(ci: str, monkeypatch) -> None:
    monkeypatch.setenv("CI", ci)
    assert resolve_record_mode("all") == "none"
    monkeypatch.setenv("CI", "false")
    assert resolve_record_mode("all") == "all"
    monkeypatch.delenv("CI")
    assert resolve_record_mode(None) == "none"
    with pytest.raises(ValueError, match="record mode 'sometimes' is not one of: none, once"):
        resolve_record_mode("sometimes")
