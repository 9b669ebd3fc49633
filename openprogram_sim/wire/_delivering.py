"""The wire server's ASGI plumbing for one response: reading a request body, sending a
whole response, and delivering a scripted one step by step in real time (:class:`Delivering`),
with deliberate cuts kept out of the server's error log (:data:`QUIET_CUTS`)."""

from __future__ import annotations

import asyncio
import logging

from starlette.types import Receive, Send

from openprogram_sim.wire._faults import Delivery, Step
from openprogram_sim.wire._plan import WireResponse
from openprogram_sim.wire._session import Session

__all__ = [
    "QUIET_CUTS",
    "BodyTooLarge",
    "ClientGone",
    "Cut",
    "Delivering",
    "QuietCuts",
    "declared_too_large",
    "read_body",
    "response_headers",
    "send_whole",
]


class Cut(Exception):
    """Raised to drop a connection mid-response on purpose (a scripted fault). The server
    closes the socket; :class:`QuietCuts` keeps it out of the server's error log."""


class QuietCuts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, Cut)


QUIET_CUTS = QuietCuts()
"""Install on the ``uvicorn.error`` logger: deliberate cuts are not server errors."""


class ClientGone(Exception):
    """The client disconnected before its request body arrived."""


class BodyTooLarge(Exception):
    """The request body is longer than the server's ``max_body`` (bytes)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


async def read_body(receive: Receive, limit: int | None = None) -> bytes:
    """The whole request body; :class:`BodyTooLarge` as soon as more than ``limit`` bytes
    arrived (or its ``content-length`` says so: nothing is read then), so an oversized body
    is never buffered whole."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        part = message.get("body", b"")
        size += len(part)
        if limit is not None and size > limit:
            raise BodyTooLarge(limit)
        parts.append(part)
        if not message.get("more_body", False):
            return b"".join(parts)


def declared_too_large(headers: list[tuple[bytes, bytes]], limit: int | None) -> bool:
    """Whether the request's ``content-length`` is already past ``limit``."""
    if limit is None:
        return False
    for name, value in headers:
        if name.lower() == b"content-length":
            return value.strip().isdigit() and int(value) > limit
    return False


def response_headers(response: WireResponse, length: int | None) -> list[tuple[bytes, bytes]]:
    headers = [(k.encode(), v.encode()) for k, v in response.headers.items()]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return headers


async def send_whole(send: Send, response: WireResponse) -> None:
    body = response.body
    start = {"type": "http.response.start", "status": response.status}
    await send({**start, "headers": response_headers(response, len(body))})
    await send({"type": "http.response.body", "body": body})


class Delivering:
    """One response on the wire: the wait before the first byte, the chunks with their
    pauses, then the end, a cut or a hold. Waits end early when the client leaves (no
    error: a client may give up) or the server stops (the connection is dropped)."""

    def __init__(
        self,
        delivery: Delivery,
        receive: Receive,
        send: Send,
        stopping: asyncio.Event,
        session: Session,
    ) -> None:
        self.d = delivery
        self.receive = receive
        self.send = send
        self.stopping = stopping
        self.session = session
        self._watch: asyncio.Future[str] | None = None

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            if self._watch is not None:
                self._watch.cancel()

    async def _run(self) -> None:
        d, response = self.d, self.d.response
        if not (d.delay or d.interval or d.hang or d.hang_first) and d.cut_after is None:
            # a reply that is ready (most are): the head, then the body and its end in one
            # send, as the steps below would send them
            body = response.body
            length = len(body) if len(response.chunks) == 1 else None  # d.whole here
            start = {"type": "http.response.start", "status": response.status}
            await self.send({**start, "headers": response_headers(response, length)})
            await self.send({"type": "http.response.body", "body": body})
            return
        steps = list(d.steps())
        for i, step in enumerate(steps):
            if isinstance(step, list):
                # A step's chunks in one write, as a server writes a reply that is ready
                # (the client reads the same bytes; with `interval`, each chunk is a step);
                # the last chunks and the body's end in one write (one send, not two).
                data = b"".join(step)
                if i + 1 < len(steps) and steps[i + 1] is Step.END:
                    await self.send({"type": "http.response.body", "body": data})
                    return
                await self._write(data)
            elif step is Step.HEAD:
                length = len(response.body) if d.whole else None
                start = {"type": "http.response.start", "status": response.status}
                await self.send({**start, "headers": response_headers(response, length)})
            elif step is Step.END:
                await self.send({"type": "http.response.body", "body": b""})
            elif step is Step.CUT:
                raise Cut
            elif step is Step.HOLD:
                await self._hold()
                return
            elif await self._pause(step):
                return

    async def _write(self, data: bytes) -> None:
        await self.send({"type": "http.response.body", "body": data, "more_body": True})

    async def _hold(self) -> None:
        if await self._pause(None) and self._watch is not None and self._watch.result() == "stop":
            raise Cut

    async def _pause(self, seconds: float | None) -> bool:
        """Wait ``seconds`` (``None``: until something happens); True when the client
        left or the server is stopping (the delivery should end)."""
        if self._watch is None:
            self._watch = asyncio.ensure_future(self._gone())
        done, _ = await asyncio.wait({self._watch}, timeout=seconds)
        if done and self._watch.result() == "client":
            self.session.disconnects += 1
        return bool(done)

    async def _gone(self) -> str:
        client = asyncio.ensure_future(self._disconnect())
        stop = asyncio.ensure_future(self.stopping.wait())
        try:
            done, _ = await asyncio.wait({client, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            client.cancel()
            stop.cancel()
        return "client" if client in done else "stop"

    async def _disconnect(self) -> None:
        while (await self.receive())["type"] != "http.disconnect":
            pass
