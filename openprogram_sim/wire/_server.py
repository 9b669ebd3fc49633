"""The wire server: a script's model turns over real HTTP on loopback (uvicorn), in a
background thread (:func:`serve`) or in the foreground (``openprogram-sim serve``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import importlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import uvicorn

from openprogram_sim.models import TurnLike, WireFault, refuse_scenario
from openprogram_sim.trace import Failure, render_failures
from openprogram_sim.wire._app import (
    DEFAULT_BODY_MIN_RATE,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_TTL,
    WireApp,
)
from openprogram_sim.wire._delivering import QUIET_CUTS
from openprogram_sim.wire._guard import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_KEEP_ALIVE,
    DEFAULT_MAX_CONNECTIONS,
    Acceptor,
    Guard,
    GuardedH11,
    GuardedHttptools,
    Listener,
)
from openprogram_sim.wire._scripted import WireRequest
from openprogram_sim.wire._session import (
    RequestCheck,
    Session,
    SessionCheck,
    SessionReport,
    TraceDetails,
)

if TYPE_CHECKING:
    from openprogram.providers import Provider

__all__ = [
    "FAST_EXTRA",
    "STACK_VARIABLE",
    "ReportWriter",
    "ServeReport",
    "Stack",
    "StackChoice",
    "WireServer",
    "pick_stack",
    "serve",
]

Stack = Literal["auto", "fast", "pure"]
"""What the server runs on: ``pure`` asyncio's loop and the h11 parser (pure Python, the
default install); ``fast`` uvloop's loop and the httptools parser (the ``fast`` extra,
``pip install 'openprogram-sim[fast]'``); ``auto`` fast when both are installed, else pure."""

FAST_EXTRA = "pip install 'openprogram-sim[fast]'"
STACK_VARIABLE = "OPENPROGRAM_SIM_STACK"
"""Set to ``pure`` or ``fast`` to choose the stack of every server started with
``stack="auto"`` (the default), ``openprogram-sim serve`` included."""


@dataclass(frozen=True, slots=True)
class StackChoice:
    """The event loop and HTTP protocol a server runs on, and how to say so."""

    loop: str
    """uvicorn's ``loop`` setting (``asyncio``, ``uvloop``)."""
    protocol: type
    """The guarded protocol class (:class:`GuardedH11`, :class:`GuardedHttptools`)."""
    plain: type
    """uvicorn's own protocol for the same parser (what a plain uvicorn app runs)."""
    label: str
    """e.g. ``uvloop + httptools`` or ``asyncio + h11 (pure Python; ...)``."""


