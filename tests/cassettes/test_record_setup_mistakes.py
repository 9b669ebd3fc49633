"""``openprogram-sim record`` after a session whose every request got HTTP 401, 403 or 404:
a setup mistake (the key, the base URL, the model name), so nothing is written and the
exit status is 2, unless ``--keep-errors``; a session that went wrong otherwise is kept."""

from __future__ import annotations

import pytest
from cassette_support import MODELS, session, set_secrets, with_cassette

from openprogram_sim.cli import main
from openprogram_sim.play import serve_scenario
from openprogram_sim.scenario import parse_scenario


def _error_turn(status: int, message: str) -> str:
    return (
        "scenario: an error\nexec: {content: hi}\nmodel:\n"
        f"  - {{stop_reason: error, error: {message!r}, wire: {{status: {status}}}}}\n"
    )


@pytest.fixture
def scenario_file(tmp_path, monkeypatch):
    set_secrets(monkeypatch)
    path = tmp_path / "weather.yaml"
    path.write_text(with_cassette("cassettes/w.yaml", MODELS["anthropic"]), encoding="utf-8")
    return path


def test_a_wrong_base_url_writes_nothing_and_exits_2(scenario_file, capsys) -> None:
    with serve_scenario(session()) as server:
        code = main(["record", str(scenario_file), "--base-url", server.url + "/wrong"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"openprogram-sim record: {scenario_file.parent}/cassettes/w.yaml: not written: every "
        "request of the session got HTTP 404 (not found), a setup mistake rather than a "
        "session to keep (a 404 is a wrong --base-url or model name). Fix it and record "
        "again, or pass --keep-errors to keep such a session\n"
        "  exec raised ModelError: Anthropic API error: HTTP 404"
    ), err
    assert not (scenario_file.parent / "cassettes").exists()


@pytest.mark.parametrize("status", [401, 403])
def test_a_key_the_service_refuses_writes_nothing(scenario_file, capsys, status) -> None:
    with serve_scenario(parse_scenario(_error_turn(status, "invalid x-api-key"))) as server:
        code = main(["record", str(scenario_file), "--base-url", server.base_url("anthropic")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"every request of the session got HTTP {status} (" in err
    assert "(a 401 or 403 a missing, wrong or unauthorised key)" in err
    assert not (scenario_file.parent / "cassettes" / "w.yaml").exists()


def test_keep_errors_keeps_it(scenario_file, capsys) -> None:
    with serve_scenario(session()) as server:
        code = main(["record", str(scenario_file), "--keep-errors",
                     "--base-url", server.url + "/wrong"])  # fmt: skip
    assert code == 0
    assert "1 interaction(s) recorded" in capsys.readouterr().out
    assert (scenario_file.parent / "cassettes" / "w.yaml").is_file()


def test_a_session_that_failed_otherwise_is_kept(scenario_file) -> None:
    with serve_scenario(parse_scenario(_error_turn(529, "Overloaded"))) as server:
        code = main(["record", str(scenario_file), "--base-url", server.base_url("anthropic")])
    assert code == 0  # an overloaded service is worth a cassette (the agent's handling of it)
    assert (scenario_file.parent / "cassettes" / "w.yaml").is_file()


def test_a_good_cassette_is_not_overwritten_by_a_setup_mistake(scenario_file) -> None:
    with serve_scenario(session()) as server:
        assert main(["record", str(scenario_file), "--base-url", server.base_url("anthropic")]) == 0
        cassette = scenario_file.parent / "cassettes" / "w.yaml"
        before = cassette.read_bytes()
        code = main(["record", str(scenario_file), "--record-mode", "all",
                     "--base-url", server.url + "/wrong"])  # fmt: skip
    assert code == 2
    assert cassette.read_bytes() == before  # the session recorded first is the one kept
