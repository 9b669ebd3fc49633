"""The wire server's guard against slow clients and a full server, below the app: the
time to send a request head, the time to finish a body nobody reads, the connection cap,
and ``accept()`` failing for want of file descriptors (logged once, counted after)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import errno
import json
import logging
import socket
import sys
import time
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

try:  # the fast extra (httptools); the h11 protocol serves without it
    from uvicorn.protocols.http.httptools_impl import HEADER_RE as _HEADER_RE
    from uvicorn.protocols.http.httptools_impl import HEADER_VALUE_RE as _HEADER_VALUE_RE
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE as _STATUS_LINE
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - depends on the install
    HttpToolsProtocol = None  # type: ignore[assignment,misc]

from openprogram_sim.wire._app import BODY_IN, CLOSE, FULL, WHOLE

__all__ = [
    "Acceptor",
    "Coalescing",
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_KEEP_ALIVE",
    "DEFAULT_MAX_CONNECTIONS",
    "Guard",
    "Guarded",
    "GuardedH11",
    "GuardedHttptools",
    "Listener",
]

DEFAULT_HEADER_TIMEOUT = 10.0
"""Seconds a client has to send a request's head (request line and headers), from the
moment it connects or its previous answer ends."""

DEFAULT_MAX_CONNECTIONS = 512
"""Connections open at once (idle ones included); a request that arrives past it is
answered with HTTP 503. Below the usual file-descriptor limit of 1,024."""

DEFAULT_KEEP_ALIVE = 5
"""Seconds an idle keep-alive connection stays open after an answer (uvicorn's
``timeout_keep_alive``, fixed)."""

_ACCEPT_FAILED = "socket.accept() out of system resource"
"""asyncio's message for an accept() that failed with EMFILE, ENFILE, ENOBUFS or ENOMEM."""
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_SHED_IDLE = 1.0
"""Seconds a connection must have waited with no byte of a request to be closed when the
server runs out of descriptors (a client's request is read within a second of accept)."""
_LINGER = 2.0
"""Seconds a connection that ends after an error answer keeps reading (and dropping) what
the client still sends, so that its close does not reset the connection under the answer."""
_COUNT_EVERY = 60.0
"""Seconds between two lines counting refused accepts or slow clients let go."""

_log = logging.getLogger("openprogram_sim.wire")

if sys.platform != "win32":  # imported now: with no descriptor left, an import fails
    import resource


