"""The ASGI app behind ``openprogram-sim serve``: each API's routes (Starlette's router),
one scripted turn per model call, delivered with its faults in real time.

Routes, each also under ``/s/{session}`` (a session of its own)::

    POST /v1/chat/completions                     OpenAI Chat ("stream": true: SSE)
    POST /v1/responses                            OpenAI Responses
    GET  /v1/models                               a model list (OpenAI's or Anthropic's shape)
    POST /v1/messages                             Anthropic Messages
    POST /v1beta/models/{model}:generateContent   Gemini (and :streamGenerateContent?alt=sse),
    POST /v1/models/{model}:generateContent       the same under /v1
    POST /model/{modelId}/converse                Bedrock Converse (and /converse-stream)

And for the sessions themselves::

    GET    /s/{session}                           the session's report so far (JSON)
    DELETE /s/{session}                           end the session; its report (JSON)
    GET    /s/{session}/trace                     the live session's trace (JSON)
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from starlette.routing import BaseRoute, Match, Mount, Route, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openprogram_sim.errors import WireEncodeError
from openprogram_sim.models import Turn, TurnLike, WireFault, split_turn
from openprogram_sim.wire._anthropic import ThreadRefused, ThreadStore
from openprogram_sim.wire._delivering import (
    BodyTooLarge,
    ClientGone,
    Delivering,
    declared_too_large,
    read_body,
    response_headers,
    send_whole,
)
from openprogram_sim.wire._encode import served_call_ids
from openprogram_sim.wire._errors import error_response
from openprogram_sim.wire._faults import Delivery, deliver
from openprogram_sim.wire._openai_responses import ResponsesRefused
from openprogram_sim.wire._plan import CREATED, JSON_TYPE, WireResponse, json_text
from openprogram_sim.wire._session import (
    EndedSessions,
    RequestBudget,
    RequestCheck,
    Session,
    SessionReport,
    SessionState,
)
from openprogram_sim.wire._trace import Served, ServedCall

__all__ = [
    "DEFAULT_BODY_MIN_RATE",
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_KEPT_BODIES",
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_TTL",
    "BODY_IN",
    "CLOSE",
    "FULL",
    "WHOLE",
    "Refused",
    "WireApp",
    "name_problem",
]

DEFAULT_SESSION_TTL = 600.0
"""Seconds a named session may stay idle before it ends (its report is kept)."""

DEFAULT_MAX_SESSIONS = 10_000
"""Named sessions live at once; a request that would open one more is refused."""

DEFAULT_MAX_BODY = 16 * 1024 * 1024
"""Bytes of one request body; a longer one is refused with HTTP 413 while it is read."""

DEFAULT_BODY_TIMEOUT = 30.0
"""Seconds a request body may go without a new byte; also the time a body has before it
must keep up :data:`DEFAULT_BODY_MIN_RATE`."""

DEFAULT_BODY_MIN_RATE = 1024
"""Bytes per second a request body earns beyond its first ``body_timeout`` seconds: a body
of N bytes may take ``body_timeout + N / body_min_rate`` seconds in all."""

CLOSE = "openprogram_sim.close"
"""The scope key the app sets on a request whose connection must end after its answer (the
client may still be sending): the server closes it without a reset under the answer."""

BODY_IN = "openprogram_sim.body_in"
"""The scope key the server sets on a request whose whole body had arrived when the app
was called (its first read of the body cannot wait, so it goes without a timer)."""

WHOLE = "openprogram_sim.whole"
"""The scope key the server sets to a writer of a whole answer at once, ``(scope, status,
headers, body, length) -> bool`` (``length``: add ``content-length``; ``False``: not
written, send it as ASGI messages): the bytes uvicorn's two sends give, in one step."""

FULL = "openprogram_sim.full"
"""The scope key the server sets on a request that arrived while ``max_connections``
connections were open; its value is the message of the HTTP 503 the app answers with."""

DEFAULT_KEPT_BODIES = 1000
"""Requests of the default session (which never ends) whose body is kept; later ones are
recorded without it and counted."""

_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
NAME_RULE = "1 to 128 of the characters A-Z a-z 0-9 . _ - (not '.' or '..')"
"""The session names ``/s/{name}/`` accepts."""


def name_problem(name: str | None) -> str | None:
    """Why ``name`` (percent-decoded) is not a session name; ``None``: it is one (or it is
    the default session's ``None``). The message shows the name ASCII-escaped."""
    if name is None or (_NAME.fullmatch(name) and name not in (".", "..")):
        return None
    return (
        f"openprogram-sim: {name!a} is not a session name: a session name (the NAME "
        f"of /s/NAME/ URLs, percent-decoded) is {NAME_RULE}"
    )


def shown(name: str | None) -> str:
    """``name`` as it may be printed: itself when it is a valid session name, else its
    ASCII-escaped ``repr`` (no control characters reach a log)."""
    if name is None:
        return "default"
    return name if name_problem(name) is None else ascii(name)


class Refused(Exception):
    """A request answered with an error before a session took it: its body too long
    (413) or too slow (408), or the server full (503)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        should_retry: bool | None = None,
        retry_after: int | None = None,
        close: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.should_retry = should_retry
        self.retry_after = retry_after
        self.close = close
        """End the connection after the answer (the client may still be sending)."""

    async def send(self, scope: Scope, send: Send, api: str | None) -> None:
        """Answer with :meth:`answer`; mark the connection to end after it (:data:`CLOSE`)
        when :attr:`close` says so."""
        if self.close:
            scope[CLOSE] = True
        await send_whole(send, self.answer(api))

    def answer(self, api: str | None) -> WireResponse:
        """The error in ``api``'s shape; ``None`` (a route of no API): ``{"error":
        {"message", "type"}}``."""
        if api is None:
            kind = _GENERIC_KIND.get(self.status, "error")
            body = {"error": {"message": self.message, "type": kind}}
            response = WireResponse(
                self.status, {"content-type": JSON_TYPE}, [json_text(body).encode()]
            )
            if self.retry_after is not None:
                response.headers["retry-after"] = str(self.retry_after)
        else:
            response = error_response(
                api, self.status, self.message, should_retry=self.should_retry,
                retry_after=self.retry_after,
            )  # fmt: skip
        return response


_GENERIC_KIND = {408: "timeout", 413: "too_large", 503: "unavailable"}


class BodyTimeout(Exception):
    """The request body came too slowly (see :class:`_Paced`)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Stopping(Exception):
    """The server began to stop while a request body was still coming."""