def _fast_missing() -> str | None:
    """Why the fast stack cannot run here (``None``: it can)."""
    missing = []
    for name in ("uvloop", "httptools"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if GuardedHttptools is None and "httptools" not in missing:
        missing.append("httptools")
    return ", ".join(missing) or None


def pick_stack(stack: Stack = "auto") -> StackChoice:
    """The loop and protocol for ``stack`` (see :data:`Stack`); ``auto`` takes
    ``$OPENPROGRAM_SIM_STACK`` (``pure``, ``fast``) when it is set."""
    if stack not in ("auto", "fast", "pure"):
        raise ValueError(f"stack must be 'auto', 'fast' or 'pure', got {stack!r}")
    if stack == "auto":
        chosen = os.environ.get(STACK_VARIABLE, "").strip() or "auto"
        if chosen not in ("auto", "fast", "pure"):
            raise ValueError(
                f"{STACK_VARIABLE}={chosen!r} is not a stack: use 'pure' (asyncio + h11), "
                "'fast' (uvloop + httptools) or 'auto', or unset it"
            )
        stack = chosen  # type: ignore[assignment]
    missing = _fast_missing()
    if stack == "fast" and missing is not None:
        raise ValueError(
            f"stack='fast' needs uvloop and httptools ({missing} not installed): {FAST_EXTRA}"
        )
    if stack == "pure" or missing is not None:
        from uvicorn.protocols.http.h11_impl import H11Protocol

        hint = "" if stack == "pure" else f"; {FAST_EXTRA} for uvloop + httptools"
        return StackChoice("asyncio", GuardedH11, H11Protocol, f"asyncio + h11 (pure Python{hint})")
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    return StackChoice("uvloop", GuardedHttptools, HttpToolsProtocol, "uvloop + httptools")


_SDK_PATH = {
    "openai": "/v1",
    "openai-chat": "/v1",
    "openai-responses": "/v1",
    "anthropic": "",
    "gemini": "",
    "bedrock": "",
}
"""What each API's official SDK takes as its base URL, after the server's root."""

_VERSIONED_PATH = {**_SDK_PATH, "anthropic": "/v1", "gemini": "/v1beta"}
"""The SDK's base URL with the API's version path, which openprogram's adapters also take."""

_ADAPTER_MODEL = {
    "openai": "gpt-4o-mini",
    "openai-chat": "gpt-4o-mini",
    "openai-responses": "gpt-5-mini",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "bedrock": "us.amazon.nova-micro-v1:0",
}


class _Uvicorn(uvicorn.Server):
    """uvicorn, told to end held connections first when it shuts down, and woken at once
    when asked to stop (uvicorn looks every 0.1 s: a test that starts and stops a server
    paid that, and the shutdown's own 0.1 s wait, each time)."""

    def __init__(self, config: uvicorn.Config, app: WireApp, guard: Guard) -> None:
        super().__init__(config)
        self.wire_app = app
        self.guard = guard
        guard.state = self.server_state
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):  # uvicorn's own tick: date header, exit
            counter = (counter + 1) % 864000
            if counter % 10 == 0:
                self.guard.tick(time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)

    def wake(self) -> None:
        """Have the serving thread look at ``should_exit`` now (from any thread)."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(wake.set)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(self.guard.loop_exception)
        if sockets is None or type(loop).__module__.split(".")[0] != "uvloop":
            await super().startup(sockets)
            return
        # uvloop accepts in C and drops the queued connections when descriptors run out:
        # accept in Python instead (the guard's Acceptor), the rest as uvicorn starts
        config = self.config

        def protocol() -> asyncio.Protocol:
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=self.server_state,
                app_state=self.lifespan.state, _loop=loop,
            )  # fmt: skip

        self.servers = [Acceptor(loop, sock, protocol, self.guard) for sock in sockets]  # type: ignore[misc]
        self.started = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.wire_app.stop()
        self.guard.tick(time.monotonic(), final=True)
        if not self.server_state.connections:
            # nothing to wait for: close the listeners without uvicorn's fixed 0.1 s pause
            for server in self.servers:
                server.close()
            for sock in sockets or []:
                sock.close()
            for server in self.servers:
                await server.wait_closed()
            return
        await super().shutdown(sockets)

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        # Signals are the caller's: the CLI stops the server on Ctrl-C and still prints its
        # report (uvicorn's handlers would raise the signal again after shutting down).
        yield


@dataclass(slots=True)
class ServeReport:
    """What the server's clients did, checked against the script and the request check:
    turns left unserved, failed requests, and a scenario's ``expect.requests`` (the same
    failures ``openprogram-sim run`` prints), over the live sessions and those that ended."""

    failures: list[Failure] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    """The sessions checked, by label (ended sessions that passed as one count)."""
    model_calls: int = 0
    """Model calls over every session checked, ended ones included."""
    sessions: list[SessionReport] = field(default_factory=list)
    """Every session's report kept whole (live ones, then ended ones in the order they
    ended, at most :data:`~openprogram_sim.wire._session.KEPT_SESSIONS` of those), each
    with its compact trace: what the HTML report and the JUnit file show, one section or
    test case each."""
    sessions_dropped: int = 0
    """Ended sessions past that cap (passing ones, or failing ones past their own cap):
    counted in the verdict, without a section of their own."""
    timelines_dropped: int = 0
    """Ended sessions among :attr:`sessions` kept without their trace (the ended sessions'
    budget, :data:`~openprogram_sim.wire._session.KEPT_TIMELINES_BYTES`, was spent)."""

    @property
    def passed(self) -> bool:
        return not self.failures

    def add(self, report: SessionReport) -> None:
        """Count one session's report in."""
        self.checked.append(report.label + ("" if report.state == "live" else f" ({report.state})"))
        self.failures += report.labelled()
        self.model_calls += report.model_calls

    def render(self) -> str:
        return render_failures(self.failures)


