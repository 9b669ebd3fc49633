"""Compressed bodies (issue 23, item 1): a reply stored with ``content-encoding: gzip``
is decoded when the cassette loads, never past a limit (a 1.5 MB file used to inflate to
1 GB on replay), an SSE line longer than the adapters read is refused there too, each
naming the cassette and the interaction; and the recorder stores bodies decoded."""

from __future__ import annotations

import gzip
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import yaml
from cassette_support import MODELS, record, session, set_secrets, with_cassette
from upstream import Answer, record_raw, upstream

from openprogram_sim.cassettes import Cassette
from openprogram_sim.play import check_outcome, run_scenario, serve_scenario
from openprogram_sim.scenario import load_scenario

API = "openai-chat"


def _recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real session recorded over loopback, the scenario file beside it naming it."""
    set_secrets(monkeypatch)
    path = tmp_path / "weather.yaml"
    with serve_scenario(session()) as server:
        assert record(session(), API, server, tmp_path / "c.yaml").error is None
    path.write_text(with_cassette("c.yaml", MODELS[API]), encoding="utf-8")
    return path


def _compress(cassette: Path, packed: bytes | None = None, coding: str = "gzip") -> None:
    """Store the first reply of ``cassette`` compressed, as plain vcrpy keeps one
    (``packed``, already compressed, instead of the recorded one, when given)."""
    data = yaml.safe_load(cassette.read_text(encoding="utf-8"))
    response = data["interactions"][0]["response"]
    if packed is None:
        body = "".join(p["text"] for p in response["body"]["stream"]).encode()
        packed = gzip.compress(body) if coding == "gzip" else zlib.compress(body)
    response["headers"]["content-encoding"] = coding
    response["headers"]["content-length"] = "1"
    response["body"] = {"string": packed}
    cassette.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _bomb(size: int, *, sse: bool) -> bytes:
    """gzip of about ``size`` bytes (whole MiB): a JSON string, or one SSE data line with
    no end. Built as a hostile user would, fast: one MiB of text compressed once after a
    full flush (which resets the compressor, so each copy is the same bytes), repeated."""
    prefix = b"data: " if sse else b'{"x": "'
    block = b"a" * (1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    head = deflate.compress(prefix) + deflate.flush(zlib.Z_FULL_FLUSH)
    copy = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    tail = deflate.flush()
    crc = zlib.crc32(prefix)
    for _ in range(size >> 20):
        crc = zlib.crc32(block, crc)
    total = len(prefix) + (size >> 20 << 20)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    trailer = struct.pack("<II", crc, total & 0xFFFFFFFF)
    return header + head + copy * (size >> 20) + tail + trailer


def _replay(scenario_file: Path) -> tuple[bool, str]:
    outcome = run_scenario(load_scenario(scenario_file))
    verdict = check_outcome(outcome)
    return verdict.passed, outcome.error_text or ""


def test_a_compressed_reply_is_decoded_when_loaded_and_replays(tmp_path, monkeypatch) -> None:
    scenario_file = _recorded(tmp_path, monkeypatch)
    _compress(tmp_path / "c.yaml")
    cassette = Cassette(tmp_path / "c.yaml").load()
    _, response = cassette.vcr.data[0]
    assert "content-encoding" not in response["headers"]
    assert response["headers"]["content-length"] == [str(len(response["body"]["string"]))]
    assert response["body"]["string"].startswith(b"data: {")
    assert _replay(scenario_file) == (True, "")


def test_a_body_that_inflates_past_the_limit_is_refused_naming_it(tmp_path, monkeypatch) -> None:
    scenario_file = _recorded(tmp_path, monkeypatch)
    _compress(tmp_path / "c.yaml")
    monkeypatch.setenv("OPENPROGRAM_SIM_CASSETTE_MAX_BODY", "100")
    passed, error = _replay(scenario_file)
    assert not passed
    assert (
        f"{tmp_path / 'c.yaml'}: interaction 1 (interactions[0].response.body): the body is "
        "stored compressed (content-encoding: gzip) and it inflates past 100 bytes, the limit "
        "on a replayed body; record the cassette again (the recorder stores bodies decoded), "
        "or raise the limit: OPENPROGRAM_SIM_CASSETTE_MAX_BODY=BYTES in the environment "
        "(Cassette(max_body=BYTES) in Python)"
    ) in error
    monkeypatch.setenv("OPENPROGRAM_SIM_CASSETTE_MAX_BODY", "100000")  # raised: it replays
    assert _replay(scenario_file) == (True, "")


@pytest.mark.parametrize("limit", ["0", "64MiB", "-5"])
def test_a_bad_limit_is_named(tmp_path, monkeypatch, limit: str) -> None:
    monkeypatch.setenv("OPENPROGRAM_SIM_CASSETTE_MAX_BODY", limit)
    with pytest.raises(Exception) as caught:
        Cassette(tmp_path / "c.yaml")
    assert str(caught.value) == (
        f"OPENPROGRAM_SIM_CASSETTE_MAX_BODY={limit!r}: give a number of bytes, 1 or more "
        "(e.g. OPENPROGRAM_SIM_CASSETTE_MAX_BODY=134217728)"
    )


def test_a_coding_that_cannot_be_bounded_is_refused(tmp_path, monkeypatch) -> None:
    scenario_file = _recorded(tmp_path, monkeypatch)
    _compress(tmp_path / "c.yaml")
    text = (tmp_path / "c.yaml").read_text(encoding="utf-8")
    (tmp_path / "c.yaml").write_text(text.replace("content-encoding: gzip", "content-encoding: br"))
    passed, error = _replay(scenario_file)
    assert not passed
    assert (
        "interaction 1 (interactions[0].response.body): the body is stored compressed "
        "(content-encoding: br) and content-encoding br cannot be decoded here (only gzip and "
        "deflate); record the cassette again (the recorder stores bodies decoded)"
    ) in error


def test_an_sse_line_longer_than_the_adapters_read_is_refused(tmp_path, monkeypatch) -> None:
    scenario_file = _recorded(tmp_path, monkeypatch)
    _compress(tmp_path / "c.yaml", _bomb(17 << 20, sse=True))
    passed, error = _replay(scenario_file)
    assert not passed
    assert (
        "interaction 1 (interactions[0].response.body): an SSE line of 17,825,798 bytes; the "
        "adapters read lines of up to 16,777,216 bytes (16 MiB, fixed: no API sends a longer "
        "one), so this reply cannot be replayed; record the cassette again, or cut the line"
    ) in error


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["json", "sse"])
def test_the_1_gb_bomb_is_refused_in_bounded_memory(tmp_path, monkeypatch, kind: str) -> None:
    """The issue's repro: a cassette of about 1.5 MB whose reply inflates to 1 GB, run
    with ``openprogram-sim run`` as a process."""
    scenario_file = _recorded(tmp_path, monkeypatch)
    _compress(tmp_path / "c.yaml", _bomb(1 << 30, sse=kind == "sse"))
    if kind == "json":
        text = (tmp_path / "c.yaml").read_text(encoding="utf-8")
        (tmp_path / "c.yaml").write_text(text.replace("text/event-stream", "application/json"))
    assert (tmp_path / "c.yaml").stat().st_size < 2_000_000
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, "run", str(scenario_file)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert (
        "interaction 1 (interactions[0].response.body): the body is stored compressed "
        "(content-encoding: gzip) and it inflates past 67,108,864 bytes, the limit on a "
        "replayed body"
    ) in done.stdout
    peak_mib = int(done.stderr.strip().splitlines()[-1]) / 1024
    # 72 to 91 MiB measured alone, 202 once in a loaded whole-suite run; unbounded, the
    # same file took 3.1 GB (JSON) and 4.2 GB (SSE)
    assert peak_mib < 512, f"the run peaked at {peak_mib:.0f} MiB"


# openprogram-sim ARGS, then the process's peak memory (KiB) on the last line of stderr
_MEASURED = """
import resource, sys
from openprogram_sim.cli import main
try:
    code = main(sys.argv[1:])
