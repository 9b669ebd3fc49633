"""Reading and writing cassette files (a vcrpy persister): bounded, safe loading; the final
secret scan; atomic saves.

A save writes a temporary file in the cassette's own folder and moves it over the cassette
with ``os.replace`` (:mod:`openprogram_sim.cassettes._atomic`, which also says what a killed
save leaves and how the next one sweeps it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from vcr.persisters.filesystem import CassetteNotFoundError
from vcr.serialize import deserialize, serialize

from openprogram_sim.cassettes._atomic import atomic_write
from openprogram_sim.cassettes._format import EXTRA, dump_yaml, iter_bodies, to_readable
from openprogram_sim.cassettes._scrub import streamed_secrets
from openprogram_sim.cassettes._secrets import Scrubber, find_secrets
from openprogram_sim.errors import CassetteFormatError, SecretLeakError

__all__ = ["MAX_CASSETTE_BYTES", "Persister", "atomic_write"]

MAX_CASSETTE_BYTES = 64 * 1024 * 1024
"""A cassette file larger than this is refused before it is parsed."""


class _Stored(dict):  # type: ignore[type-arg]
    """A response read from a cassette file: it is only ever read, so vcrpy's deep copy of
    each loaded interaction keeps it as it is (the copy is most of a load's cost)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> _Stored:
        return self


class _Grab:
    """A serializer that keeps vcrpy's cassette dict instead of writing it out."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def serialize(self, data: dict[str, Any]) -> str:
        self.data = data
        return ""


class Persister:
    """vcrpy's persister interface (``load_cassette``/``save_cassette``) for one cassette
    session: ``secrets`` gives the exact values the final scan looks for besides the key
    shapes (the environment's keys and the credentials requests carried)."""

    def __init__(self, secrets: Callable[[], Iterable[str]] = tuple) -> None:
        self._secrets = secrets

    def load_cassette(self, cassette_path: Any, serializer: Any) -> Any:
        path = Path(cassette_path)
        if not path.is_file():
            raise CassetteNotFoundError()
        if path.stat().st_size > MAX_CASSETTE_BYTES:
            raise CassetteFormatError(f"{path}: larger than {MAX_CASSETTE_BYTES} bytes; refused")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise CassetteFormatError(
                f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8"
            ) from None
        if not text.strip():
            raise CassetteNotFoundError()
        try:
            loaded = deserialize(text, serializer)
        except CassetteFormatError as exc:
            raise CassetteFormatError(f"{path}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise CassetteFormatError(f"{path}: not a cassette: {exc}") from None
        for request in loaded[0]:
            request._op_from_file = True  # scrubbed when it was recorded: not again
        responses = [_Stored(response) for response in loaded[1]]
        for response in responses:
            response.setdefault(EXTRA, {})["from_file"] = True
        return (loaded[0], responses, *loaded[2:])

    def save_cassette(self, cassette_path: Any, cassette_dict: Any, serializer: Any) -> None:
        path = Path(cassette_path)
        grab = _Grab()
        serialize(cassette_dict, grab)  # vcrpy's own shaping (text bodies, headers)
        readable = to_readable(grab.data)
        secrets = list(self._secrets())
        findings = find_secrets(readable, secrets)
        scrubber = Scrubber(secrets)
        for place, raw in iter_bodies(grab.data):
            text = raw.decode("latin-1")
            if scrubber.text(text) != text and not any(f[0].startswith(place) for f in findings):
                findings.append((place, "a key shape inside the body's bytes"))
        for i, interaction in enumerate(grab.data.get("interactions", [])):
            if streamed_secrets(interaction["response"], scrubber):
                place = f"interactions[{i}].response.body"
                findings.append((place, "a secret streamed in pieces across its events"))
        text = dump_yaml(readable)
        if not findings and scrubber.text(text) != text:
            findings.append(("the written text", "a key shape"))
        if findings:
            raise SecretLeakError(str(path), findings)
        atomic_write(path, text)