ReportWriter = Callable[[ServeReport], object]
"""What :meth:`WireServer.check` hands its report to (``write=``): e.g.
:func:`openprogram_sim.report.session_html`, which writes the HTML report."""


class WireServer:
    """A scripted model on a real loopback port, speaking every API (see :func:`serve`).

    Each ``/s/{name}/`` URL prefix is a session with its own copy of the script; URLs
    without a prefix share the default session. A named session ends on ``DELETE
    /s/{name}`` (or :meth:`end_session`), or after ``session_ttl`` idle seconds; its report
    is kept for :meth:`check`. At most ``max_sessions`` named sessions are live at once.
    Slow clients are let go (``header_timeout``, ``body_timeout``, ``body_min_rate``) and
    at most ``max_connections`` connections are served at once (see :func:`serve`).
    ``details`` is what each session's report keeps of its whole trace (see :func:`serve`);
    :meth:`check` hands its report to writers (``write=``: the HTML report, JUnit).
    ``stack`` picks the loop and HTTP parser (see :func:`serve`; :attr:`stack` says which).
    """

    def __init__(
        self,
        turns: Iterable[TurnLike | tuple[TurnLike, WireFault]],
        *,
        check: RequestCheck | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        chunk_size: int = 24,
        cycle: bool = False,
        log: Callable[[str], None] | None = None,
        session_ttl: float | None = DEFAULT_SESSION_TTL,
        max_sessions: int | None = DEFAULT_MAX_SESSIONS,
        max_body: int | None = DEFAULT_MAX_BODY,
        header_timeout: float | None = DEFAULT_HEADER_TIMEOUT,
        body_timeout: float | None = DEFAULT_BODY_TIMEOUT,
        body_min_rate: int | None = DEFAULT_BODY_MIN_RATE,
        max_connections: int | None = DEFAULT_MAX_CONNECTIONS,
        details: TraceDetails | None = None,
        stack: Stack = "auto",
    ) -> None:
        refuse_scenario(turns, "WireServer()")
        choice = pick_stack(stack)
        if details is not None:
            check = _with_details(check, details)
        if header_timeout is not None and not header_timeout > 0:
            raise ValueError(f"header_timeout must be > 0 seconds or None, got {header_timeout!r}")
        if max_connections is not None and max_connections < 1:
            raise ValueError(f"max_connections must be >= 1 or None, got {max_connections!r}")
        self.app = WireApp(
            turns, chunk_size=chunk_size, cycle=cycle, log=log, check=check,
            session_ttl=session_ttl, max_sessions=max_sessions, max_body=max_body,
            body_timeout=body_timeout, body_min_rate=body_min_rate,
        )  # fmt: skip
        self.guard = Guard(
            header_timeout=header_timeout, body_timeout=body_timeout,
            max_connections=max_connections, log=log,
        )  # fmt: skip
        self.host = host
        self._socket = _bind(host, port)
        self.port: int = self._socket.getsockname()[1]
        self.stack: str = choice.label
        """What the server runs on, e.g. ``uvloop + httptools`` (see :data:`Stack`)."""
        config = uvicorn.Config(
            self.app,
            # uvicorn's own protocol with the slow-client limits it lacks; its
            # limit_concurrency answers in plain text, so the guard keeps the cap instead
            http=functools.partial(choice.protocol, guard=self.guard),  # type: ignore[arg-type]
            loop=choice.loop,
            # the app never reads the client's address or scheme, which uvicorn's proxy
            # headers middleware rewrites from X-Forwarded-* (a layer on every request)
            proxy_headers=False,
            lifespan="off",
            log_config=None,
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=2,
            timeout_keep_alive=DEFAULT_KEEP_ALIVE,
        )
        self._server = _Uvicorn(config, self.app, self.guard)
        self._thread: threading.Thread | None = None
        logging.getLogger("uvicorn.error").addFilter(QUIET_CUTS)

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> WireServer:
        """Serve in a background thread; returns once the port accepts connections."""
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True,
            name=f"openprogram-sim serve :{self.port}",
        )  # fmt: skip
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the wire server on port {self.port} did not start")
            self._thread.join(0.005)
        return self

    def run(self) -> None:
        """Serve in this thread until Ctrl-C (SIGINT) or SIGTERM."""
        self._server.run(sockets=[self._socket])

    def request_stop(self) -> None:
        """Ask the server to stop (safe from a signal handler); a second call forces it."""
        if self._server.should_exit:
            self._server.force_exit = True
        self._server.should_exit = True
        self._server.wake()

    def stop(self) -> None:
        """Stop serving: held connections are dropped, the port is closed."""
        self._server.should_exit = True
        self._server.wake()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._socket.close()

    def __enter__(self) -> WireServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The server's root, e.g. ``http://127.0.0.1:52817``."""
        return f"http://{self.host}:{self.port}"

    def base_url(self, api: str = "openai", session: str | None = None) -> str:
        """The base URL ``api``'s official SDK takes, and openprogram's adapter for it too:
        ``openai`` (Chat and Responses) ``…/v1``; ``anthropic``, ``gemini`` (google-genai's
        ``http_options``) and ``bedrock`` (boto3's ``endpoint_url``) the root. ``session``
        gives that session's URL (its own copy of the script)."""
        return self._root(session) + _SDK_PATH[_check_api(api)]

    def adapter_url(self, api: str, session: str | None = None) -> str:
        """:meth:`base_url` with the API's version path (Anthropic's ends in ``/v1``,
        Gemini's in ``/v1beta``, the others as :meth:`base_url`): openprogram's adapters
        take either form."""
        return self._root(session) + _VERSIONED_PATH[_check_api(api)]

    def provider(
        self, api: str, model: str | None = None, *, stream: bool = True, session: str | None = None
    ) -> Provider:
        """openprogram's real adapter for ``api``, pointed at this server (placeholder
        credentials; the server ignores them)."""
        from openprogram.providers import get_provider

        name = "openai" if api == "openai-chat" else _check_api(api)
        options: dict[str, Any] = {"base_url": self.base_url(api, session), "stream": stream}
        if name == "bedrock":
            options.update(bearer_token="openprogram-sim", region="us-east-1")
        else:
            options["api_key"] = "openprogram-sim"
        return get_provider(f"{name}:{model or _ADAPTER_MODEL[name]}", **options)

    def _root(self, session: str | None) -> str:
        return self.url if session is None else f"{self.url}/s/{session}"

    @property
    def connections(self) -> int:
        """Connections open now (idle ones included), as ``max_connections`` counts them."""
        return len(self._server.server_state.connections)

    # -- what clients did ----------------------------------------------------------------

    def session(self, name: str | None = None) -> Session:
        """The live session ``name`` (``None``: the default one)."""
        return self.app.session(name)

    def open_session(
        self, name: str, turns: Iterable[TurnLike | tuple[TurnLike, WireFault]]
    ) -> str:
        """Give session ``name`` a script of its own (played from its first request in place
        of the server's); returns its OpenAI base URL. See :meth:`WireApp.open_session`."""
        self.app.open_session(name, turns)
        return self.base_url("openai", session=name)

    def end_session(self, name: str) -> SessionReport:
        """End session ``name`` (as ``DELETE /s/{name}`` does) and return its report; it
        stays in :meth:`check`. Raises ``KeyError`` when no such session is live."""
        report = self.app.end_session(name)
        if report is None:
            raise KeyError(f"no live session {name!r}")
        return report

    @property
    def requests(self) -> list[WireRequest]:
        """Every request of the default session, credentials masked."""
        return self.app.session(None).requests

    @property
    def errors(self) -> list[str]:
        return [e for r in self._reports(None) for e in r.errors]

    def assert_consumed(self, session: str | None = None) -> None:
        """Raise ``AssertionError`` if a request failed or a turn was never served, in
        ``session`` (given), else in every session used, ended ones included (the default
        one when none was)."""
        for report in self._reports(session):
            report.assert_consumed()

    def check(
        self,
        session: str | None = None,
        *,
        write: ReportWriter | Iterable[ReportWriter] = (),
    ) -> ServeReport:
        """Unserved turns, failed requests, and the request check (a scenario's
        ``expect.requests``) against what the clients sent: in ``session`` (given; live,
        else as it ended), else in every session used, ended ones included.

        ``write``: one or more writers, each called with the report (the files ``serve
        --report`` and ``--junitxml`` write, from :mod:`openprogram_sim.report`)::

            from openprogram_sim.report import session_html, session_junit

            server.check(write=[session_html("report.html"), session_junit("junit.xml")])
        """
        report = ServeReport()
        reports = self._reports(session)
        for one in reports:
            report.add(one)
        report.sessions = reports
        if session is None:
            ended = self.app.ended
            report.sessions = [r for r in reports if r.state == "live"] + ended.reports
            report.sessions_dropped = ended.passing_dropped + ended.failing_dropped
            report.timelines_dropped = ended.timelines_dropped
            self._add_ended(report)
        writers = [write] if callable(write) or isinstance(write, str | os.PathLike) else write
        for writer in list(writers):
            if not callable(writer):
                raise TypeError(
                    f"check(write=) takes writers (callables given the report), got {writer!r}; "
                    "for a file, pass openprogram_sim.report.session_html(path) (the HTML "
                    "report) or session_junit(path) (JUnit XML)"
                )
            writer(report)
        return report

    def _add_ended(self, report: ServeReport) -> None:
        """What is kept of ended sessions beyond their failing reports: counts, and the
        requests refused for the cap."""
        ended, app = self.app.ended, self.app
        report.model_calls += ended.model_calls - sum(r.model_calls for r in ended.failing)
        if ended.passed:
            report.checked.append(f"{ended.passed} ended session(s) that passed")
        if ended.failing_dropped:
            report.failures.append(
                Failure(
                    f"{ended.failing_dropped} more session(s) ended failing; only the first "
                    f"{ended.keep} failing sessions' reports are kept",
                    "their failures were logged as they ended (run without -q to see them)",
                )
            )
        if app.full:
            report.failures.append(
                Failure(
                    f"{app.full} request(s) were refused with HTTP 503: more than "
                    f"{self.guard.max_connections} connections were open (max_connections)",
                    "close idle connections sooner, or raise max_connections (--max-connections)",
                )
            )
        if app.refused:
            report.failures.append(
                Failure(
                    f"{app.refused} request(s) were refused: {app.max_sessions} sessions were "
                    "live (max_sessions)",
                    "end sessions when done (DELETE /s/NAME), shorten the session TTL, or "
                    "raise max_sessions (--max-sessions)",
                )
            )

    def _reports(self, session: str | None) -> list[SessionReport]:
        """The reports to check: ``session``'s, else every session used (live, then the
        failing ones that ended)."""
        app = self.app
        check = app.check
        if session is not None:
            if session not in app.sessions:
                kept = app.ended.get(session)
                if kept is not None:
                    return [kept]
            return [app.session(session).report(check)]
        app.sweep()
        live = [s for s in app.sessions.values() if s.used]
        if not live and not app.ended.count:
            live = [app.session(None)]
        return [s.report(check) for s in live] + app.ended.failing