finally:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def test_the_recorder_stores_a_compressed_reply_decoded(tmp_path, monkeypatch) -> None:
    """A reply recorded through vcrpy's own stubs (``requests`` here) arrives compressed:
    it is stored decoded, without ``content-encoding``, ``content-length`` its size."""
    requests = pytest.importorskip("requests")
    monkeypatch.delenv("CI", raising=False)
    reply = json.dumps({"choices": [{"message": {"content": "hello " * 200}}]}).encode()
    answer = Answer(
        [gzip.compress(reply)],
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )
    path = tmp_path / "c.yaml"
    with upstream(answer) as base, Cassette(path, record_mode="once").patch():
        got = requests.post(base + "/v1/chat/completions", json={"model": "m"}, timeout=10)
    assert got.json()["choices"][0]["message"]["content"] == "hello " * 200
    stored = yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"][0]["response"]
    headers = {k.lower(): v for k, v in stored["headers"].items()}
    assert "content-encoding" not in headers
    assert headers["content-length"] == str(len(reply))
    assert stored["body"] == {"json": json.loads(reply)}
    # and it replays, decoded, to the same client
    with Cassette(path).patch():
        again = requests.post(base + "/v1/chat/completions", json={"model": "m"}, timeout=10)
    assert again.json() == got.json()


def test_a_reply_compressed_twice_is_stored_decoded(tmp_path) -> None:
    """``content-encoding: gzip, gzip`` through httpx2: both codings undone."""
    reply = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()
    answer = Answer(
        [gzip.compress(gzip.compress(reply))],
        headers={"content-type": "application/json", "content-encoding": "gzip, gzip"},
    )
    assert record_raw(tmp_path / "c.yaml", answer) == reply
    text = (tmp_path / "c.yaml").read_text(encoding="utf-8")
    stored = yaml.safe_load(text)["interactions"][0]["response"]
    assert "content-encoding" not in stored["headers"]
    assert stored["headers"]["content-length"] == str(len(reply))
    assert stored["body"] == {"json": json.loads(reply)}
