"""What ``serve`` shows beyond this machine: a warning when it listens on an address other
machines reach, and session reports that name the scenario relative to the working
directory, not by the absolute path of the user's tree."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import httpx2
import pytest
from serve_support import interrupt, serve_process

from openprogram_sim.cli.serve import exposure_warning
from openprogram_sim.play import serve_scenario
from openprogram_sim.scenario import load_scenario

TIDES = Path(__file__).parent / "data" / "tides.yaml"
WRONG = {"model": "m", "messages": [{"role": "user", "content": "Why is the sky blue?"}]}


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_is_served_without_a_word(host: str) -> None:
    assert exposure_warning(host) is None


@pytest.mark.parametrize(
    ("host", "where"),
    [
        ("0.0.0.0", "every network interface"),
        ("::", "every network interface"),
        ("", "every network interface"),
        ("192.168.1.5", "192.168.1.5, which other machines may reach"),
        ("build-box", "build-box, which other machines may reach"),
    ],
)
def test_any_other_address_is_named_with_what_it_exposes(host: str, where: str) -> None:
    warning = exposure_warning(host)
    assert warning is not None
    assert f"listens on {where}:" in warning
    assert "the scenario's script" in warning and "no authentication" in warning
    assert "use --host 127.0.0.1" in warning


def _serve(*extra: str) -> str:
    """``openprogram-sim serve`` started, stopped with Ctrl-C once its banner is out: its stderr."""
    with serve_process(TIDES, "-q", *extra) as process:
        first = process.stdout.readline()  # type: ignore[union-attr]
        assert first.startswith("openprogram-sim serve:"), first
        _out, err = interrupt(process)
    return err


def test_serve_on_every_interface_warns_on_stderr() -> None:
    err = _serve("--host", "0.0.0.0")
    assert re.search(r"warning: --host 0\.0\.0\.0 listens on every network interface", err), err


def test_serve_on_loopback_does_not_warn() -> None:
    assert "warning" not in _serve()


def _tides_in(folder: Path) -> Path:
    """A copy of the tides scenario in ``folder`` (made)."""
    folder.mkdir()
    return Path(shutil.copy(TIDES, folder / "tides.yaml"))


def _failing_session(path: Path) -> tuple[dict[str, object], str]:
    """A session whose one request breaks ``expect.requests``: its report as ``DELETE``
    sends it, and the server's final report rendered."""
    with serve_scenario(load_scenario(path)) as server, httpx2.Client(base_url=server.url) as c:
        assert c.post("/s/a/v1/chat/completions", json=WRONG).status_code == 200
        sent = c.delete("/s/a").json()
        return sent, server.check().render()


def test_session_reports_name_the_scenario_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _tides_in(tmp_path / "scenarios")
    monkeypatch.chdir(tmp_path)
    sent, final = _failing_session(path.resolve())
    wheres = {f["where"] for f in sent["failures"]}  # type: ignore[attr-defined]
    assert "scenarios/tides.yaml:16" in wheres
    assert str(tmp_path) not in repr(sent) and str(tmp_path) not in final
    assert "at scenarios/tides.yaml:16" in final


def test_a_scenario_outside_the_working_directory_keeps_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _tides_in(tmp_path / "elsewhere")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    sent, _final = _failing_session(path.resolve())
    assert f"{path.resolve()}:16" in {f["where"] for f in sent["failures"]}  # type: ignore[attr-defined]
