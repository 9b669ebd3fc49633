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
from openprogram_sim.cassettes._codec import (
    MAX_BODY_ENV,
    MAX_SSE_LINE,
    BodyTooLarge,
    NotEncoded,
    codings,
    inflate,
    longest_line,
    max_body,
    without_encoding,
)
from openprogram_sim.cassettes._format import EXTRA, body_kind, dump_yaml, iter_bodies, to_readable
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
    shapes (the environment's keys and the credentials requests carried); ``max_body``
    bounds what a compressed body inflates to when it is loaded (see :mod:`._codec`)."""

    def __init__(
        self, secrets: Callable[[], Iterable[str]] = tuple, *, max_body: int | None = None
    ) -> None:
        self._secrets = secrets
        self._max_body = max_body

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
        limit = max_body(self._max_body)
        responses = [
            _Stored(_replayable(response, path, i, limit)) for i, response in enumerate(loaded[1])
        ]
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
                findings.append(
                    (
                        place,
                        "a secret in the stream's text as the client reads it (its events "
                        "decoded and joined)",
                    )
                )
        text = dump_yaml(readable)
        if not findings and scrubber.text(text) != text:
            findings.append(("the written text", "a key shape"))
        if findings:
            raise SecretLeakError(str(path), findings)
        atomic_write(path, text)


def _replayable(response: dict[str, Any], path: Path, index: int, limit: int) -> dict[str, Any]:
    """``response`` as the replay serves it: a compressed body decoded (never past
    ``limit`` bytes) and its ``content-encoding`` dropped; a streamed body whose SSE lines
    the adapters would refuse is refused here, naming the cassette and the interaction."""
    where = f"{path}: interaction {index + 1} (interactions[{index}].response.body)"
    headers = response.get("headers") or {}
    body = (response.get("body") or {}).get("string") or b""
    applied = codings(headers)
    if applied:
        shown = ", ".join(applied)
        try:
            body = inflate(body, applied, limit)
        except NotEncoded:
            pass  # stored decoded, the header kept: served as it is, without the header
        except BodyTooLarge as exc:
            raise CassetteFormatError(
                f"{where}: the body is stored compressed (content-encoding: {shown}) and {exc}, "
                f"the limit on a replayed body; record the cassette again (the recorder stores "
                f"bodies decoded), or raise the limit: {MAX_BODY_ENV}=BYTES in the environment "
                "(Cassette(max_body=BYTES) in Python)"
            ) from None
        except ValueError as exc:
            raise CassetteFormatError(
                f"{where}: the body is stored compressed (content-encoding: {shown}) and {exc}; "
                "record the cassette again (the recorder stores bodies decoded)"
            ) from None
        extra = dict(response.get(EXTRA) or {})
        extra["chunks"] = [[0, float((extra.get("chunks") or [[0, 0.0]])[0][1])]]
        response = {
            **response,
            "headers": without_encoding(headers, len(body)),
            "body": {"string": body},
            EXTRA: extra,
        }
    if body_kind(headers) == "sse":
        longest = longest_line(body, MAX_SSE_LINE)
        if longest:
            raise CassetteFormatError(
                f"{where}: an SSE line of {longest:,} bytes; the adapters read lines of up to "
                f"{MAX_SSE_LINE:,} bytes (16 MiB, fixed: no API sends a longer one), so this "
                "reply cannot be replayed; record the cassette again, or cut the line"
            )
    return response