class _Paced:
    """``receive`` under a request body's time limits: each piece within ``timeout``
    seconds of the last, and the whole body of N bytes within ``timeout + N / min_rate``
    seconds of the first read (a body trickled a byte at a time is cut off too); and
    :class:`Stopping` once the server stops (``stopping`` is set; the server wakes the
    read), so a slow body does not hold the shutdown.

    One timer keeps both limits for the whole body (not one per piece): it is armed when a
    read first waits, and when it goes off it ends the read if the limit has passed, else
    it is armed again for the limit as it stands (each piece moves it later). ``first``:
    the first piece, read already (the whole body had arrived, :data:`BODY_IN`, yet it
    said more was to come). :meth:`close` once the body is read."""

    def __init__(
        self,
        receive: Receive,
        timeout: float | None,
        min_rate: int | None,
        stopping: asyncio.Event,
        *,
        first: Message | None = None,
    ) -> None:
        self.receive = receive
        self.timeout = timeout
        self.min_rate = min_rate
        self.stopping = stopping
        self.start = time.monotonic()
        self.size = 0
        self.first = first
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[Any] | None = None
        self._deadline = 0.0
        """When the read under way must have its piece (the loop's clock)."""
        self._armed = 0.0
        """The deadline the timer was set for."""
        self._whole = False
        """That deadline is the whole body's (``min_rate``), not the idle limit's."""
        self._expired = False

    def _wait(self, now: float) -> float | None:
        """Seconds the next piece may take (``None``: no limit)."""
        if self.timeout is None:
            return None
        if self.min_rate is None:
            return self.timeout
        return min(self.timeout, self.start + self.timeout + self.size / self.min_rate - now)

    def _too_slow(self, now: float) -> BodyTimeout:
        return BodyTimeout(
            f"{self.size} byte(s) in {now - self.start:.1f} s, where a body may take "
            f"{self.timeout:g} s plus 1 s per {self.min_rate} bytes (body_timeout, "
            "body_min_rate)"
        )

    async def __call__(self) -> Message:
        if self.first is not None:
            message, self.first = self.first, None  # read already, without waiting
        else:
            while True:
                now = time.monotonic()
                wait = self._wait(now)
                if wait is not None and wait <= 0:
                    raise self._too_slow(now)
                if wait is None:
                    message = await self.receive()
                    break
                timed = await self._timed(wait)
                if timed is not None:
                    message = timed
                    break
        if self.stopping.is_set() and message.get("more_body", False):
            raise Stopping  # the server woke this read to stop (GuardedH11.shutdown)
        self.size += len(message.get("body", b""))
        if not message.get("more_body", False):
            self.close()
        return message

    async def _timed(self, wait: float) -> Message | None:
        """``receive`` with the body's timer set to end it ``wait`` seconds from now;
        ``None`` when the whole body's time ran out on the loop's clock (the caller looks
        again on its own: the loop's may run behind)."""
        loop = asyncio.get_running_loop()
        task = self._task = asyncio.current_task()
        assert task is not None
        self._deadline = loop.time() + wait
        self._whole = self.timeout is not None and wait < self.timeout
        if self._timer is None:
            self._armed = self._deadline
            self._timer = loop.call_at(self._deadline, self._due)
        cancelling = task.cancelling()
        try:
            return await self.receive()
        except asyncio.CancelledError:
            if self._expired:
                self._expired = False
                if task.uncancel() <= cancelling:
                    if self._whole:  # the whole body's time ran out: the caller says so
                        return None
                    raise BodyTimeout(
                        f"no byte for {self.timeout:g} s after {self.size} byte(s) (body_timeout)"
                    ) from None
            raise
        finally:
            self._task = None

    def _due(self) -> None:
        """The timer went off: end the read under way if its limit passed, else wait on
        for the limit as it stands (a piece came meanwhile)."""
        self._timer = None
        task = self._task
        if task is None or task.done():
            return  # no read is waiting (the body came between two reads)
        if self._deadline > self._armed:  # a piece came since: wait for the new limit
            self._armed = self._deadline
            self._timer = asyncio.get_running_loop().call_at(self._deadline, self._due)
            return
        self._expired = True
        task.cancel()

    def close(self) -> None:
        """The body is read (or its read given up): stop the timer."""
        timer = self._timer
        if timer is not None:
            self._timer = None
            timer.cancel()


_CONVERSATIONS = re.compile(r"/v1/conversations(/|$)")
"""OpenAI's Conversations API (``conversation`` items kept by the provider), not served."""

_SESSION_ROUTES = (
    "GET /s/{session} (its report so far), DELETE /s/{session} (end it; its report) and "
    "GET /s/{session}/trace (a live session's trace)"
)

# A body must carry the API's list of messages (or Responses' input) to be a model call.
_REQUIRED = {
    "openai-chat": ("messages", (list,)),
    "openai-responses": ("input", (list, str)),
    "anthropic": ("messages", (list,)),
    "gemini": ("contents", (list,)),
    "bedrock": ("messages", (list,)),
}