class _Tally:
    """Something that may happen without end (a refused accept, a slow client let go):
    the first is logged in full, the rest are counted, and the count is logged at most
    once a minute and when the server stops."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.count = 0
        self.logged = 0
        self._next = 0.0

    def add(self, say: Callable[[str], None], first: Callable[[], str]) -> None:
        self.count += 1
        if self.count == 1:
            say(first())
            self.logged, self._next = 1, time.monotonic() + _COUNT_EVERY

    def flush(self, say: Callable[[str], None], now: float, *, final: bool = False) -> None:
        if self.count > self.logged and (final or now >= self._next):
            more = self.count - self.logged
            say(f"{self.what}: {more} more since the last line ({self.count} in all)")
            self.logged, self._next = self.count, now + _COUNT_EVERY


class Guard:
    """The limits the server keeps below the app, on every connection: the time to send a
    request head, the time to finish a body the answer left unread, and the connection
    cap (marked on the request, answered by the app in its API's shape); and how refused
    accepts and slow clients are reported (a line for the first, counts after)."""

    def __init__(
        self,
        *,
        header_timeout: float | None,
        body_timeout: float | None,
        max_connections: int | None,
        log: Callable[[str], None] | None,
    ) -> None:
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.max_connections = max_connections
        self.say: Callable[[str], None] = log or _log.warning
        self.state: ServerState | None = None
        self.accepts = _Tally("error: accept() refused")
        self.slow = _Tally("warning: slow clients let go")
        self._recovered = False
        self._refused_at = 0.0
        self.heads: dict[int, Any] = {}
        """Whole answers' heads made once per header list (see :func:`_head`)."""

    def full(self, state: ServerState) -> str | None:
        """The 503's message when the request now under way is one past the cap (its own
        connection and task are counted already); ``None`` when there is room."""
        cap = self.max_connections
        if cap is None or (len(state.connections) <= cap and len(state.tasks) <= cap):
            return None
        return (
            f"openprogram-sim: the server is full: {len(state.connections)} connections are "
            f"open and it serves at most {cap} at once (max_connections); retry in a moment, "
            "close idle connections, or raise the cap (serve(max_connections=...), "
            "openprogram-sim serve --max-connections N)"
        )

    def accept_refused(self, exc: BaseException | None) -> None:
        """accept() failed for want of descriptors: count it, and close the connections
        idle for a while with no byte of a request, to make room."""
        now = self._refused_at = time.monotonic()
        self.accepts.add(self.say, lambda: self._accept_line(exc))
        if self.state is None:
            return
        for connection in list(self.state.connections):
            if isinstance(connection, Guarded) and connection.idle_for(now) >= _SHED_IDLE:
                connection.shed()

    def _accept_line(self, exc: BaseException | None) -> str:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return (
            f"error: the server cannot accept connections: {why} (the process's "
            f"file-descriptor limit{_fd_limit()} is used up). New connections wait in the "
            "listen queue and are accepted as descriptors free up (tried once a second; "
            f"connections idle for {_SHED_IDLE:g} s with no request are closed to make room): "
            "raise the limit (ulimit -n), lower --max-connections, or shorten "
            "--header-timeout. Further refusals are counted, not logged."
        )

    def accepted(self) -> None:
        """A connection was accepted: after the first refusals, say once that it recovered
        (a connection accepted in the round that failed does not count: asyncio retries a
        second later)."""
        tally = self.accepts
        if tally.count and not self._recovered and time.monotonic() - self._refused_at > 0.5:
            self._recovered = True
            self.say(
                f"the server accepts connections again (accept() was refused {tally.count} "
                "time(s)); later refusals are only counted"
            )
            tally.logged = tally.count

    def let_go(self, what: str) -> None:
        """A slow client's connection was closed: ``what`` it failed to do in time."""
        self.slow.add(
            self.say,
            lambda: f"warning: closed a connection that {what}; later ones are counted, not logged",
        )

    def tick(self, now: float, *, final: bool = False) -> None:
        self.accepts.flush(self.say, now, final=final)
        self.slow.flush(self.say, now, final=final)

    def loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The loop's exception handler: a refused accept is counted (asyncio logged a
        traceback for each, thousands a second); anything else goes to asyncio's own."""
        if context.get("message") == _ACCEPT_FAILED:
            self.accept_refused(context.get("exception"))
        else:
            loop.default_exception_handler(context)


def _fd_limit() -> str:
    """``" (N)"``: the soft file-descriptor limit (``""`` where there is none to show)."""
    if sys.platform == "win32":
        return ""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return "" if soft == resource.RLIM_INFINITY else f" ({soft})"


class Coalescing:
    """A connection's transport whose writes within one turn of the event loop go out as
    one write: an answer's head and its body (uvicorn writes each ASGI message as it comes)
    cost one system call and one TCP segment instead of two. What is held is written
    before the transport closes or half-closes, so a cut or a linger loses nothing."""

    __slots__ = (
        "_held", "_loop", "_transport", "get_extra_info", "is_closing", "pause_reading",
        "resume_reading",
    )  # fmt: skip

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        # the transport's own, read on every request (not looked up through __getattr__)
        self.get_extra_info = transport.get_extra_info
        self.is_closing = transport.is_closing
        self.pause_reading = transport.pause_reading
        self.resume_reading = transport.resume_reading

    def write(self, data: bytes) -> None:
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(data)

    def flush(self) -> None:
        held = self._held
        if held:
            self._held = []
            if not self._transport.is_closing():
                self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._held = []
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:  # the rest as the transport has it
        return getattr(self._transport, name)


