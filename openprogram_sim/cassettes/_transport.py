"""The cassette behind ``httpx`` and ``httpx2``: transports to hand a client, and vcrpy
patches that route every client of the process through a cassette.

One code path serves both libraries (their APIs are the same; the module is passed in, as
vcrpy's own httpx stubs do) and both sync and async clients. A replayed reply is served
chunk by chunk from memory (no socket is opened); a live reply is passed through to the
client as it arrives while its chunks and their times are kept, then recorded once the
client has read it (or closed it).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import Any

from vcr.cassette import Cassette as VcrCassette

from openprogram_sim.cassettes._cassette import Cassette, Reply
from openprogram_sim.cassettes._format import EXTRA

__all__ = ["async_client", "patched", "sync_client", "transport"]

_LIBS = ("httpx2", "httpx")
_DECODABLE = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS}


def _lib(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _originals() -> dict[str, tuple[Any, Any]]:
    """Each library's real ``handle_async_request``/``handle_request``, taken before any
    cassette patches them (a vcrpy stub keeps the real one as ``__wrapped__``)."""
    out = {}
    for name in _LIBS:
        lib = _lib(name)
        if lib is not None:
            a = lib.AsyncHTTPTransport.handle_async_request
            s = lib.HTTPTransport.handle_request
            out[name] = (getattr(a, "__wrapped__", a), getattr(s, "__wrapped__", s))
    return out


_ORIGINAL = _originals()


# --------------------------------------------------------------------------- streams


class _Timeline:
    """What a live reply delivered: each chunk (decoded when the server compressed it)
    with the seconds since the one before."""

    def __init__(self, encoding: str) -> None:
        self.parts: list[tuple[bytes, float]] = []
        self.last = time.perf_counter()
        wbits = _DECODABLE.get(encoding)
        self.decoder = zlib.decompressobj(wbits) if wbits is not None else None
        self.done = False

    def add(self, chunk: bytes) -> None:
        now = time.perf_counter()
        data = self.decoder.decompress(chunk) if self.decoder is not None else chunk
        if data:
            self.parts.append((data, now - self.last))
            self.last = now

    def body(self) -> tuple[bytes, list[list[float]]]:
        if self.decoder is not None:
            tail = self.decoder.flush()
            if tail:
                self.parts.append((tail, 0.0))
        chunks: list[list[float]] = []
        offset = 0
        for data, after in self.parts:
            chunks.append([offset, after])
            offset += len(data)
        return b"".join(d for d, _ in self.parts), chunks or [[0, 0.0]]


def _stream_classes(lib: ModuleType) -> tuple[type, type]:
    """The playback and recording stream classes of ``lib`` (made once per library)."""
    cached = _CLASSES.get(lib.__name__)
    if cached is None:
        cached = _CLASSES[lib.__name__] = (_playback_class(lib), _recording_class(lib))
    return cached


def _playback_class(lib: ModuleType) -> type:
    class Playback(lib.SyncByteStream, lib.AsyncByteStream):  # type: ignore[misc,name-defined]
        """A recorded body served chunk by chunk (waiting as recorded when asked)."""

        def __init__(self, reply: Reply, timed: bool) -> None:
            self.reply = reply
            self.timed = timed

        def __iter__(self) -> Iterator[bytes]:
            for part, wait in self.reply.parts():
                if self.timed and wait > 0:
                    time.sleep(wait)
                yield part
            self._cut()

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for part, wait in self.reply.parts():
                if self.timed and wait > 0:
                    await asyncio.sleep(wait)
                yield part
            self._cut()

        def _cut(self) -> None:
            if self.reply.cut_at is not None:
                raise lib.RemoteProtocolError(
                    "peer closed connection without sending complete message body "
                    "(a cassette fault: cut_after)"
                )

    return Playback


def _recording_class(lib: ModuleType) -> type:
    class Recording(lib.SyncByteStream, lib.AsyncByteStream):  # type: ignore[misc,name-defined]
        """A live body passed through to the client, kept for the cassette."""

        def __init__(self, inner: Any, timeline: _Timeline, finish: Callable[[], None]) -> None:
            self.inner = inner
            self.timeline = timeline
            self.finish = finish

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self.inner:
                self.timeline.add(chunk)
                yield chunk
            self.finish()

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self.inner:
                self.timeline.add(chunk)
                yield chunk
            self.finish()

        def close(self) -> None:
            try:
                self.inner.close()
            finally:
                self.finish()

        async def aclose(self) -> None:
            try:
                await self.inner.aclose()
            finally:
                self.finish()

    return Recording


_CLASSES: dict[str, tuple[type, type]] = {}


# --------------------------------------------------------------------------- one request


def _served(lib: ModuleType, cassette: Cassette, reply: Reply) -> Any:
    playback, _ = _stream_classes(lib)
    extensions = {"reason_phrase": reply.reason.encode("ascii", "replace")} if reply.reason else {}
    return lib.Response(
        reply.status,
        headers=reply.headers,
        stream=playback(reply, cassette.timing == "recorded"),
        extensions=extensions,
    )


def _prepare_live(request: Any) -> None:
    # bodies compressed with codecs zlib cannot read (br, zstd) could not be stored
    # readable, nor scanned for keys: ask for what can be
    if "accept-encoding" in request.headers:
        request.headers["accept-encoding"] = "gzip, deflate"


def _recorded(
    lib: ModuleType, cassette: Cassette, vcr_request: Any, response: Any, started: float
) -> Any:
    """``response`` with its body passed through and recorded at the end."""
    _, recording = _stream_classes(lib)
    encoding = response.headers.get("content-encoding", "").strip().lower()
    timeline = _Timeline(encoding)
    latency = time.perf_counter() - started
    headers: dict[str, list[str]] = {}
    for name, value in response.headers.multi_items():
        headers.setdefault(name, []).append(value)
    if timeline.decoder is not None:  # stored decoded, as vcrpy's decode_compressed_response
        headers = {
            k: v
            for k, v in headers.items()
            if k.lower() not in ("content-encoding", "content-length")
        }

    def finish() -> None:
        if timeline.done:
            return
        timeline.done = True
        body, chunks = timeline.body()
        cassette.record(
            vcr_request,
            {
                "status": {"code": response.status_code, "message": response.reason_phrase},
                "headers": headers,
                "body": {"string": body},
                EXTRA: {"chunks": chunks, "latency": latency},
            },
        )

    response.stream = recording(response.stream, timeline, finish)
    return response


def _headers(request: Any) -> dict[str, str]:
    """The request's headers as a dict, repeated names joined with ", " (as the headers'
    own mapping does, in one pass instead of a lookup per name)."""
    out: dict[str, str] = {}
    for name, value in request.headers.multi_items():
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


async def handle_async(
    lib: ModuleType, cassette: Cassette, request: Any, live: Callable[[Any], Any]
) -> Any:
    body = await request.aread()
    answer = cassette.answer(request.method, str(request.url), _headers(request), body)
    if isinstance(answer, Reply):
        if cassette.timing == "recorded" and answer.latency > 0:
            await asyncio.sleep(answer.latency)
        return _served(lib, cassette, answer)
    _prepare_live(request)
    started = time.perf_counter()
    response = await live(request)
    return _recorded(lib, cassette, answer, response, started)


def handle_sync(
    lib: ModuleType, cassette: Cassette, request: Any, live: Callable[[Any], Any]
) -> Any:
    body = request.read()
    answer = cassette.answer(request.method, str(request.url), _headers(request), body)
    if isinstance(answer, Reply):
        if cassette.timing == "recorded" and answer.latency > 0:
            time.sleep(answer.latency)
        return _served(lib, cassette, answer)
    _prepare_live(request)
    started = time.perf_counter()
    response = live(request)
    return _recorded(lib, cassette, answer, response, started)


# --------------------------------------------------------------------------- transports


def transport(cassette: Cassette, *, lib: str = "httpx2", sync: bool = False) -> Any:
    """A transport of ``lib`` (``httpx2`` or ``httpx``) answered by ``cassette``; a live
    request (while recording) goes through the library's default transport, made only
    then."""
    module = _lib(lib)
    if module is None:
        raise ImportError(f"{lib} is not installed")
    return (_sync_transport if sync else _async_transport)(module, cassette)


def _async_transport(module: ModuleType, cassette: Cassette) -> Any:
    class AsyncCassetteTransport(module.AsyncBaseTransport):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            self.cassette = cassette
            self._inner: Any = None

        async def handle_async_request(self, request: Any) -> Any:
            async def live(r: Any) -> Any:
                if self._inner is None:
                    self._inner = module.AsyncHTTPTransport()
                return await self._inner.handle_async_request(r)

            return await handle_async(module, cassette, request, live)

        async def aclose(self) -> None:
            if self._inner is not None:
                await self._inner.aclose()

    return AsyncCassetteTransport()


def _sync_transport(module: ModuleType, cassette: Cassette) -> Any:
    class CassetteTransport(module.BaseTransport):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            self.cassette = cassette
            self._inner: Any = None

        def handle_request(self, request: Any) -> Any:
            def live(r: Any) -> Any:
                if self._inner is None:
                    self._inner = module.HTTPTransport()
                return self._inner.handle_request(r)

            return handle_sync(module, cassette, request, live)

        def close(self) -> None:
            if self._inner is not None:
                self._inner.close()

    return CassetteTransport()


def async_client(cassette: Cassette, **options: Any) -> Any:
    """An ``httpx2.AsyncClient`` answered by ``cassette``."""
    import httpx2

    return httpx2.AsyncClient(transport=transport(cassette), **options)


def sync_client(cassette: Cassette, *, lib: str = "httpx2", **options: Any) -> Any:
    """A sync client of ``lib`` answered by ``cassette``."""
    module = importlib.import_module(lib)
    return module.Client(transport=transport(cassette, lib=lib, sync=True), **options)


# --------------------------------------------------------------------------- patching


def _patches(cassette: Cassette) -> tuple[tuple[Any, str, Any], ...]:
    """vcrpy ``custom_patches`` for both libraries' default transports."""
    out: list[tuple[Any, str, Any]] = []
    for name, (real_async, real_sync) in _ORIGINAL.items():
        lib = _lib(name)
        assert lib is not None

        def make_async(lib: ModuleType = lib, real: Any = real_async) -> Any:
            async def handle_async_request(self: Any, request: Any) -> Any:
                return await handle_async(lib, cassette, request, lambda r: real(self, r))

            return handle_async_request

        def make_sync(lib: ModuleType = lib, real: Any = real_sync) -> Any:
            def handle_request(self: Any, request: Any) -> Any:
                return handle_sync(lib, cassette, request, lambda r: real(self, r))

            return handle_request

        out.append((lib.AsyncHTTPTransport, "handle_async_request", make_async()))
        out.append((lib.HTTPTransport, "handle_request", make_sync()))
    return tuple(out)


@contextlib.contextmanager
def patched(cassette: Cassette) -> Iterator[Cassette]:
    """vcrpy's ``use_cassette`` with this cassette's configuration, its own httpx/httpx2
    stubs skipped and ours patched in their place (through ``custom_patches``, vcrpy's
    extension point); other libraries (requests, urllib3, boto3, aiohttp) keep vcrpy's
    stubs, on the same cassette."""
    cassette._check_exists()
    config = {
        **cassette.vcr_config(),
        "custom_patches": _patches(cassette),
        "skip_patchers": ("httpx", "httpx2"),
    }
    with VcrCassette.use(**config) as vcr_cassette:
        cassette._adopt(vcr_cassette)
        try:
            yield cassette
        finally:
            cassette.name_scrubbed_env()  # vcrpy saves as the block ends