class WireApp:
    """Serves ``turns`` (turn dicts with an optional ``wire:`` fault, :class:`Turn` objects
    or ``(turn, WireFault)`` pairs) as every API, one session per ``/s/{name}`` prefix.

    Args:
        chunk_size: characters per streamed piece.
        cycle: start the script over when it runs out (load tests) instead of answering
            with the "script exhausted" error.
        log: called with one line per model call, per failure and per session that ends.
        check: what each session's client sent is checked with it in the session's report
            (a scenario's ``expect.requests``: :func:`openprogram_sim.play.request_check`).
        session_ttl: seconds a named session may stay idle (no request under way) before
            it ends; ``None``: never. Expiry is checked as requests arrive.
        max_sessions: named sessions live at once (``None``: no cap); a request that would
            open one more is answered with HTTP 503 in its API's error shape.
        clock: the time source for idleness (seconds, monotonic).
        max_body: bytes of one request body (``None``: no cap); a longer one is answered
            with HTTP 413 in its API's error shape as soon as that many arrived.
        keep_bodies: requests of the default session whose body is kept (``None``: all).
        body_timeout: seconds a request body may go without a new byte (``None``: no
            limit); past it, or past ``body_min_rate``, HTTP 408 in the API's error shape,
            and the connection is closed.
        body_min_rate: bytes per second a body must average beyond its first
            ``body_timeout`` seconds (``None``: no rate, only the idle limit).
    """

    def __init__(
        self,
        turns: Iterable[TurnLike | tuple[TurnLike, WireFault]],
        *,
        chunk_size: int = 24,
        cycle: bool = False,
        log: Callable[[str], None] | None = None,
        check: RequestCheck | None = None,
        session_ttl: float | None = DEFAULT_SESSION_TTL,
        max_sessions: int | None = DEFAULT_MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
        max_body: int | None = DEFAULT_MAX_BODY,
        keep_bodies: int | None = DEFAULT_KEPT_BODIES,
        body_timeout: float | None = DEFAULT_BODY_TIMEOUT,
        body_min_rate: int | None = DEFAULT_BODY_MIN_RATE,
    ) -> None:
        if session_ttl is not None and not session_ttl > 0:
            raise ValueError(f"session_ttl must be > 0 seconds or None, got {session_ttl!r}")
        if max_sessions is not None and max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1 or None, got {max_sessions!r}")
        if max_body is not None and max_body < 1:
            raise ValueError(f"max_body must be >= 1 byte or None, got {max_body!r}")
        if body_timeout is not None and not body_timeout > 0:
            raise ValueError(f"body_timeout must be > 0 seconds or None, got {body_timeout!r}")
        if body_min_rate is not None and body_min_rate < 1:
            raise ValueError(f"body_min_rate must be >= 1 byte/s or None, got {body_min_rate!r}")
        self.script = [split_turn(t) for t in turns]
        self.chunk_size = chunk_size
        self.cycle = cycle
        self.log = log
        self.check = check
        self.session_ttl = session_ttl
        self.max_sessions = max_sessions
        self.clock = clock
        self.max_body = max_body
        self.keep_bodies = keep_bodies
        self.body_timeout = body_timeout
        self.body_min_rate = body_min_rate
        self.full = 0
        """Requests refused with HTTP 503 because ``max_connections`` were open."""
        self.budget = RequestBudget()
        """What the live sessions keep between them (:data:`KEPT_LIVE_REQUESTS` requests,
        :data:`KEPT_LIVE_BYTES` of bodies); a session that ends gives its share back."""
        self.ended = EndedSessions()
        """What is kept of sessions that ended (deleted or expired)."""
        self.refused = 0
        """Requests refused because ``max_sessions`` sessions were live."""
        self._sessions: dict[str | None, Session] = {}
        self._scripts: dict[str, list[tuple[Turn, WireFault]]] = {}
        """Scripts given to sessions not yet opened (:meth:`open_session`)."""
        self._threads: weakref.WeakKeyDictionary[Session, ThreadStore] = weakref.WeakKeyDictionary()
        """Each session's Anthropic message threads (:meth:`threads`)."""
        self._named = 0
        self._next_sweep = 0.0
        self._lock = threading.Lock()
        self._stopping: asyncio.Event | None = None
        self._direct: dict[tuple[str, str], ASGIApp] = {}
        """The router's routes without path parameters, by method and path."""
        routes = _routes(self)
        inner = Router(routes=routes, default=self._not_found)
        self.router = Router(
            routes=[
                *routes,
                Route("/s/{session}", _SessionRoute(self), methods=["GET", "DELETE"]),
                Route("/s/{session}/trace", _TraceRoute(self), methods=["GET"]),
                Mount("/s/{session}", app=inner),
            ],
            default=self._not_found,
        )
        self._direct = _direct_routes(self._router, routes)

    @property
    def router(self) -> Router:
        """Starlette's router over every route. The routes without path parameters
        (``/v1/chat/completions`` and the like, also under ``/s/{session}``) are found by a
        look-up of the method and path first, which gives the route the router gives; a
        router set in its place is used as it is, for every request."""
        return self._router

    @router.setter
    def router(self, router: Router) -> None:
        self._router = router
        self._direct = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        direct = self._direct
        if direct and not scope.get("root_path"):
            method, path = scope["method"], scope["path"]
            found = direct.get((method, path))
            if found is not None:
                await found(scope, receive, send)
                return
            if path.startswith("/s/"):  # /s/{session}/...: the Mount's routes
                name, sep, rest = path[3:].partition("/")
                found = direct.get((method, "/" + rest)) if name and sep else None
                if found is not None:
                    scope["path_params"] = {**scope.get("path_params", {}), "session": name}
                    await found(scope, receive, send)
                    return
        await self._router(scope, receive, send)

    # -- sessions ------------------------------------------------------------------------

    def session(self, name: str | None = None) -> Session:
        """The live session ``name`` (``None``: URLs without ``/s/{name}``), made on first
        use (a name that ended starts afresh)."""
        found = self._sessions.get(name)
        if found is not None:
            return found
        with self._lock:
            return self._make(name, self.clock())

    def threads(self, session: Session) -> ThreadStore:
        """The Anthropic message threads ``session`` holds (made on first use; they go
        with the session)."""
        with self._lock:
            found = self._threads.get(session)
            if found is None:
                found = self._threads[session] = ThreadStore()
            return found

    def open_session(
        self, name: str, turns: Iterable[TurnLike | tuple[TurnLike, WireFault]]
    ) -> None:
        """Give the session ``name`` its own script in place of the server's: used when its
        first request arrives (a fuzzer's drawn script, a test's own turns). Refused while a
        session of that name is live."""
        problem = name_problem(name)
        if problem is not None:
            raise ValueError(problem)
        script = [split_turn(t) for t in turns]
        with self._lock:
            if name in self._sessions:
                raise ValueError(
                    f"session {name!r} is live: end it (DELETE /s/{name}) before giving it "
                    "a script of its own"
                )
            self._scripts[name] = script

    def _make(self, name: str | None, now: float) -> Session:
        found = self._sessions.get(name)
        if found is None:
            keep = self.keep_bodies if name is None else None
            script = self.script if name is None else self._scripts.pop(name, self.script)
            found = Session(
                name, script, cycle=self.cycle, now=now, keep_bodies=keep, budget=self.budget
            )
            self._sessions[name] = found
            self._named += name is not None
        return found

    def enter(self, name: str | None) -> Session | None:
        """The session a request joins, made on first use, and counted busy until
        :meth:`leave`; ``None`` (refused) when it would be one more than
        ``max_sessions``."""
        now = self.clock()
        if now >= self._next_sweep:  # (sweep_due)
            self.sweep(now)
        session = self._sessions.get(name)
        if session is not None:
            # A live session is joined without the lock: counted busy first, then checked
            # still live. A sweep on another thread checks again after it took a session out
            # (see sweep), so one of the two sees the other: never a request in a session
            # that expired.
            session.active += 1
            session.last_active = now
            if self._sessions.get(name) is session:
                return session
            session.active -= 1
        with self._lock:
            session = self._sessions.get(name)
            if session is None:
                cap = self.max_sessions
                if name is not None and cap is not None and self._named >= cap:
                    self.refused += 1
                    return None
                session = self._make(name, now)
            session.active += 1
            session.last_active = now
            return session

    def leave(self, session: Session) -> None:
        # Only the server's loop writes these; the time first, so a sweep from another
        # thread never sees the session idle with the time it last started a request.
        session.last_active = self.clock()
        session.active -= 1

    def end_session(self, name: str) -> SessionReport | None:
        """End the live session ``name`` and return its report (kept for the final one);
        ``None`` when no such session is live."""
        with self._lock:
            session = self._sessions.pop(name, None)
            self._named -= session is not None
        return None if session is None else self._ended(session, "ended")

    def sweep_due(self, now: float) -> None:
        """:meth:`sweep`, if the last one was long enough ago (a quarter of the TTL, at
        most a second): a session expires within that much of its TTL."""
        if now >= self._next_sweep:
            self.sweep(now)

    def sweep(self, now: float | None = None) -> None:
        """End every named session idle longer than ``session_ttl`` (its report kept)."""
        ttl = self.session_ttl
        if ttl is None:
            self._next_sweep = float("inf")
            return
        now = self.clock() if now is None else now
        with self._lock:
            self._next_sweep = now + min(ttl / 4, 1.0)
            idle = [
                s for name, s in self._sessions.items()
                if name is not None and not s.active and now - s.last_active > ttl
            ]  # fmt: skip
            for s in idle:
                del self._sessions[s.name]
            # enter() joins a live session without the lock: one it joined after the check
            # above, out now, is put back (it counts, then checks the session is live)
            for s in idle:
                if s.active or now - s.last_active <= ttl:
                    self._sessions[s.name] = s
            idle = [s for s in idle if self._sessions.get(s.name) is not s]
            self._named -= len(idle)
        for s in idle:
            self._ended(s, "expired")

    def _ended(self, session: Session, state: SessionState) -> SessionReport:
        report = session.report(self.check, state)
        session.release()
        self.ended.add(report)
        if self.log is not None:
            verdict = "PASS" if report.passed else f"FAIL {len(report.failures)} problem(s)"
            where = shown(session.name)
            self.log(f"[{where}] {state}: {report.model_calls} model call(s), {verdict}")
            if not report.passed:
                self.log(report.render())
        return report

    def report(self, name: str) -> SessionReport | None:
        """Session ``name``'s report: live (so far), else the one kept since it ended."""
        session = self._sessions.get(name)
        if session is not None:
            return session.report(self.check)
        return self.ended.get(name)

    @property
    def sessions(self) -> dict[str | None, Session]:
        """The live sessions."""
        with self._lock:
            return dict(self._sessions)

    # -- requests that fail before a session takes them ------------------------------------

    async def read(
        self, scope: Scope, receive: Receive, name: str | None, first: Message | None = None
    ) -> bytes:
        """The request body of session ``name``'s request, or :class:`Refused` (the
        failure charged to the session): HTTP 503 when the server marked the request
        :data:`FULL` (nothing is read), 413 past ``max_body`` bytes (nothing is read when
        ``content-length`` says so and the body is still to come), 408 when it comes
        slower than ``body_timeout`` and ``body_min_rate`` allow, 503 when the server stops
        while it comes (not charged). :class:`ClientGone` when the client left. ``first``:
        the request's first message, when the caller received it already (see
        :meth:`body_in`)."""
        full = scope.get(FULL)
        if full is not None:
            self.full += 1
            if self.full == 1 and self.log is not None:
                self.log(f"error: {full} (further refusals are counted in the report)")
            raise Refused(503, full, should_retry=True, retry_after=1, close=True)
        paced: _Paced | None = None
        limit = self.max_body
        try:
            if first is None and scope.get(BODY_IN):  # the body came whole
                first = await receive()
                body = self.body_in(first)
                if body is not None:
                    return body
            if first is None and declared_too_large(scope["headers"], limit):
                raise BodyTooLarge(limit or 0)
            paced = _Paced(
                receive, self.body_timeout, self.body_min_rate, self.stopping(), first=first
            )
            return await read_body(paced, limit)
        except BodyTooLarge as exc:
            message = self.too_large(exc.limit)
            self.charge(name, message)
            raise Refused(413, message, should_retry=False) from None
        except Stopping:
            message = "openprogram-sim: the server is stopping; the request was not answered"
            raise Refused(503, message, should_retry=False, close=True) from None
        except BodyTimeout as exc:
            message = (
                f"openprogram-sim: the request body came too slowly: {exc.why}; send the "
                "body at once, or raise the limits (serve(body_timeout=..., "
                "body_min_rate=...), openprogram-sim serve --body-timeout SECONDS "
                "--body-min-rate N)"
            )
            self.charge(name, message)
            raise Refused(408, message, close=True) from None
        finally:
            if paced is not None:
                paced.close()

    def body_in(self, first: Message) -> bytes | None:
        """The body of a request whose first message ``first`` holds all of it, within
        ``max_body``; ``None``: anything else (:meth:`read` says what, given ``first``)."""
        if first["type"] == "http.request" and not first.get("more_body", False):
            body: bytes = first.get("body", b"")
            limit = self.max_body
            if limit is None or len(body) <= limit:
                return body
        return None

    def too_large(self, limit: int) -> str:
        return (
            f"openprogram-sim: the request body is longer than {limit} bytes (the server's "
            "max_body); send a smaller one, or raise the cap (serve(max_body=...), "
            "openprogram-sim serve --max-body-bytes N)"
        )

    def charge(self, name: str | None, message: str) -> None:
        """Count a request that failed before it was recorded in a verdict: session
        ``name``'s when that is a valid name (opened if need be, unless the session cap
        refuses it, which counts by itself), else the default session's; and log it."""
        if self.log is not None:
            self.log(f"error: {message}")
        session = self.enter(name if name_problem(name) is None else None)
        if session is None:
            return
        try:
            session.fail(message)
        finally:
            self.leave(session)

    # -- stopping (called on the server's loop) --------------------------------------------

    def stopping(self) -> asyncio.Event:
        if self._stopping is None:
            self._stopping = asyncio.Event()
        return self._stopping

    def stop(self) -> None:
        """End every held connection (``hang``, waits): the server is shutting down."""
        self.stopping().set()

    # -- fallbacks -------------------------------------------------------------------------

    async def _not_found(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = scope.get("path_params", {}).get("session")
        try:
            await self.read(scope, receive, name)
        except ClientGone:
            return
        except Refused as exc:
            await exc.send(scope, send, None)
            return
        path = scope.get("path", "")
        if _CONVERSATIONS.search(path):
            message = (
                f"openprogram-sim: {scope.get('method')} {path!a} is OpenAI's Conversations "
                "API, which this server does not serve: a session keeps the Responses it "
                "served instead. Chain requests with previous_response_id, or send the whole "
                "input (openai-agents: auto_previous_response_id=True, or a session kept on "
                "your side such as SQLiteSession in place of OpenAIConversationsSession)"
            )
            self.charge(name, message)
            body = {"error": {"message": message, "type": "invalid_request_error",
                              "param": None, "code": "unsupported_api"}}  # fmt: skip
            await _send_json(send, 404, body)
            return
        message = (
            f"openprogram-sim: {scope.get('method')} {path!a} is not an API route this server "
            "serves: /v1/chat/completions, /v1/responses, /v1/models, /v1/messages, "
            "/v1beta/models/{model}:generateContent (and :streamGenerateContent, also under "
            "/v1), /model/{modelId}/converse (and /converse-stream), each also under "
            f"/s/{{session}}; and {_SESSION_ROUTES}"
        )
        self.charge(name, message)
        await _send_json(send, 404, {"error": {"message": message, "type": "not_found"}})


class _NamedRoute(ABC):
    """A route under ``/s/{session}`` itself (not a model call): the name checked (400 when
    it is not one a session can have), the body read (a refusal answered), then
    :meth:`answer`."""

    def __init__(self, app: WireApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self.app
        name = scope["path_params"]["session"]
        problem = name_problem(name)
        if problem is not None:
            app.charge(None, problem)
            await _send_json(send, 400, {"error": {"message": problem, "type": "invalid_name"}})
            return
        try:
            await app.read(scope, receive, name)
        except ClientGone:
            return
        except Refused as exc:
            await exc.send(scope, send, None)
            return
        await self.answer(scope, send, name)

    @abstractmethod
    async def answer(self, scope: Scope, send: Send, name: str) -> None:
        """Answer the request for session ``name``, whose name and body are good."""


class _SessionRoute(_NamedRoute):
    """``GET /s/{session}``: the session's report so far (or, once it ended, the one kept);
    ``DELETE /s/{session}``: end the session and answer with its report. An unknown (or no
    longer live, for DELETE) session is a 404 saying so."""

    async def answer(self, scope: Scope, send: Send, name: str) -> None:
        app = self.app
        app.sweep_due(app.clock())
        ending = scope["method"] == "DELETE"
        report = app.end_session(name) if ending else app.report(name)
        if report is not None:
            await _send_json(send, 200, report.to_json())
            return
        kept = app.ended.get(name)
        if kept is None:
            why = "none is open under that name"
        elif kept.state == "expired":
            why = f"it expired after {app.session_ttl:g} s idle; GET /s/{name} gives its report"
        else:
            why = f"it has already ended; GET /s/{name} gives its report"
        message = (
            f"openprogram-sim: no live session {name!r}: {why}. A session starts with its "
            f"first model call under /s/{name}/; {_SESSION_ROUTES}."
        )
        await _send_json(send, 404, {"error": {"message": message, "type": "not_found"}})


class _TraceRoute(_NamedRoute):
    """``GET /s/{session}/trace``: the live session's trace, ``{"session", "trace"}`` (the
    events of :meth:`Session.trace`); a session that is not live is a 404 saying so (an
    ended one keeps its report, not its trace)."""

    async def answer(self, scope: Scope, send: Send, name: str) -> None:
        session = self.app.sessions.get(name)
        if session is not None:
            await _send_json(send, 200, {"session": name, "trace": session.trace().trace})
            return
        message = (
            f"openprogram-sim: no live session {name!r}: a session's trace is kept while it "
            f"is live (GET /s/{name}/trace before DELETE /s/{name}); GET /s/{name} gives "
            "the report of one that ended"
        )
        await _send_json(send, 404, {"error": {"message": message, "type": "not_found"}})


async def _send_json(send: Send, status: int, body: Any) -> None:
    response = WireResponse(status, {"content-type": JSON_TYPE}, [json_text(body).encode()])
    await send_whole(send, response)


def _routes(app: WireApp) -> list[BaseRoute]:
    def call(api: str, stream: bool | None = None) -> _ModelCall:
        return _ModelCall(app, api, stream)

    gemini = []
    for version in ("v1beta", "v1"):
        base = f"/{version}/models/{{model}}"
        gemini.append(Route(f"{base}:generateContent", call("gemini", False), methods=["POST"]))
        gemini.append(
            Route(f"{base}:streamGenerateContent", call("gemini", True), methods=["POST"])
        )
    return [
        Route("/v1/chat/completions", call("openai-chat"), methods=["POST"]),
        Route("/v1/responses", call("openai-responses"), methods=["POST"]),
        Route("/v1/messages", call("anthropic"), methods=["POST"]),
        Route("/v1/models", _Models(app), methods=["GET"]),
        *gemini,
        Route("/model/{model}/converse", call("bedrock", False), methods=["POST"]),
        Route("/model/{model}/converse-stream", call("bedrock", True), methods=["POST"]),
    ]


class _Models:
    """``GET /v1/models``: one model, in Anthropic's list shape when the client is
    Anthropic's (it sends ``anthropic-version``), else OpenAI's."""

    def __init__(self, app: WireApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        names = {k.lower() for k, _ in scope["headers"]}
        anthropic = b"anthropic-version" in names
        try:  # a GET's body is unused, but a client trickling one must not hold the server
            await self.app.read(scope, receive, scope.get("path_params", {}).get("session"))
        except ClientGone:
            return
        except Refused as exc:
            await exc.send(scope, send, "anthropic" if anthropic else "openai")
            return
        body: Any
        model: dict[str, Any]
        if anthropic:
            model = {"type": "model", "id": "scripted", "display_name": "openprogram-sim",
                     "created_at": "2023-11-14T22:13:20Z"}  # fmt: skip
            body = {"data": [model], "has_more": False, "first_id": "scripted",
                    "last_id": "scripted"}  # fmt: skip
        else:
            model = {"id": "scripted", "object": "model", "created": CREATED,
                     "owned_by": "openprogram-sim"}  # fmt: skip
            body = {"object": "list", "data": [model]}
        response = WireResponse(200, {"content-type": JSON_TYPE}, [json_text(body).encode()])
        await send_whole(send, response)


class _ModelCall:
    """One API's model-call route: read the body, take the session's next turn, deliver."""

    def __init__(self, app: WireApp, api: str, stream: bool | None) -> None:
        self.app = app
        self.api = api
        self.stream = stream  # None: the body's "stream" says
        self._expands = api in ("openai-responses", "anthropic")
        """The server keeps conversations on this API (:meth:`_whole`)."""
        self._required = _REQUIRED[api]
        """The body's key a model call must have, and its types."""
        self._ready: dict[tuple[int, int, bool, str], Any] = {}
        """Each turn's answer ready to send (see :class:`_Ready`), by turn, fault, stream
        and model, from its second use (``None``: the turn's answer is delivered step by
        step, or cannot be kept ready); at most :data:`_KEPT_READY`, the oldest dropped
        first."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        params = scope.get("path_params", _NO_PARAMS)
        name = params.get("session")
        app = self.app
        if name is not None and name_problem(name) is not None:
            await self._bad_name(name, send)
            return
        raw: bytes | None = None
        first: Message | None = None
        if scope.get(BODY_IN) and FULL not in scope:  # the usual call: its body came whole
            first = await receive()
            raw = app.body_in(first)
        if raw is None:
            try:
                raw = await app.read(scope, receive, name, first)
            except ClientGone:
                return
            except Refused as exc:
                await exc.send(scope, send, self.api)
                return
        session = app.enter(name)
        if session is None:
            await send_whole(send, self._refusal(params["session"]))
            return
        served: Served | None = None
        try:
            answer: Delivery | _Answer
            try:
                answer, served = self._answer(scope, raw, session, params)
            except Exception as exc:
                why = f"{type(exc).__name__}: {exc}"
                message = f"openprogram-sim: the request could not be answered: {why}"
                answer = self._fail(session, 500, message)
            if isinstance(answer, Delivery):
                await Delivering(answer, receive, send, app.stopping(), session).run()
            else:  # ready: the head, then the body and its end in one send
                status, head, body, length = answer
                whole = scope.get(WHOLE)
                if whole is None or not whole(scope, status, head, body, length):
                    if length:
                        head = [*head, (b"content-length", str(len(body)).encode())]
                    start = {"type": "http.response.start", "status": status, "headers": head}
                    await send(start)
                    await send({"type": "http.response.body", "body": body})
        finally:
            if served is not None:
                served.ended = time.monotonic()
            app.leave(session)

    async def _bad_name(self, name: str, send: Send) -> None:
        """Answer a call under ``/s/{name}`` whose name no session can have: 400."""
        problem = name_problem(name) or ""
        self.app.charge(None, problem)
        await send_whole(send, error_response(self.api, 400, problem, should_retry=False))

    def _refusal(self, name: str) -> WireResponse:
        message = (
            f"openprogram-sim: session {name!r} cannot start: {self.app.max_sessions} "
            "sessions are live (the server's max_sessions). End finished sessions with "
            "DELETE /s/{session}, shorten the session TTL, or raise max_sessions "
            "(--max-sessions)."
        )
        if self.app.log is not None:
            self.app.log(f"error: {message}")
        return error_response(self.api, 503, message, should_retry=False)

    def _answer(
        self, scope: Scope, raw: bytes, session: Session, params: dict[str, Any]
    ) -> tuple[Delivery | _Answer, Served | None]:
        """The answer to one model call (a delivery, or a ready answer's status, head and
        body), and what it serves (``None``: a malformed request, which is no model
        call)."""
        api = self.api
        body = _parse(raw)
        stream = self.stream
        if stream is None:
            stream = isinstance(body, dict) and body.get("stream") is True
        key, kinds = self._required
        whole = body
        if not self._expands and type(body) is dict and isinstance(body.get(key), kinds):
            # a plain, well-formed model call: one hold of the lock
            index, taken = session.arrive_call(api, stream, scope, raw)
        else:
            index = session.arrive(api, stream, scope, raw, body is not None)
            whole, refused = self._expanded(session, index, body)
            if refused is not None:
                return refused, None
            taken = session.take(index)
        if taken is None:
            message = (
                f"openprogram-sim: the script is exhausted: request #{index} ({api}) "
                f"has no scripted turn; the script has {len(self.app.script)}. Add a turn to "
                "the scenario's model:, or check why the client called again."
            )
            failed = Served(status=400, stop_reason="error", error=message)
            session.served_with(index, failed)
            return self._fail(session, 400, message), failed
        number, turn, fault = taken
        if self.app.log is not None:
            where = "" if session.name is None else f"[{shown(session.name)}] "
            mode = "stream" if stream else "json"
            self.app.log(f"{where}#{index} {api} ({mode}) <- turn {number}/{len(self.app.script)}")
        model = params.get("model") or body.get("model") or "scripted"  # (body: a dict)
        if type(model) is not str:
            model = str(model)
        ready = self._ready_for(turn, fault, stream, model)
        if ready is None:
            return self._delivered(session, index, whole, taken, stream, model)
        answer = ready.ready(index)
        if not self._expands and not session.kept(index):
            return answer, None  # past the server's budget: counted only, not kept
        served = ready.served(api, turn, index)
        self._note(session, index, whole, served)
        return answer, served

    def _delivered(
        self,
        session: Session,
        index: int,
        whole: Any,
        taken: tuple[int, Turn, WireFault],
        stream: bool,
        model: str,
    ) -> tuple[Delivery, Served]:
        """The answer to request ``index`` delivered step by step (a turn with no ready
        answer: served once so far, or with pauses, a cut, a hold), and what it serves."""
        api = self.api
        number, turn, fault = taken
        try:
            answer = deliver(
                api, turn, fault, stream=stream, model=model, seq=index,
                chunk_size=self.app.chunk_size,
            )  # fmt: skip
        except (WireEncodeError, ValueError) as exc:
            message = f"openprogram-sim: turn {number} cannot be served on {api}: {exc}"
            failed = Served(status=500, stop_reason="error", error=message)
            session.served_with(index, failed)
            return self._fail(session, 500, message), failed
        served = _served(api, turn, answer, index)
        self._note(session, index, whole, served)
        return answer, served

    def _note(self, session: Session, index: int, whole: Any, served: Served) -> None:
        """Note what request ``index`` (its body as the whole conversation) was served: in
        its session, and in the conversations the server keeps (Responses, threads)."""
        if not self._expands:
            pass
        elif self.api == "openai-responses":
            session.responses.keep(index, whole, served)
        elif whole.get("thread") is not None:  # anthropic
            self.app.threads(session).keep(index, whole, served)
        session.served_with(index, served)

    def _expanded(self, session: Session, index: int, body: Any) -> tuple[Any, Delivery | None]:
        """Request ``index``'s body as the whole conversation (:meth:`_whole`, noted for
        the trace), and ``None``; or the answer when it is no model call this server can
        take: malformed, or naming a conversation it does not keep."""
        problem = _malformed(self.api, body)
        if problem is not None:
            return body, self._fail(session, 400, f"request #{index} ({self.api}): {problem}")
        try:
            whole = self._whole(session, body)
        except (ResponsesRefused, ThreadRefused) as exc:
            self._fail(session, 400, f"request #{index} ({self.api}): {exc.message}")
            return body, Delivery(response=exc.answer())
        if whole is not body:
            session.whole_body(index, whole)
        return whole, None

    def _ready_for(self, turn: Turn, fault: WireFault, stream: bool, model: str) -> _Ready | None:
        """``turn``'s answer ready to send (made when it is served a second time; again
        when the turn or its fault was changed in place), or ``None``: delivered step by
        step (or served once so far)."""
        key = (id(turn), id(fault), stream, model)
        cache = self._ready
        kept = cache.get(key, _UNSEEN)
        if kept is None:
            return None
        # still the answer to turn and fault: neither changed in place since it was made (a
        # fault is frozen: only its headers, a mapping, can change in place)
        if (
            kept is not _UNSEEN and kept is not _ONCE and kept.turn is turn
            and kept.fault is fault and kept.turn_copy == turn
            and fault.headers == kept.fault_copy.headers
        ):  # fmt: skip
            return kept  # type: ignore[no-any-return]
        # made when a turn is served a second time (a fuzzer's turns are served once)
        ready = _ONCE if kept is _UNSEEN else _Ready.make(
            self.api, turn, fault, stream, model, self.app.chunk_size
        )  # fmt: skip
        cache.pop(key, None)
        cache[key] = ready
        if len(cache) > _KEPT_READY:
            del cache[next(iter(cache))]
        return None if ready is _ONCE else ready

    def _whole(self, session: Session, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` as the whole conversation, on the APIs whose server keeps one: OpenAI
        Responses' ``previous_response_id``, Anthropic's message ``thread``."""
        if self.api == "openai-responses":
            return session.responses.expand(body, session.label)
        if self.api == "anthropic" and body.get("thread") is not None:
            return self.app.threads(session).expand(body, session.label)
        return body

    def _fail(self, session: Session, status: int, message: str) -> Delivery:
        session.fail(message)
        if self.app.log is not None:
            self.app.log(f"error: {message}")
        # not a transient failure: no retries
        return Delivery(response=error_response(self.api, status, message, should_retry=False))


_Answer = tuple[int, list[tuple[bytes, bytes]], bytes, bool]
"""A ready answer: status, headers (without ``content-length``), body, and whether a
``content-length`` header goes after the headers (else the body is chunked)."""

_NO_PARAMS: dict[str, Any] = {}
_UNSEEN: Any = object()
_ONCE: Any = object()
"""A turn served once so far (its answer is made ready the second time)."""
_KEPT_READY = 256
"""Ready answers one model-call route keeps (per turn, fault, stream and model name)."""

_MARK = 9_081_726_354
"""Stands for the request's number while an answer is made ready (see :class:`_Ready`)."""
_CHECK = 37
"""A number of another length, to check a ready answer against :func:`deliver`."""


@dataclass(slots=True)
class _Ready:
    """A turn's answer sent at once (no wait, no pause, no cut, no hold: most answers),
    kept ready: the status, the headers as bytes, and the body split where the request's
    number goes (ids like ``chatcmpl-wire7``), so an answer costs a join; and what it
    serves, less the call ids. Made only when the number joined in gives, for a number of
    another length, what :func:`deliver` gives; the turn and fault are kept with a copy
    each, so one changed in place is made again."""

    turn: Turn
    turn_copy: Turn
    fault: WireFault
    fault_copy: WireFault
    status: int
    head: list[tuple[bytes, bytes]]
    """The response headers (without ``content-length``)."""
    parts: list[bytes]
    whole: bool
    """The body is one piece of known length: a ``content-length`` header (else
    chunked)."""
    text: str
    stop_reason: str
    error: str | None
    retry_after: float | None

    @classmethod
    def make(
        cls, api: str, turn: Turn, fault: WireFault, stream: bool, model: str, chunk_size: int
    ) -> _Ready | None:
        """The ready answer, or ``None`` (delivered step by step, or not the same)."""
        try:
            marked, check = (
                deliver(
                    api, turn, fault, stream=stream, model=model, seq=seq, chunk_size=chunk_size
                )
                for seq in (_MARK, _CHECK)
            )
        except (WireEncodeError, ValueError):
            return None  # said when it is served
        if not (_at_once(marked) and _at_once(check)):
            return None
        response = marked.response
        parts = response.body.split(str(_MARK).encode())
        whole = len(response.chunks) == 1
        head = response_headers(response, None)
        ready = cls(
            turn, copy.deepcopy(turn), fault, copy.deepcopy(fault), response.status, head,
            parts, whole, "", "", None, None,
        )  # fmt: skip
        served = _served(api, turn, check, _CHECK)
        ready.text, ready.stop_reason = served.text, served.stop_reason
        ready.error, ready.retry_after = served.error, served.retry_after
        if ready.answer(_CHECK) != _sent(check) or ready.served(api, turn, _CHECK) != served:
            return None
        return ready

    def answer(self, seq: int) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """The status, headers and body of answer number ``seq``."""
        status, head, body, length = self.ready(seq)
        if length:
            head = [*head, (b"content-length", str(len(body)).encode())]
        return status, head, body

    def ready(self, seq: int) -> _Answer:
        """Answer number ``seq`` as the route sends it: the status, the headers kept (the
        same list for every answer), the body, and whether ``content-length`` goes last."""
        parts = self.parts
        body = parts[0] if len(parts) == 1 else str(seq).encode().join(parts)
        return self.status, self.head, body, self.whole

    def served(self, api: str, turn: Turn, seq: int) -> Served:
        """What answer number ``seq`` serves (:func:`_served`)."""
        calls = []
        if turn.tool_calls:
            ids = served_call_ids(api, turn, seq)
            calls = [
                ServedCall(i, c.name, c.arguments)
                for i, c in zip(ids, turn.tool_calls, strict=True)
            ]
        # by position: a call by keyword costs 2.4x as much (once an answer)
        return Served(self.status, calls, self.text, self.stop_reason, self.error, self.retry_after)


def _at_once(delivery: Delivery) -> bool:
    """Whether ``delivery`` is sent at once: no wait before it, no pause, cut or hold."""
    d = delivery
    return not (d.delay or d.interval or d.hang or d.hang_first) and d.cut_after is None


def _sent(delivery: Delivery) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """What :class:`Delivering` sends of a delivery sent at once: status, headers, body."""
    response = delivery.response
    body = response.body
    length = len(body) if len(response.chunks) == 1 else None
    return response.status, response_headers(response, length), body


def _direct_routes(router: Router, routes: list[BaseRoute]) -> dict[tuple[str, str], ASGIApp]:
    """The routes of ``routes`` without path parameters by method and path, each where
    ``router`` sends that method and path (also under ``/s/{session}``, checked for one
    name), so that a look-up finds what the router would."""
    out: dict[tuple[str, str], ASGIApp] = {}
    for route in routes:
        if not isinstance(route, Route) or route.param_convertors or not route.methods:
            continue
        for method in route.methods:
            if all(
                _routed(router, method, prefix + route.path) is route for prefix in ("", "/s/x")
            ):
                out[(method, route.path)] = route.app
    return out


def _routed(router: Router | Any, method: str, path: str) -> BaseRoute | None:
    """The route ``router`` (and the routers mounted in it) hands ``method path`` to."""
    scope: dict[str, Any] = {"type": "http", "method": method, "path": path, "root_path": ""}
    while True:
        routes: list[BaseRoute] = getattr(router, "routes", [])
        for route in routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                if isinstance(route, Mount):
                    scope = {**scope, **child}
                    router = route.app
                    break
                return route
        else:
            return None


_DECODER = json.JSONDecoder()

try:  # the fast extra (see _parse)
    from orjson import loads as _orjson_loads
except ImportError:  # the default install: json alone
    _orjson_loads = None  # type: ignore[assignment]

_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
"""Every digit kept, every other byte a space (see :func:`_parse`)."""
_LONG_NUMBER = b"0" * 19


def _parse(raw: bytes) -> Any:
    """``raw`` as ``json.loads`` reads it, ``None`` when it is empty or not JSON (or
    nested too deep).

    With the ``fast`` extra, orjson reads it first (about a third of json's time for a
    small body, 0.6 of it for 90 KB): what orjson accepts it reads as json does, and what
    it refuses (NaN, a lone surrogate, a UTF-8 BOM, a number out of range, nesting past
    1,024) goes to json. A body with a run of 19 digits goes to json at once, as orjson
    makes an integer past 64 bits a float (the run is found by C: the bytes mapped to
    digits or spaces, then searched)."""
    if _orjson_loads is not None and raw and _LONG_NUMBER not in raw.translate(_DIGITS):
        try:
            return _orjson_loads(raw)
        except ValueError:  # orjson.JSONDecodeError
            pass
    return _parse_json(raw)


def _parse_json(raw: bytes) -> Any:
    """:func:`_parse` by json alone. An object's text, the usual body, is scanned without
    ``json.loads``' steps around the scan (the encoding's guess, the whitespace at either
    end), which give the same for it: it starts with ``{`` (so UTF-8, nothing before it)
    and ends with ``}``."""
    if not raw:
        return None
    try:
        if raw[0] == 0x7B and raw[-1] == 0x7D and len(raw) > 1 and raw[1]:
            text = raw.decode("utf-8", "surrogatepass")
            value, end = _DECODER.raw_decode(text)
            return value if end == len(text) else None  # json.loads: "Extra data"
        return json.loads(raw)
    except (ValueError, RecursionError):  # a body nested too deep: RecursionError
        return None


def _served(api: str, turn: Turn, delivery: Delivery, seq: int) -> Served:
    """What ``delivery`` serves of ``turn`` (the call ids as the encoder makes them)."""
    status = delivery.response.status
    cut = delivery.cut_after is not None or delivery.hang or delivery.hang_first
    failed = status >= 400 or turn.stop_reason == "error" or turn.fault == "truncate" or cut
    headers = {k.lower(): v for k, v in delivery.response.headers.items()}
    calls = []
    if turn.tool_calls:
        ids = served_call_ids(api, turn, seq)
        calls = [
            ServedCall(i, c.name, c.arguments) for i, c in zip(ids, turn.tool_calls, strict=True)
        ]
    stop = turn.stop_reason or ("toolUse" if calls else "stop")
    error = None
    if failed:
        stop = "error"
        error = turn.error or (
            f"HTTP {status}" if status >= 400 else "the answer was cut before its end"
        )
    return Served(
        status=status, calls=calls, text=turn.text or "", stop_reason=stop, error=error,
        retry_after=_retry_after(headers),
    )  # fmt: skip


def _retry_after(headers: dict[str, str]) -> float | None:
    """Seconds ``retry-after-ms`` (else ``retry-after``, in seconds) asks for."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / scale
        except ValueError:
            continue
    return None


def _malformed(api: str, body: Any) -> str | None:
    key, kinds = _REQUIRED[api]
    if not isinstance(body, dict):
        return "the request body is not a JSON object"
    if not isinstance(body.get(key), kinds):
        wanted = " or ".join("an array" if k is list else "a string" for k in kinds)
        return f"the request body's {key!r} must be {wanted}"
    return None