if TYPE_CHECKING:
    _Protocol = H11Protocol  # what the mixin's methods see of the protocol below it
else:
    _Protocol = object


class Guarded(_Protocol):
    """One of uvicorn's HTTP/1.1 protocols under the guard's limits: a connection that has
    not sent a whole request head ``header_timeout`` seconds after it opened (or after its
    previous answer) is closed, with a 408 when part of a head came; one still sending a
    body after its answer went out (a body the app did not read) has ``body_timeout``
    seconds to finish; a request past the connection cap is marked :data:`FULL` for the
    app, and one whose whole body had come when the app was called :data:`BODY_IN`.
    (uvicorn has no head timeout: its ``timeout_keep_alive`` starts only after an
    answer.) Mixed into :class:`GuardedH11` (pure Python) and :class:`GuardedHttptools`
    (the ``fast`` extra), which say where the client's request stands."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        guard: Guard,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.guard = guard
        self.limit_concurrency = None  # the guard's cap, answered in the API's shape
        self._inner = self.app
        self.app = self._mark
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._waiting_since: float | None = None
        """When the connection started to wait for a request head (``None``: not now)."""
        self._drain_timer: asyncio.TimerHandle | None = None
        self._lingering = False
        self._whole: Callable[..., bool] | None = getattr(self, "send_whole", None)
        """Writes a whole answer at once (:data:`WHOLE`), where the protocol can."""

    if TYPE_CHECKING:  # each protocol's own (GuardedH11, GuardedHttptools)

        def _awaiting_head(self) -> bool:
            """No whole request head has come since the last answer (or since the
            connection opened): the head timer runs."""

        def _sending_body(self) -> bool:
            """The client is still sending the current request's body."""

    async def _mark(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = self.guard.full(self.server_state)
        if message is not None:
            scope[FULL] = message
        if not self._sending_body():
            # the whole body came with the head (or the client is gone): the app's first
            # read of it cannot wait (uvicorn holds it, or says the client left)
            scope[BODY_IN] = True
        whole = self._whole
        if whole is not None:
            scope[WHOLE] = whole
        await self._inner(scope, receive, send)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(Coalescing(transport, self.loop))  # type: ignore[arg-type]
        self.guard.accepted()
        self._watch()

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # the answer is out and the connection is ending: what comes is dropped
        if self._waiting_since is not None:
            self._head_bytes += len(data)
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        if self.scope is not None and self.scope.get(CLOSE):
            self.server_state.total_requests += 1  # as uvicorn counts it
            self._linger()
            return
        super().on_response_complete()
        self._watch()

    def _linger(self) -> None:
        """End the connection without losing the answer just written: close the sending
        side (the client reads the answer, then EOF), drop what the client still sends,
        and close when it does, or ``_LINGER`` seconds later. (Closing at once with bytes
        unread makes the kernel send a reset, which can discard the answer.)"""
        self._lingering = True
        self._head_timer = _cancel(self._head_timer)
        self._drain_timer = _cancel(self._drain_timer)
        self._unset_keepalive_if_required()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.flow.resume_reading()
        self.loop.call_later(_LINGER, self.transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_timer = _cancel(self._head_timer)
        self._drain_timer = _cancel(self._drain_timer)
        super().connection_lost(exc)

    def shutdown(self) -> None:
        """The server is stopping: as uvicorn does, and wake a body read under way, so the
        app sees the stop (:class:`~openprogram_sim.wire._app.Stopping`) instead of waiting
        for bytes that may never come."""
        super().shutdown()
        cycle = self.cycle
        if cycle is not None and not cycle.response_started and cycle.more_body:
            cycle.message_event.set()

    def _watch(self) -> None:
        """Arm or disarm the two timers for the state the connection is in now."""
        if self._lingering:
            return
        if self.transport.is_closing():
            self._head_timer = _cancel(self._head_timer)
            self._drain_timer = _cancel(self._drain_timer)
            return
        head_timeout = self.guard.header_timeout
        if not self._awaiting_head():
            # the head timer stays armed: when it goes off it looks at the connection then
            # (no wait under way: it ends; a later one: armed again for that one's time),
            # so a keep-alive connection does not make and cancel a timer per request
            self._waiting_since = None
        elif self._waiting_since is None:
            self._waiting_since, self._head_bytes = time.monotonic(), 0
            if head_timeout is not None and self._head_timer is None:
                self._head_timer = self.loop.call_later(head_timeout, self._head_late)
        cycle = self.cycle
        unread = cycle is not None and cycle.response_complete and self._sending_body()
        body_timeout = self.guard.body_timeout
        if not unread:
            self._drain_timer = _cancel(self._drain_timer)
        elif self._drain_timer is None and body_timeout is not None:
            self._drain_timer = self.loop.call_later(body_timeout, self._drain_late)

    def idle_for(self, now: float) -> float:
        """Seconds the connection has waited for a request with no byte of one (0: it is
        not waiting, or part of a head came)."""
        since = self._waiting_since
        if since is None or self._head_bytes or self.transport.is_closing():
            return 0.0
        return now - since

    def shed(self) -> None:
        """Close this idle connection: the server needs its descriptor."""
        self.guard.let_go("was idle with no request when the server ran out of descriptors")
        self.transport.close()

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or not self._awaiting_head():
            return
        timeout = self.guard.header_timeout
        since = self._waiting_since
        left = 0.0 if timeout is None or since is None else since + timeout - time.monotonic()
        if left > 0:  # the loop's clock runs behind (uvloop's is kept in milliseconds)
            self._head_timer = self.loop.call_later(left, self._head_late)
            return
        if self._head_bytes:
            message = (
                f"openprogram-sim: the request head (request line and headers) did not arrive "
                f"within {timeout:g} s (the server's header_timeout); send it at once, or raise "
                "the limit (serve(header_timeout=...), openprogram-sim serve --header-timeout "
                "SECONDS)"
            )
            self.transport.write(_raw_answer(408, "Request Timeout", message, "timeout"))
            what = f"sent only {self._head_bytes} byte(s) of a request head in {timeout:g} s"
            self.guard.let_go(what + " (header_timeout)")
            self._linger()
        else:
            self.guard.let_go(f"sent nothing for {timeout:g} s (header_timeout)")
            self.transport.close()

    def _drain_late(self) -> None:
        self._drain_timer = None
        if self.transport.is_closing():
            return
        timeout = self.guard.body_timeout
        self.guard.let_go(
            f"was still sending a request body {timeout:g} s after its answer (body_timeout)"
        )
        self._linger()


class GuardedH11(Guarded, H11Protocol):
    """uvicorn's h11 protocol (pure Python, the default install) under the guard."""

    def _awaiting_head(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def _sending_body(self) -> bool:
        return self.conn.their_state is h11.SEND_BODY


_IDLE, _BODY, _DONE = 0, 1, 2
"""Where a client's request stands on an httptools connection (h11's IDLE, SEND_BODY,
DONE): waiting for a whole head, sending the body, sent (until its answer ends)."""

if HttpToolsProtocol is not None:

    class _KeptAlive(HttpToolsProtocol):
        """uvicorn's httptools protocol with its keep-alive timer kept armed across a
        connection's requests: uvicorn makes one after each answer and cancels it on the
        next bytes; here the bytes only mark the connection busy, and the timer, when it
        goes off, closes the connection if it has been idle ``timeout_keep_alive``
        seconds since its last answer, else is armed again for what is left."""

        _idle_since: float | None = None
        """When the last answer ended with no byte since (the loop's clock)."""

        def _unset_keepalive_if_required(self) -> None:
            self._idle_since = None

        def on_response_complete(self) -> None:  # uvicorn's, with the timer kept
            self.server_state.total_requests += 1
            if self.transport.is_closing():
                return
            self._idle_since = None
            self.flow.resume_reading()
            if self.pipeline:
                cycle, app = self.pipeline.pop()
                self._start_asgi_task(cycle, app)
                return
            loop = self.loop
            self._idle_since = loop.time()
            if self.timeout_keep_alive_task is None:
                self.timeout_keep_alive_task = loop.call_later(
                    self.timeout_keep_alive, self._keep_alive_late
                )

        def _keep_alive_late(self) -> None:
            self.timeout_keep_alive_task = None
            since = self._idle_since
            if since is None or self.transport.is_closing():
                return  # busy (or gone): armed again after the next answer
            left = since + self.timeout_keep_alive - self.loop.time()
            if left > 0:
                self.timeout_keep_alive_task = self.loop.call_later(left, self._keep_alive_late)
                return
            self.timeout_keep_alive_handler()

        def connection_lost(self, exc: Exception | None) -> None:
            timer, self.timeout_keep_alive_task = self.timeout_keep_alive_task, None
            if timer is not None:
                timer.cancel()
            super().connection_lost(exc)

    class GuardedHttptools(Guarded, _KeptAlive):  # type: ignore[misc]
        """uvicorn's httptools protocol (the ``fast`` extra) under the guard. httptools
        keeps no request state of its own to read, so the parser's callbacks keep it."""

        _theirs = _IDLE

        def _awaiting_head(self) -> bool:
            return self._theirs == _IDLE

        def _sending_body(self) -> bool:
            return self._theirs == _BODY

        def on_headers_complete(self) -> None:
            self._theirs = _BODY
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            cycle = self.cycle
            # a body that ends after its answer: the next request's head is awaited now
            self._theirs = _IDLE if cycle is not None and cycle.response_complete else _DONE
            super().on_message_complete()

        def on_response_complete(self) -> None:
            if self._theirs == _DONE:
                self._theirs = _IDLE
            super().on_response_complete()

        # A request whose whole body came with its head is run at once, in the callback
        # that read it (see _eager): no task, no turn of the loop before the app runs. A
        # body still coming gets uvicorn's task.

        _feeding = False
        _pending: tuple[Any, Any] | None = None

        def send_whole(
            self,
            scope: dict[str, Any],
            status: int,
            headers: list[tuple[bytes, bytes]],
            body: bytes,
            length: bool,
        ) -> bool:
            """Write a whole answer (the :data:`WHOLE` writer): the bytes and the request's
            state uvicorn's two sends (the head, then the body and its end) give, in one
            write, its head made once per header list (and date, a second); ``False``
            (nothing done) where those sends have more to do than write (flow control,
            an access log, a HEAD request, headers uvicorn reads)."""
            cycle: Any = self.cycle
            if (
                cycle is None or cycle.scope is not scope or cycle.response_started
                or cycle.disconnected or cycle.flow.write_paused or cycle.access_log
                or scope["method"] == "HEAD" or status in (204, 304)
            ):  # fmt: skip
                return False
            keep_alive = cycle.keep_alive
            head = _head(self.guard.heads, status, cycle.default_headers, headers, keep_alive)
            if head is None:
                return False
            start, after_length, after_chunked = head
            if length:
                data = b"%scontent-length: %d\r\n%s%s" % (start, len(body), after_length, body)
            elif body:
                data = b"%s%s%x\r\n%s\r\n0\r\n\r\n" % (start, after_chunked, len(body), body)
            else:
                data = start + after_chunked + b"0\r\n\r\n"
            cycle.response_started = True
            cycle.waiting_for_100_continue = False
            cycle.chunked_encoding = not length
            cycle.expected_content_length = 0
            self.transport.write(data)
            cycle.response_complete = True
            cycle.message_event.set()
            if not keep_alive:
                self.transport.close()
            cycle.on_response()
            return True

        def data_received(self, data: bytes) -> None:
            self._feeding = True
            try:
                super().data_received(data)
            finally:
                self._feeding = False
                pending = self._pending
                if pending is not None:
                    self._pending = None
                    self._start(*pending)

        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            if self._feeding:  # the parser's callback: started once the data is read
                self._pending = (cycle, app)
            else:
                super()._start_asgi_task(cycle, app)

        def _start(self, cycle: Any, app: Any) -> None:
            if cycle.more_body or self.config.reset_contextvars or self.transport.is_closing():
                super()._start_asgi_task(cycle, app)
            else:
                _eager(self, cycle.run_asgi(app))

else:  # pragma: no cover - the fast extra is not installed
    GuardedHttptools = None  # type: ignore[assignment,misc]


_KEPT_HEADS = 1024
"""Heads :func:`_head` keeps (by header list); past it they are made afresh."""


def _head(
    kept: dict[int, Any],
    status: int,
    defaults: list[tuple[bytes, bytes]],
    headers: list[tuple[bytes, bytes]],
    keep_alive: bool,
) -> tuple[bytes, bytes, bytes] | None:
    """The head uvicorn's httptools protocol writes for ``status``, its default headers
    and ``headers``: what comes before the place of a ``content-length`` header (last of
    the headers), what comes after it (``connection: close`` when not kept alive, and the
    blank line), and what comes after the headers of a chunked body instead
    (``connection: close``, ``transfer-encoding: chunked``, the blank line). ``None``
    when a header is one uvicorn reads (``content-length``, ``transfer-encoding``,
    ``connection``) or one it would refuse: its own sends then say so."""
    found = kept.get(id(headers))
    if (
        found is not None and found[0] is headers and found[1] is defaults
        and found[2] == status and found[3] is keep_alive
    ):  # fmt: skip
        return found[4]  # type: ignore[no-any-return]
    content = [_STATUS_LINE[status]]
    for name, value in (*defaults, *headers):
        if _HEADER_RE.search(name) or _HEADER_VALUE_RE.search(value):
            return None
        name = name.lower()
        if name in (b"content-length", b"transfer-encoding", b"connection"):
            return None
        content += [name, b": ", value, b"\r\n"]
    close = b"" if keep_alive else b"connection: close\r\n"
    split = (b"".join(content), close + b"\r\n", close + b"transfer-encoding: chunked\r\n\r\n")
    if len(kept) >= _KEPT_HEADS:
        kept.clear()
    kept[id(headers)] = (headers, defaults, status, keep_alive, split)
    return split


_RUNNING = object()
"""Stands in the server's tasks for a request run at once while it runs (the connection
cap counts the request under way, as it counts its task)."""


def _eager(protocol: Any, coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` (a request's ASGI cycle) now, in a context of its own as a task's, up
    to its first wait: an answer ready at once is made with no task and no turn of the
    loop before it (its write goes out with the other connections' at the loop's next
    turn, :class:`Coalescing`: at 10 and 50 clients, writing each at once cost more CPU
    a reply than it saved); one that waits (a delivery with pauses, a client gone) goes
    on in a task from where it stopped (:class:`_Resume`), counted in the server's tasks
    as uvicorn's own."""
    tasks = protocol.tasks
    context = contextvars.copy_context()
    tasks.add(_RUNNING)
    try:
        try:
            waiting = context.run(coro.send, None)
        except StopIteration:
            return
        except Exception as exc:  # what a task would have kept for the loop's handler
            protocol.loop.call_exception_handler(
                {"message": "Exception in a request run at once", "exception": exc}
            )
            return
        task = protocol.loop.create_task(_resumed(coro, waiting), context=context)
        task.add_done_callback(tasks.discard)
        tasks.add(task)
    finally:
        tasks.discard(_RUNNING)


async def _resumed(coro: Coroutine[Any, Any, None], waiting: Any) -> None:
    await _Resume(coro, waiting)


class _Resume:
    """Awaiting this goes on with ``coro``, a coroutine that was run outside any task and
    stopped at ``waiting`` (what it yielded: the future it waits for, or ``None`` for a
    bare turn of the loop): the task that awaits it waits for that, then sends into (or
    throws into, when cancelled) ``coro`` as if it had run it from the start."""

    __slots__ = ("coro", "waiting")

    def __init__(self, coro: Coroutine[Any, Any, None], waiting: Any) -> None:
        self.coro = coro
        self.waiting = waiting

    def __await__(self) -> Generator[Any, None, None]:
        coro, waiting = self.coro, self.waiting
        while True:
            try:
                yield waiting
            except BaseException as exc:  # the task was cancelled: so is coro's wait
                try:
                    waiting = coro.throw(exc)
                except StopIteration:
                    return
                continue
            try:
                waiting = coro.send(None)
            except StopIteration:
                return


def _cancel(timer: asyncio.TimerHandle | None) -> asyncio.TimerHandle | None:
    """Cancel ``timer`` (if any); ``None``, for the attribute that held it."""
    if timer is not None:
        timer.cancel()
    return None


def _raw_answer(status: int, reason: str, message: str, kind: str) -> bytes:
    """A whole HTTP/1.1 error answer, written before h11 has a request to answer."""
    body = json.dumps({"error": {"message": message, "type": kind}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class Listener(socket.socket):
    """The listening socket. asyncio accepts up to ``backlog`` (2,048) connections each
    time the socket is ready, and when accept() fails for want of descriptors it logs the
    failure, retries in a second, and still tries the rest of that round: 2,048 failures
    (and tracebacks) a second. After one such failure this socket answers the rest of the
    round as an empty queue."""

    _refusing = False

    def accept(self) -> tuple[socket.socket, Any]:
        if self._refusing:
            raise BlockingIOError(errno.EAGAIN, "the last accept() ran out of resources")
        try:
            return super().accept()
        except OSError as exc:
            if exc.errno in _OUT_OF_RESOURCES:
                self._refusing = True
                asyncio.get_running_loop().call_soon(self._clear)
            raise

    def _clear(self) -> None:
        self._refusing = False


class Acceptor:
    """Accepts the listening socket's connections in Python, as asyncio's own loop does,
    for loops that accept in C (uvloop): there, when accept() fails for want of
    descriptors, libuv accepts each queued connection and closes it at once, so the
    clients waiting in the queue are dropped. Here a refused accept is handed to the guard
    (counted, idle connections shed) and tried again a second later, while the queue
    waits. Quacks like the ``asyncio.Server`` uvicorn keeps (``close``, ``wait_closed``)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        protocol: Callable[[], asyncio.Protocol],
        guard: Guard,
    ) -> None:
        self.loop = loop
        self.sock = sock
        self.protocol = protocol
        self.guard = guard
        self._task = loop.create_task(self._accept())

    async def _accept(self) -> None:
        loop, sock = self.loop, self.sock
        while True:
            try:
                conn, _ = await loop.sock_accept(sock)
            except (ConnectionAbortedError, InterruptedError):
                continue  # the client gave up before it was accepted, as asyncio skips it
            except OSError as exc:
                if sock.fileno() < 0:
                    return  # the listener was closed: the server is stopping
                if exc.errno in _OUT_OF_RESOURCES:
                    self.guard.accept_refused(exc)
                else:
                    self.guard.say(f"error: accept() failed: {exc}; tried again in a second")
                await asyncio.sleep(1.0)  # as asyncio waits before it tries again
                continue
            conn.setblocking(False)
            if conn.family in (socket.AF_INET, socket.AF_INET6):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                await loop.connect_accepted_socket(self.protocol, conn)
            except OSError:  # the client left before its transport was made
                conn.close()

    def close(self) -> None:
        self._task.cancel()

    async def wait_closed(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
