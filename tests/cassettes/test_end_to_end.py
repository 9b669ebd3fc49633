"""Record, replay, distill: for each of the five APIs, a real session over loopback HTTP
(the wire server) through openprogram's real adapter, with live-looking keys in the
environment (Bedrock signed with SigV4 by botocore from fake AWS credentials).

Each test records, checks no key or AWS secret is on disk, stops the server and replays
with sockets blocked (the same trace), then distills the cassette and runs the scenario on
the scripted model (the same trace once more)."""

from __future__ import annotations

import pytest
import yaml
from cassette_support import (
    APIS,
    MODELS,
    SESSION,
    assert_no_secret_on_disk,
    block_sockets,
    record,
    session,
    set_secrets,
    with_cassette,
    written_files,
)

from openprogram_sim.cassettes import distill_yaml
from openprogram_sim.cli import main
from openprogram_sim.play import check_outcome, run_scenario, serve_scenario
from openprogram_sim.scenario import load_scenario, parse_scenario


@pytest.mark.parametrize("api", APIS)
def test_record_replay_distill(api: str, tmp_path, monkeypatch) -> None:
    set_secrets(monkeypatch)
    scenario = session()
    path = tmp_path / "cassettes" / f"{api}.yaml"
    with serve_scenario(scenario) as server:
        recorded = record(scenario, api, server, path)
        server.assert_consumed()
    assert recorded.error is None, recorded.error
    assert check_outcome(recorded).passed
    assert_no_secret_on_disk(tmp_path)
    assert written_files(tmp_path) == [path]  # no temporary file left behind

    # the server is stopped, and no socket may be opened: the cassette answers
    attempts = block_sockets(monkeypatch)
    replay = with_cassette(path.name, MODELS[api])
    replayed = run_scenario(parse_scenario(replay, str(path.parent / "replay.yaml")))
    assert attempts == []
    assert replayed.error is None, replayed.error
    assert replayed.trace == recorded.trace
    assert replayed.unconsumed == 0 and replayed.scripted_turns == 2

    distilled = tmp_path / "distilled.yaml"
    distilled.write_text(distill_yaml(path), encoding="utf-8")
    again = run_scenario(load_scenario(distilled))
    assert again.error is None, again.error
    assert again.trace == recorded.trace
    assert again.unconsumed == 0


def test_the_cassette_reads_as_the_session_went(tmp_path, monkeypatch) -> None:
    set_secrets(monkeypatch)
    scenario = session()
    path = tmp_path / "anthropic.yaml"
    with serve_scenario(scenario) as server:
        record(scenario, "anthropic", server, path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    first = data["interactions"][0]
    assert data["version"] == 1
    assert data["metadata"]["openprogram"]["model"] == MODELS["anthropic"]
    # the request body is stored parsed, so a review diff shows the prompt that changed
    assert first["request"]["body"]["json"]["messages"][0]["content"][0]["text"] == (
        "Weather in Paris and in Brest?"
    )
    assert first["request"]["headers"]["x-api-key"] == "<redacted>"
    # the streamed reply: one piece per SSE event, the first starting a chunk
    pieces = first["response"]["body"]["stream"]
    assert "after" in pieces[0]
    assert pieces[0]["text"].startswith("event: message_start\n")
    assert all(p["text"].endswith("\n\n") for p in pieces)
    assert isinstance(first["response"]["latency"], float)


@pytest.mark.parametrize("api", ["anthropic", "bedrock"])
def test_the_record_command_then_the_scenario_replays_it(api: str, tmp_path, monkeypatch) -> None:
    set_secrets(monkeypatch)
    text = with_cassette(f"cassettes/{api}.yaml", MODELS[api])
    scenario_file = tmp_path / "weather.yaml"
    scenario_file.write_text(text, encoding="utf-8")
    with serve_scenario(session()) as server:
        code = main(["record", str(scenario_file), "--base-url", server.adapter_url(api)])
    assert code == 0
    assert_no_secret_on_disk(tmp_path)
    block_sockets(monkeypatch)
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AWS_ACCESS_KEY_ID"):
        monkeypatch.delenv(name)  # replay needs no key
    verdict = check_outcome(run_scenario(load_scenario(scenario_file)))
    assert verdict.passed, verdict.report()
    meta = yaml.safe_load((tmp_path / "cassettes" / f"{api}.yaml").read_text())["metadata"]
    assert meta["openprogram"]["scenario"] == "../weather.yaml"
    # once: an existing cassette is replayed, not recorded again (no server is running)
    assert main(["record", str(scenario_file)]) == 0


def test_the_record_command_says_what_it_needs(tmp_path, capsys) -> None:
    scenario_file = tmp_path / "s.yaml"
    scenario_file.write_text(SESSION, encoding="utf-8")
    assert main(["record", str(scenario_file)]) == 2
    err = capsys.readouterr().err
    assert "give --model and --cassette" in err
    assert "model: {cassette: FILE, model: PROVIDER:MODEL}" in err


def test_in_ci_the_record_command_only_replays(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("CI", "true")
    scenario_file = tmp_path / "s.yaml"
    scenario_file.write_text(SESSION, encoding="utf-8")
    code = main(
        ["record", str(scenario_file), "--model", MODELS["anthropic"], "--cassette", "c.yaml"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "CI is set: record mode none" in err
    assert "does not exist and the record mode is none" in err
    assert not (tmp_path / "c.yaml").exists()


def test_distill_keeps_the_recorded_scenario(tmp_path, monkeypatch) -> None:
    set_secrets(monkeypatch)
    scenario_file = tmp_path / "weather.yaml"
    scenario_file.write_text(SESSION, encoding="utf-8")
    path = tmp_path / "c.yaml"
    with serve_scenario(session()) as server:
        recorded = record(session(), "gemini", server, path)
    out = tmp_path / "d.yaml"
    assert main(["distill", str(path), "--scenario", str(scenario_file), "-o", str(out)]) == 0
    distilled = load_scenario(out)
    assert distilled.expect.result == recorded.result  # the file's own expect: kept
    assert distilled.system_prompt == "You are a weather assistant."
    again = run_scenario(distilled)
    assert check_outcome(again).passed
    assert again.trace == recorded.trace
