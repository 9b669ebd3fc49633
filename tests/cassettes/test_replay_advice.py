"""A replay that no longer matches its cassette advises what fixes a cassette: record it
again (the command for where it is used: a scenario, a pytest test, Python), or leave a
field that changes from run to run out of matching. Never "remove the scripted turns": a
cassette's interactions are the recording's. Following the advice makes the replay pass."""

from __future__ import annotations

import shutil

import pytest
from cassette_support import MODELS, SESSION, record, session, set_secrets, with_cassette

from openprogram_sim.cassettes import Cassette
from openprogram_sim.cli import main
from openprogram_sim.play import check_outcome, run_scenario, serve_scenario
from openprogram_sim.scenario import load_scenario, parse_scenario

CHANGED = SESSION.replace('["sunny, 21°C", "rain, 12°C"]', '["sunny, 22°C", "rain, 12°C"]')
FIELD = "$.messages[2].content[0].content[0].text"


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """The session recorded through Anthropic's adapter, at cassettes/anthropic.yaml."""
    set_secrets(monkeypatch)
    path = tmp_path / "cassettes" / "anthropic.yaml"
    with serve_scenario(session()) as server:
        record(session(), "anthropic", server, path)
    return path


def _scenario_file(tmp_path, text: str = CHANGED):
    path = tmp_path / "weather.yaml"
    path.write_text(with_cassette("cassettes/anthropic.yaml", MODELS["anthropic"], text))
    return path


def test_a_scenario_is_told_to_record_its_cassette_again(recorded, tmp_path) -> None:
    path = _scenario_file(tmp_path)
    verdict = check_outcome(run_scenario(load_scenario(path)))
    report = verdict.report()
    command = f"openprogram-sim record {path} --record-mode all"
    assert (
        f"if the session changed, record the cassette again: {command} (new_episodes instead "
        "of all: record only what it cannot answer)"
    ) in report
    assert (
        f"or, if {FIELD} changes from run to run (a date, an id), leave it out of matching: "
        f'ignore: ["{FIELD}"] in a scenario\'s model: {{cassette: ...}}'
    ) in report
    [unconsumed] = [f for f in verdict.failures if "never requested" in f.title]
    assert unconsumed.title == (
        "1 of 2 recorded interactions of cassette cassettes/anthropic.yaml were never requested"
    )
    assert f"record the cassette again: {command}" in unconsumed.detail
    assert "remove them" not in report and "scripted turns" not in report


def test_following_the_advice_makes_the_replay_pass(recorded, tmp_path) -> None:
    path = _scenario_file(tmp_path)
    with serve_scenario(session(CHANGED)) as server:
        code = main(["record", str(path), "--record-mode", "all",
                     "--base-url", server.base_url("anthropic")])  # fmt: skip
    assert code == 0
    assert check_outcome(run_scenario(load_scenario(path))).passed


def test_the_ignore_advice_names_a_path_that_matching_then_leaves_out(recorded, tmp_path) -> None:
    text = with_cassette("cassettes/anthropic.yaml", MODELS["anthropic"], CHANGED,
                         ignore=f'["{FIELD}"]')  # fmt: skip
    scenario = parse_scenario(text, str(tmp_path / "weather.yaml"))
    outcome = run_scenario(scenario)
    assert outcome.error is None, outcome.error  # the one differing field is not compared


def test_in_python_the_advice_is_the_record_mode(recorded) -> None:
    cassette = Cassette(recorded).load()
    outcome = run_scenario(session(CHANGED), cassette.provider())
    assert 'record the cassette again: record_mode="all" (new_episodes instead' in str(
        outcome.error
    )
    [_, unplayed] = cassette.problems()
    assert unplayed.endswith('record the cassette again: record_mode="all" (new_episodes '
                             "instead of all: record only what it cannot answer)")  # fmt: skip


def test_under_pytest_the_advice_is_the_tests_record_mode(recorded, pytester) -> None:
    shutil.copy(recorded, pytester.path / "anthropic.yaml")
    pytester.makepyfile(
        test_weather=f"""
        import pytest
        from openprogram_sim.play import run_scenario
        from openprogram_sim.scenario import parse_scenario

        @pytest.mark.openprogram_cassette("anthropic.yaml")
        def test_weather(openprogram_cassette):
            provider = openprogram_cassette.provider("{MODELS["anthropic"]}")
            run_scenario(parse_scenario({CHANGED!r}, "s.yaml"), provider)
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert (
        "record the cassette again: pytest 'test_weather.py::test_weather' "
        "--openprogram-record-mode=all"
    ) in out
