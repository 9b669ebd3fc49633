"""The pytest plugin's cassette fixture and marker, and ``--openprogram-record-mode``,
through real inner pytest sessions: record once against the wire server, replay with the
server gone and sockets blocked, ``none`` by default and always in CI."""

from __future__ import annotations

import pytest
from cassette_support import SECRETS, assert_no_secret_on_disk

TEST_FILE = """
import os
import socket

import openai
import pytest

TURNS = [{"text": "Partly cloudy."}]


def _client(cassette, serve, monkeypatch):
    if cassette.recording:
        return openai.OpenAI(
            base_url=serve(TURNS).base_url("openai"), api_key=os.environ["OPENAI_API_KEY"],
            max_retries=0,
        )
    def refuse(self, address):
        raise AssertionError(f"a socket was opened to {address} during a replay")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-x", max_retries=0)


@pytest.mark.openprogram_cassette("tapes/weather.yaml")
def test_weather(openprogram_cassette, openprogram_serve, monkeypatch):
    client = _client(openprogram_cassette, openprogram_serve, monkeypatch)
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": PROMPT}]
    )
    assert reply.choices[0].message.content == "Partly cloudy."
    print("mode:", openprogram_cassette.record_mode)


PROMPT = "Weather in Paris?"
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", SECRETS["OPENAI_API_KEY"])
    pytester.makepyfile(test_weather=TEST_FILE)
    return pytester


def test_record_once_then_replay_offline_by_default(project: pytest.Pytester) -> None:
    result = project.runpytest("--openprogram-record-mode=once", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*mode: once*"])
    cassette = project.path / "tapes" / "weather.yaml"
    assert "Partly cloudy." in cassette.read_text(encoding="utf-8")
    assert_no_secret_on_disk(project.path)
    written = cassette.stat().st_mtime_ns

    result = project.runpytest("-s")  # none: the cassette answers, no server, no socket
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*mode: none*"])
    assert cassette.stat().st_mtime_ns == written


def test_ci_forces_none(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    result = project.runpytest("--openprogram-record-mode=all", "-s")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*does not exist and the record mode is none (CI is set, so nothing is recorded)*"]
    )
    assert not (project.path / "tapes").exists()


def test_a_changed_request_and_unplayed_interactions_fail(project: pytest.Pytester) -> None:
    project.runpytest("--openprogram-record-mode=once").assert_outcomes(passed=1)
    project.makepyfile(test_weather=TEST_FILE.replace("Weather in Paris?", "Weather in Rome?"))
    result = project.runpytest()
    result.assert_outcomes(failed=1, errors=1)
    out = result.stdout.str()
    assert "BadRequestError: Error code: 400 - cassette " in out
    assert "ERROR at teardown of test_weather" in out
    assert '$.messages[0].content: recorded "Weather in Paris?", sent "Weather in Rome?"' in out
    assert "1 of 1 recorded interaction(s) were never requested" in out
    assert "def openprogram_cassette(" not in out  # the problems, not the plugin's code


def test_an_unnamed_cassette_and_the_config_fixture(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)  # CI forces record mode none
    pytester.makeconftest(
        """
import pytest

@pytest.fixture
def openprogram_cassette_config():
    return {"folder": "recorded", "ignore": ["$.messages"]}
"""
    )
    pytester.makepyfile(
        test_plain="""
def test_nothing_to_record(openprogram_cassette):
    assert openprogram_cassette.path.as_posix().endswith("recorded/test_nothing_to_record.yaml")
    assert openprogram_cassette.ignore.patterns == ("$.messages",)
"""
    )
    result = pytester.runpytest("--openprogram-record-mode=once")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "recorded").exists()  # nothing recorded, nothing written


def test_the_option_is_documented(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--openprogram-record-mode*"])
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["*openprogram_cassette(path=None, **options)*"])
