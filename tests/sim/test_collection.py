"""Collection: a scenario folder holds more than scenarios. A cassette stored where the docs put
it (``model: {cassette: cassettes/x.yaml}``, relative to the scenario, so below the scenario
folder) is recognised from its first bytes and left alone by ``openprogram-sim run`` and by
``pytest --openprogram-scenarios``, and ``-v`` names it; the scenario that replays it still
runs and passes. JSON (the schema, coverage output) and HTML are never candidates; fuzz
regression files are scenarios and are collected."""

from __future__ import annotations

from pathlib import Path

import pytest
from _support import ONE_SEARCH, run_cli

from openprogram_sim.errors import ScenarioError
from openprogram_sim.scenario import discover, load_scenario, not_a_scenario
from openprogram_sim.scenario._discover import CASSETTE_REASON, HEAD_BYTES

CASSETTE = (Path(__file__).parent / "data" / "weather_cassette.yaml").read_text(encoding="utf-8")
"""An openai-chat session recorded by ``openprogram-sim`` (through the wire server)."""

REPLAY = (Path(__file__).parent / "data" / "weather_replay.yaml").read_text(encoding="utf-8")
"""The scenario that replays ``weather_cassette.yaml`` (as ``cassettes/weather.yaml``)."""

REGRESSION = ONE_SEARCH.replace(
    "scenario: one search", "scenario: a fuzz regression (a scenario like any other)"
)

VCRPY = "interactions:\n- request:\n    body: null\n    method: GET\n    uri: http://x/\n" \
    "  response:\n    status: {code: 200, message: OK}\nversion: 1\n"  # fmt: skip
"""A cassette as plain vcrpy writes it (keys sorted: ``interactions`` first)."""

LEFT_ALONE = f"scenarios/cassettes/weather.yaml: {CASSETTE_REASON}"


def make_project(root: Path) -> Path:
    """A project laid out as the docs say: scenarios/, their cassettes below them, and the
    files the harness writes that could sit there (the schema, coverage JSON, a report)."""
    scenarios = root / "scenarios"
    (scenarios / "cassettes").mkdir(parents=True)
    (scenarios / "regressions").mkdir()
    (scenarios / "weather.yaml").write_text(REPLAY, encoding="utf-8")
    (scenarios / "cassettes" / "weather.yaml").write_text(CASSETTE, encoding="utf-8")
    (scenarios / "regressions" / "fuzz_0123456789.yaml").write_text(REGRESSION)
    (scenarios / "scenario.schema.json").write_text('{"title": "openprogram scenario"}\n')
    (scenarios / "coverage.json").write_text('{"behaviours": []}\n')
    (scenarios / "report.html").write_text("<!doctype html>\n")
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def test_a_cassette_is_recognised_by_its_top_level_keys(tmp_path: Path) -> None:
    ours, vcrpy = tmp_path / "ours.yaml", tmp_path / "vcrpy.yml"
    ours.write_text(CASSETTE, encoding="utf-8")
    vcrpy.write_text(VCRPY)
    assert not_a_scenario(ours) == CASSETTE_REASON
    assert not_a_scenario(vcrpy) == CASSETTE_REASON
    # a scenario that mentions interactions, a scenario with a typo'd key and broken files
    # are scenarios: loading them reports what is wrong
    for name, text in {
        "mentions.yaml": REGRESSION + "description: |\n  interactions: none\n",
        "typo.yaml": "interactions: []\nscenario: typo\n",
        "list.yaml": "- interactions: []\n",
        "binary.yaml": bytes(range(256)),
        "empty.yaml": "",
    }.items():
        path = tmp_path / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        assert not_a_scenario(path) is None, name


def test_only_the_first_bytes_are_read(tmp_path: Path) -> None:
    # interactions: past the head is not seen (and the file is loaded and reported instead)
    late = tmp_path / "late.yaml"
    late.write_text("metadata:\n" + "  k: v\n" * (HEAD_BYTES // 6) + "interactions: []\n")
    assert not_a_scenario(late) is None
    head = tmp_path / "head.yaml"
    head.write_text("version: 1\ninteractions:\n" + "- {request: {}}\n" * 100_000)
    assert head.stat().st_size > 100 * HEAD_BYTES
    assert not_a_scenario(head) == CASSETTE_REASON


def test_discover_leaves_the_cassette_alone_and_says_so(project: Path) -> None:
    skipped: list[tuple[Path, str]] = []
    found = discover([project / "scenarios"], on_skip=lambda p, r: skipped.append((p, r)))
    assert [p.relative_to(project).as_posix() for p in found] == [
        "scenarios/regressions/fuzz_0123456789.yaml",
        "scenarios/weather.yaml",
    ]
    assert skipped == [(project / "scenarios/cassettes/weather.yaml", CASSETTE_REASON)]


def test_run_passes_with_the_cassette_beside_its_scenario(project: Path) -> None:
    result = run_cli("run", "scenarios", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  scenarios/weather.yaml " in result.stdout
    assert "PASS  scenarios/regressions/fuzz_0123456789.yaml" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("2 scenarios: 2 passed in ")
    assert "cassettes/weather.yaml" not in result.stdout + result.stderr  # quiet by default


def test_run_verbose_names_the_file_left_alone(project: Path) -> None:
    result = run_cli("run", "-v", "scenarios", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.splitlines() == [f"openprogram-sim: left alone {LEFT_ALONE}"]
    as_json = run_cli("run", "--json", "--verbose", "scenarios", cwd=project)
    assert as_json.returncode == 0
    assert as_json.stdout.startswith("{") and LEFT_ALONE in as_json.stderr  # stdout stays JSON


def test_a_cassette_named_explicitly_says_what_it_is(project: Path) -> None:
    result = run_cli("run", "scenarios/cassettes/weather.yaml", cwd=project)
    assert result.returncode == 2
    assert (
        "  scenarios/cassettes/weather.yaml:1: this file is a cassette (a recorded session: "
        "top-level `interactions:`), not a scenario; run the scenario that replays it "
        "(`model: {cassette: ...}`), or its folder, where cassettes are left alone"
    ) in result.stdout.splitlines()
    with pytest.raises(ScenarioError) as info:
        load_scenario(project / "scenarios/cassettes/weather.yaml", shown_as="w.yaml")
    assert len(info.value.issues) == 1  # not five unknown keys


def test_pytest_collects_the_scenarios_and_leaves_the_cassette_alone(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester.path)
    # in subprocesses: after this test's in-process runs rolled sys.modules back, a later
    # test's OpenTelemetry spans in the same process lost their parents (tests/sim/test_otel.py)
    result = pytester.runpytest_subprocess(
        "--openprogram-scenarios", "-v", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*collected 2 items",
            "openprogram: left alone 1 file under the scenario paths that are not scenarios:",
            f"  {LEFT_ALONE}",
            "scenarios/regressions/fuzz_0123456789.yaml::a fuzz regression * PASSED*",
            "scenarios/weather.yaml::the model looks the city up, then answers PASSED*",
        ]
    )
    quiet = pytester.runpytest_subprocess("--openprogram-scenarios", "-p", "no:cacheprovider")
    assert quiet.ret == pytest.ExitCode.OK
    assert "left alone" not in quiet.stdout.str()
