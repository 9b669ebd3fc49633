"""The cassette fixtures: ``openprogram_cassette`` records and replays every ``httpx`` /
``httpx2`` client of a test; ``openprogram_cassette_config`` is meant to be overridden.

Only pytest and the standard library are imported here; vcrpy loads when a cassette is used.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["openprogram_cassette", "openprogram_cassette_config"]


@pytest.fixture
def openprogram_cassette_config() -> dict[str, Any]:
    """Options for every ``openprogram_cassette`` in its scope: override it in a
    ``conftest.py`` (e.g. ``{"ignore": ["$.metadata"], "timing": "recorded"}``); the
    marker's options are applied over it. Keys are :class:`~openprogram_sim.cassettes.
    Cassette` arguments, plus ``folder`` (where unnamed cassettes go, relative to the test
    file; default ``cassettes/<module>``)."""
    return {}


def _cassette_path(request: pytest.FixtureRequest, folder: str | None) -> Path:
    """``cassettes/<test module>/<test name>.yaml`` beside the test file, pytest-recording's
    convention."""
    test_file = Path(str(request.node.path))
    name = "".join(c if c.isalnum() or c in "-_.[]" else "_" for c in request.node.name)
    base = test_file.parent / (folder if folder is not None else f"cassettes/{test_file.stem}")
    return base / f"{name}.yaml"


@pytest.fixture
def openprogram_cassette(
    request: pytest.FixtureRequest, openprogram_cassette_config: dict[str, Any]
) -> Generator[Any, None, None]:
    """A :class:`~openprogram_sim.cassettes.Cassette` answering every ``httpx``/``httpx2``
    client of the test (openprogram's adapters and the official SDKs alike), in the record
    mode of ``--openprogram-record-mode`` (``none`` unless given, and always in CI).
    ``@pytest.mark.openprogram_cassette("file.yaml", ignore=[...], faults=[...])`` names
    the file and options; ``cassette.provider("anthropic:claude-...")`` is openprogram's
    adapter bound to it. At teardown what was recorded is saved, and requests the cassette
    could not answer, or recorded interactions never requested, fail the test."""
    from openprogram_sim.cassettes import Cassette

    options = dict(openprogram_cassette_config)
    marker = request.node.get_closest_marker("openprogram_cassette")
    path_arg = None
    if marker is not None:
        path_arg = marker.args[0] if marker.args else marker.kwargs.get("path")
        options.update({k: v for k, v in marker.kwargs.items() if k != "path"})
    folder = options.pop("folder", None)
    if path_arg is None:
        path = _cassette_path(request, folder)
    else:
        path = Path(str(request.node.path)).parent / str(path_arg)
    mode = request.config.getoption("openprogram_record_mode", None)
    options.setdefault(
        "record_with", f"pytest '{request.node.nodeid}' --openprogram-record-mode=all"
    )
    cassette = Cassette(path, record_mode=mode, **options)
    with cassette.patch():
        yield cassette
    problems = cassette.problems()
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)
