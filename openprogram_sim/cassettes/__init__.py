"""Cassettes: real provider sessions recorded once, replayed offline through the real
adapters, and distilled into scenarios.

A cassette is a vcrpy cassette file (YAML) written to be read: JSON bodies parsed, streams
event by event with their chunk boundaries and timing. Record and replay::

    from openprogram_sim.cassettes import Cassette

    with Cassette("tests/cassettes/weather.yaml", record_mode="once") as cassette:
        provider = cassette.provider("anthropic:claude-sonnet-4-5")   # the real adapter
        Runtime(provider=provider).exec("Weather in Paris?", tools=[get_weather])
    # recorded the first time (the key from ANTHROPIC_API_KEY), replayed after that;
    # in CI (CI set) the mode is always "none": replay only, never a socket

In a scenario file, ``model: {cassette: weather.yaml, model: anthropic:claude-sonnet-4-5}``
replays it (``openprogram-sim record`` makes the file); in pytest, the
``openprogram_cassette`` fixture and marker, with ``--openprogram-record-mode``.
:func:`distill` turns a cassette into a scenario for the scripted model.

Secrets never reach disk: credential headers, key query parameters and key-shaped strings
in bodies are scrubbed as each interaction is recorded, and a final scan refuses to save
a cassette that still holds one (:class:`~openprogram_sim.errors.SecretLeakError`). A
request the cassette cannot answer gets the API's own HTTP 400 (``x-should-retry:
false``) naming the cassette, the closest recorded request and the JSON paths that differ.
"""

import importlib as _importlib
import typing as _typing

from openprogram_sim.errors import (
    CassetteError,
    CassetteFormatError,
    CassetteMismatchError,
    SecretLeakError,
)

if _typing.TYPE_CHECKING:
    from openprogram_sim.cassettes._cassette import (
        RECORD_MODES,
        Cassette,
        ReplayFault,
        resolve_record_mode,
    )
    from openprogram_sim.cassettes._distill import distill, distill_yaml
    from openprogram_sim.cassettes._format import SERIALIZER
    from openprogram_sim.cassettes._match import DEFAULT_IGNORE
    from openprogram_sim.cassettes._persist import Persister
    from openprogram_sim.cassettes._replay import (
        CassetteProvider,
        record_command,
        scenario_provider,
    )
    from openprogram_sim.cassettes._secrets import KEY_SHAPES, Scrubber, find_secrets, known_secrets

__all__ = [
    "DEFAULT_IGNORE",
    "KEY_SHAPES",
    "RECORD_MODES",
    "SERIALIZER",
    "Cassette",
    "CassetteError",
    "CassetteFormatError",
    "CassetteMismatchError",
    "CassetteProvider",
    "Persister",
    "ReplayFault",
    "Scrubber",
    "SecretLeakError",
    "distill",
    "distill_yaml",
    "find_secrets",
    "known_secrets",
    "record_command",
    "resolve_record_mode",
    "scenario_provider",
]

_WHERE = {
    "Cassette": "_cassette",
    "RECORD_MODES": "_cassette",
    "ReplayFault": "_cassette",
    "resolve_record_mode": "_cassette",
    "distill": "_distill",
    "distill_yaml": "_distill",
    "SERIALIZER": "_format",
    "DEFAULT_IGNORE": "_match",
    "Persister": "_persist",
    "CassetteProvider": "_replay",
    "record_command": "_replay",
    "scenario_provider": "_replay",
    "KEY_SHAPES": "_secrets",
    "Scrubber": "_secrets",
    "find_secrets": "_secrets",
    "known_secrets": "_secrets",
}


def __getattr__(name: str) -> _typing.Any:
    # vcrpy (and what it imports to patch) loads on first use, not with the scenario loader
    if name in _WHERE:
        value = getattr(_importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
        if isinstance(value, type):
            value.__module__ = __name__
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