def _with_details(check: RequestCheck | None, details: TraceDetails) -> SessionCheck:
    if isinstance(check, SessionCheck):
        return dataclasses.replace(check, details=details)
    return SessionCheck(requests=check, details=details)


def _check_api(api: str) -> str:
    if api not in _SDK_PATH:
        raise ValueError(f"unknown api {api!r}; use one of: {', '.join(_SDK_PATH)}")
    return api


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named explicitly: asyncio sets TCP_NODELAY only on sockets that say so,
    # and without it every response waits out the client's delayed ACK (~40 ms).
    sock = Listener(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


@contextmanager
def serve(
    turns: Iterable[TurnLike | tuple[TurnLike, WireFault]],
    *,
    check: RequestCheck | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    chunk_size: int = 24,
    cycle: bool = False,
    session_ttl: float | None = DEFAULT_SESSION_TTL,
    max_sessions: int | None = DEFAULT_MAX_SESSIONS,
    max_body: int | None = DEFAULT_MAX_BODY,
    header_timeout: float | None = DEFAULT_HEADER_TIMEOUT,
    body_timeout: float | None = DEFAULT_BODY_TIMEOUT,
    body_min_rate: int | None = DEFAULT_BODY_MIN_RATE,
    max_connections: int | None = DEFAULT_MAX_CONNECTIONS,
    details: TraceDetails | None = None,
    stack: Stack = "auto",
) -> Iterator[WireServer]:
    """Serve a script (a list of turns, each optionally with a ``wire:`` fault) on a real
    loopback port from a background thread::

        with serve([{"tool_calls": [{"search": {"q": "tides"}}]}, "Done."]) as server:
            client = openai.OpenAI(base_url=server.base_url("openai"), api_key="x")
            ...  # your agent, against the scripted model
            server.assert_consumed()
            assert server.check().passed, server.check().render()

    A scenario file is served by :func:`openprogram_sim.play.serve_scenario`, which passes
    its :meth:`~openprogram_sim.scenario.Scenario.script` and checks its
    ``expect.requests`` (``check=``: any callable from the sessions' request fields to
    failures).

    ``port=0`` picks a free port. Turns may carry a ``wire:`` fault (see
    :class:`WireFault`). ``cycle=True`` starts the script over when it runs out.

    Each ``/s/{name}/`` URL prefix is a session with its own copy of the script.
    ``DELETE /s/{name}`` (or ``server.end_session(name)``) ends one and answers with its
    report; a session idle for ``session_ttl`` seconds ends by itself (``None``: never);
    both stay in :meth:`WireServer.check`. A request that would open more than
    ``max_sessions`` live sessions gets HTTP 503 in its API's error shape, and one whose
    body is longer than ``max_body`` bytes (default 16 MiB; ``None``: no cap) HTTP 413.
    A session name is 1 to 128 of ``A-Z a-z 0-9 . _ -`` (not ``.`` or ``..``); any other
    gets HTTP 400.

    Slow clients are let go: a connection that has not sent a whole request head
    ``header_timeout`` seconds (default 10) after it opened, or after its previous answer,
    is closed (with HTTP 408 when part of a head came); a request body that goes
    ``body_timeout`` seconds (default 30) without a byte, or that averages less than
    ``body_min_rate`` bytes a second (default 1,024) beyond its first ``body_timeout``
    seconds, gets HTTP 408 in its API's error shape. A request that arrives while more
    than ``max_connections`` connections (default 512, idle ones included) are open gets
    HTTP 503 in its API's error shape with ``retry-after: 1``. ``None`` turns a limit off.

    ``details`` is called with each session's whole trace when the session is checked, and
    what it returns is kept in the session's report (``SessionReport.details``):
    :func:`openprogram_sim.report.session_details` gives the trajectory's score and each
    property's verdict, which the HTML report shows.

    ``stack`` is what it runs on: ``auto`` (the default) uvloop + httptools when both are
    installed (the ``fast`` extra: ``pip install 'openprogram-sim[fast]'``), else asyncio + h11
    (pure Python), or what ``$OPENPROGRAM_SIM_STACK`` (``pure``, ``fast``) says; ``fast``
    or ``pure`` asks for one (:attr:`WireServer.stack` says which).
    The same limits, answers and reports on either.
    """
    refuse_scenario(turns, "serve()")
    server = WireServer(
        turns, check=check, host=host, port=port, chunk_size=chunk_size, cycle=cycle,
        session_ttl=session_ttl, max_sessions=max_sessions, max_body=max_body,
        header_timeout=header_timeout, body_timeout=body_timeout,
        body_min_rate=body_min_rate, max_connections=max_connections, details=details,
        stack=stack,
    )  # fmt: skip
    server.start()
    try:
        yield server
    finally:
        server.stop()
