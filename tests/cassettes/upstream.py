"""A hostile upstream on loopback: a real HTTP server that answers every POST with the
status, headers and body chunks a test gives it (each chunk flushed on its own, so a
client sees the network boundaries), for recording what no real service would send."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from unittest import mock

from openprogram_sim.cassettes import Cassette


@dataclass
class Answer:
    """What the upstream sends: ``chunks`` are written one by one (``Content-Length`` is
    their total unless ``headers`` names one)."""

    chunks: list[bytes]
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "text/event-stream"})
    status: int = 200


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        answer = self.server.answer  # type: ignore[attr-defined]
        self.send_response(answer.status)
        headers = {k.lower(): v for k, v in answer.headers.items()}
        headers.setdefault("content-length", str(sum(map(len, answer.chunks))))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        for chunk in answer.chunks:
            self.wfile.write(chunk)
            self.wfile.flush()

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def upstream(answer: Answer) -> Iterator[str]:
    """Serve ``answer`` on 127.0.0.1; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.answer = answer  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def record_raw(path: Path, answer: Answer, url_path: str = "/v1/chat/completions") -> bytes:
    """POST once through a recording :class:`Cassette` to an upstream serving ``answer``;
    returns what the client read (the cassette is saved, or the save raises)."""

    async def go(base: str) -> bytes:
        # CI=1 (as .ci/run sets it) turns recording off: these tests record on purpose
        with (
            mock.patch.dict(os.environ, {"CI": ""}),
            Cassette(path, record_mode="once") as cassette,
        ):
            async with cassette.client() as client:
                response = await client.post(base + url_path, json={"model": "m", "stream": True})
                return await response.aread()

    with upstream(answer) as base:
        return asyncio.run(go(base))


def sse(*datas: str) -> list[bytes]:
    """One network chunk per SSE event, each ``data: DATA``."""
    return [f"data: {d}\n\n".encode() for d in datas]
