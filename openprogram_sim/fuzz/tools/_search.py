"""How a campaign over the user's tools searches: the Hypothesis backend, the coverage-guided
mode, the shared example database, and the ``setup:``/``teardown:`` run around each example.

- ``backend="crosshair"``: Hypothesis's ``settings(backend="crosshair")``, from the
  ``hypothesis-crosshair`` package (the ``crosshair`` extra), which solves for the choices
  the generator makes (which tool, which branch of a schema, which bound) rather than
  drawing them at random.
- ``coverage_guided``: the sandbox counts the lines of the tools' code each run executes
  (:mod:`openprogram_sim.fuzz.tools._lines`); the campaign feeds that count to
  Hypothesis's ``target()`` and mutates the runs that went deepest
  (:mod:`openprogram_sim.fuzz.tools._corpus`).
- ``database``: a folder (``DirectoryBasedExampleDatabase``) or ``redis://host:port/db``
  (``RedisExampleDatabase``, the ``redis`` extra). Every chunk of every campaign over the
  same tools uses one key (:func:`database_key`), replays the failures saved under it
  first, and saves the ones it finds, so campaigns on several machines share them.
- ``setup``/``teardown``: the user's callables (``package.module:name``) every generated
  scenario runs before and after its run, to reset what the tools keep between runs: the
  sandbox process serves many runs.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from hypothesis import Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from openprogram_sim.fuzz._chunks import Chunk, search_settings
from openprogram_sim.fuzz.tools._target import ToolTarget

__all__ = [
    "BACKENDS",
    "SearchError",
    "SearchOptions",
    "chunk_settings",
    "database_key",
    "example_database",
]

BACKENDS = ("hypothesis", "crosshair")
"""``--backend`` values: Hypothesis's own random generation, or CrossHair's solver."""

_CROSSHAIR_MODULE = "hypothesis_crosshair_provider"


class SearchError(ValueError):
    """A search option that cannot be used (the message says why and what to do)."""


@dataclass(frozen=True, slots=True)
class SearchOptions:
    """How a campaign searches (see the module docstring); picklable, for workers."""

    backend: str = "hypothesis"
    coverage_guided: bool = False
    database: str | None = None
    """A folder, or ``redis://host:port/db``; None: no database (campaigns replay by seed)."""
    setup: tuple[str, ...] = ()
    teardown: tuple[str, ...] = ()

    def checked(self) -> SearchOptions:
        """These options, once each is usable here; raises :class:`SearchError`."""
        if self.backend not in BACKENDS:
            raise SearchError(f"--backend {self.backend!r} is not one of {', '.join(BACKENDS)}")
        if self.backend == "crosshair" and importlib.util.find_spec(_CROSSHAIR_MODULE) is None:
            raise SearchError(
                "--backend crosshair needs the hypothesis-crosshair package, which is not "
                "installed: pip install 'openprogram-sim[crosshair]'"
            )
        if self.database is not None:
            example_database(self.database, ping=True)
        return self

    def scenario_keys(self) -> dict[str, Any]:
        """The keys every generated scenario gets (its ``setup:`` and ``teardown:``)."""
        keys: dict[str, Any] = {}
        if self.setup:
            keys["setup"] = list(self.setup)
        if self.teardown:
            keys["teardown"] = list(self.teardown)
        return keys


def example_database(spec: str, *, ping: bool = False) -> ExampleDatabase:
    """The example database ``spec`` names: ``redis://host:port/db`` or a folder (made when
    missing); ``ping``: check now that a Redis server answers. Raises :class:`SearchError`."""
    if spec.startswith(("redis://", "rediss://")):
        return _redis(spec, ping)
    if "://" in spec:
        raise SearchError(
            f"--database {spec!r}: give a folder or redis://host:port/db (no other URL scheme)"
        )
    folder = Path(spec)
    if folder.exists() and not folder.is_dir():
        raise SearchError(f"--database {spec!r} is a file, not a folder")
    return DirectoryBasedExampleDatabase(str(folder))


def _redis(spec: str, ping: bool) -> ExampleDatabase:
    url = urlparse(spec)
    db = url.path.lstrip("/") or "0"
    try:
        port = url.port or 6379
    except ValueError:
        port = -1
    if not url.hostname or not db.isdigit() or port < 0:
        raise SearchError(
            f"--database {spec!r} is not a Redis URL: write redis://host:port/db "
            "(e.g. redis://localhost:6379/0)"
        )
    try:  # the redis extra, typed or not: looked up by name
        redis: Any = importlib.import_module("redis")
        extra: Any = importlib.import_module("hypothesis.extra.redis")
    except ImportError as exc:
        raise SearchError(
            f"--database {spec!r} needs the redis package ({exc}): "
            "pip install 'openprogram-sim[redis]'"
        ) from None
    client = redis.Redis.from_url(spec)
    if ping:
        try:
            client.ping()
        except redis.RedisError as exc:
            raise SearchError(
                f"--database {spec!r}: no Redis server answers at {url.hostname}:{port} "
                f"({exc}); start one, or give a folder"
            ) from None
    database: ExampleDatabase = extra.RedisExampleDatabase(client)
    return database


def database_key(target: ToolTarget) -> bytes:
    """One key for every campaign over these tools, whatever the seed or the chunk."""
    names = ",".join(sorted(target.names))
    return hashlib.sha256(f"openprogram-fuzz/tools/{target.label}/{names}".encode()).digest()


def chunk_settings(chunk: Chunk, options: SearchOptions) -> settings:
    """:func:`~openprogram_sim.fuzz._chunks.search_settings` with this search's backend,
    database (its saved failures replayed first) and targeting phase."""
    phases = [Phase.generate, Phase.shrink]
    extra: dict[str, Any] = {}
    if options.database is not None:
        phases.insert(0, Phase.reuse)
        extra["database"] = example_database(options.database)
    if options.coverage_guided:
        phases.insert(-1, Phase.target)
    if options.backend != "hypothesis":
        extra["backend"] = options.backend
    return settings(search_settings(chunk), phases=phases, **extra)
