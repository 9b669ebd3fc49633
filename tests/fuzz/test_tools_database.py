"""Campaigns share Hypothesis's example database (``--database DIR`` or
``redis://host:port/db``): a second campaign over the same tools, with another seed,
replays the first one's failure before it generates anything, so it finds it at once."""

from __future__ import annotations

import importlib.util
import shutil
import textwrap
import uuid
from pathlib import Path

import pytest

from openprogram_sim.cli import main
from openprogram_sim.fuzz import ToolTarget, run_tool_campaign
from openprogram_sim.fuzz.tools import SearchError, SearchOptions
from openprogram_sim.fuzz.tools._campaign import BATCH
from openprogram_sim.fuzz.tools._search import example_database

TOOLS = '''
import sys
from openprogram import ToolRegistry, function

registry = ToolRegistry()

@function(registry=registry)
def shout(text: str) -> str:
    """Shouts; exits on a text with an exclamation mark in it.

    Args:
        text: What to shout.
    """
    if "!" in text:
        sys.exit(4)
    return text.upper()
'''


@pytest.mark.slow
def test_a_second_campaign_replays_the_first_one_s_failure_first(tmp_path: Path) -> None:
    module = f"db_tools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(TOOLS))
    target = ToolTarget.load(registry=f"{module}:registry", pythonpath=[str(tmp_path)])
    shared = SearchOptions(database=str(tmp_path / "db"))

    first = run_tool_campaign(target, 2000, seed=1, workers=1, regressions=None, search=shared)
    assert first.failure is not None and first.failure.breach is not None
    assert first.failure.breach.kind == "escapes" and first.stats.runs > 4
    assert any((tmp_path / "db").rglob("*"))  # saved

    second = run_tool_campaign(target, 2000, seed=99, workers=1, regressions=None,
                               search=shared)  # fmt: skip
    assert second.failure is not None and second.failure.breach is not None
    assert second.failure.breach.call.tool == "shout"
    assert "!" in second.failure.breach.call.args["text"]
    # replayed before generating: the saved example (one batch of BATCH scenarios) ran first
    assert second.failure.chunk == 0 and second.stats.runs <= BATCH

    alone = run_tool_campaign(target, 2000, seed=99, workers=1, regressions=None)
    assert alone.stats.runs > BATCH  # seed 99 alone needs a search


def test_a_folder_database_is_made_where_it_is_missing(tmp_path: Path) -> None:
    db = example_database(str(tmp_path / "a" / "b"))
    db.save(b"k", b"v")
    assert list(db.fetch(b"k")) == [b"v"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("redis://", "--database 'redis://' is not a Redis URL: write redis://host:port/db "
                     "(e.g. redis://localhost:6379/0)"),
        ("redis://localhost:6379/x", "--database 'redis://localhost:6379/x' is not a Redis URL: "
                                     "write redis://host:port/db (e.g. redis://localhost:6379/0)"),
        ("s3://bucket/x", "--database 's3://bucket/x': give a folder or redis://host:port/db "
                          "(no other URL scheme)"),
    ],
)  # fmt: skip
def test_a_database_that_is_no_folder_or_redis_url_is_refused(spec: str, message: str) -> None:
    with pytest.raises(SearchError) as caught:
        SearchOptions(database=spec).checked()
    assert str(caught.value) == message


def test_a_file_is_no_database_folder(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(SearchError, match=r"is a file, not a folder$"):
        SearchOptions(database=str(tmp_path / "f")).checked()


@pytest.mark.skipif(importlib.util.find_spec("redis") is not None, reason="redis is installed")
def test_redis_without_the_extra_names_the_extra(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["fuzz", "--tools", "weather_agent.tools:convert", "--database",
                 "redis://127.0.0.1:6379/0"])  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err == (
        "openprogram-sim fuzz: --database 'redis://127.0.0.1:6379/0' needs the redis package "
        "(No module named 'redis'): pip install 'openprogram-sim[redis]'\n"
    )


@pytest.mark.skipif(importlib.util.find_spec("redis") is None, reason="redis is not installed")
def test_redis_with_no_server_says_so() -> None:
    with pytest.raises(SearchError, match=r"no Redis server answers at 127\.0\.0\.1:1 "):
        SearchOptions(database="redis://127.0.0.1:1/0").checked()


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("redis") is None or shutil.which("redis-server") is None,
    reason="needs the redis package and a redis-server binary",
)
def test_a_redis_database_saves_and_fetches(tmp_path: Path) -> None:
    import subprocess
    import time

    server = subprocess.Popen(["redis-server", "--port", "6391", "--save", ""],
                              stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        time.sleep(0.5)
        db = example_database("redis://127.0.0.1:6391/0", ping=True)
        db.save(b"k", b"v")
        assert list(db.fetch(b"k")) == [b"v"]
    finally:
        server.terminate()
        server.wait(5)
