"""The wire server: a scenario's model turns over real HTTP on loopback (uvicorn), in a
background thread (:func:`serve`) or in the foreground (``openprogram-sim serve``)."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import uvicorn

from openprogram_sim.wire._app import QUIET_CUTS, WireApp
from openprogram_sim.wire._encode import TurnLike
from openprogram_sim.wire._faults import WireFault
from openprogram_sim.wire._scripted import WireRequest
from openprogram_sim.wire._session import Session

if TYPE_CHECKING:
    from openprogram.providers import Provider
    from openprogram_sim.scenario import Failure, Scenario

__all__ = ["ServeReport", "WireServer", "serve"]

_SDK_PATH = {
    "openai": "/v1",
    "openai-chat": "/v1",
    "openai-responses": "/v1",
    "anthropic": "",
    "gemini": "",
    "bedrock": "",
}
"""What each API's official SDK takes as its base URL, after the server's root."""

_ADAPTER_PATH = {**_SDK_PATH, "anthropic": "/v1", "gemini": "/v1beta"}
"""What openprogram's own adapters take as ``base_url=``."""

_ADAPTER_MODEL = {
    "openai": "gpt-4o-mini",
    "openai-chat": "gpt-4o-mini",
    "openai-responses": "gpt-5-mini",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "bedrock": "us.amazon.nova-micro-v1:0",
}


class _Uvicorn(uvicorn.Server):
    """uvicorn, told to end held connections first when it shuts down."""

    def __init__(self, config: uvicorn.Config, app: WireApp) -> None:
        super().__init__(config)
        self.wire_app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.wire_app.stop()
        await super().shutdown(sockets)

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        # Signals are the caller's: the CLI stops the server on Ctrl-C and still prints its
        # report (uvicorn's handlers would raise the signal again after shutting down).
        yield


@dataclass(slots=True)
class ServeReport:
    """What the server's clients did, checked against the script and the scenario:
    turns left unserved, failed requests, and ``expect.requests`` (the same failures
    ``openprogram-sim run`` prints)."""

    failures: list[Failure] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    """The sessions checked, by label."""

    @property
    def passed(self) -> bool:
        return not self.failures

    def render(self) -> str:
        lines = [f"- {f.title}" + "".join(f"\n  {x}" for x in f.explained.splitlines())
                 for f in self.failures]  # fmt: skip
        return "\n".join(lines)


class WireServer:
    """A scripted model on a real loopback port, speaking every API (see :func:`serve`).

    Each ``/s/{name}/`` URL prefix is a session with its own copy of the script; URLs
    without a prefix share the default session.
    """

    def __init__(
        self,
        turns: Scenario | Iterable[TurnLike | tuple[TurnLike, WireFault]],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        chunk_size: int = 24,
        cycle: bool = False,
        log: Callable[[str], None] | None = None,
    ) -> None:
        from openprogram_sim.scenario import Scenario

        self.scenario = turns if isinstance(turns, Scenario) else None
        script = _scenario_turns(turns) if isinstance(turns, Scenario) else list(turns)
        self.app = WireApp(script, chunk_size=chunk_size, cycle=cycle, log=log)
        self.host = host
        self._socket = _bind(host, port)
        self.port: int = self._socket.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            lifespan="off",
            log_config=None,
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=2,
        )
        self._server = _Uvicorn(config, self.app)
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

    def stop(self) -> None:
        """Stop serving: held connections are dropped, the port is closed."""
        self._server.should_exit = True
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
        """The base URL ``api``'s official SDK takes: ``openai`` (Chat and Responses)
        ``…/v1``; ``anthropic``, ``gemini`` (google-genai's ``http_options``) and
        ``bedrock`` (boto3's ``endpoint_url``) the root. ``session`` gives that session's
        URL (its own copy of the script)."""
        return self._root(session) + _SDK_PATH[_check_api(api)]

    def adapter_url(self, api: str, session: str | None = None) -> str:
        """The ``base_url=`` openprogram's own adapter for ``api`` takes (Anthropic's ends
        in ``/v1``, Gemini's in ``/v1beta``)."""
        return self._root(session) + _ADAPTER_PATH[_check_api(api)]

    def provider(
        self, api: str, model: str | None = None, *, stream: bool = True, session: str | None = None
    ) -> Provider:
        """openprogram's real adapter for ``api``, pointed at this server (placeholder
        credentials; the server ignores them)."""
        from openprogram.providers import get_provider

        name = "openai" if api == "openai-chat" else _check_api(api)
        options: dict[str, Any] = {"base_url": self.adapter_url(api, session), "stream": stream}
        if name == "bedrock":
            options.update(bearer_token="openprogram-sim", region="us-east-1")
        else:
            options["api_key"] = "openprogram-sim"
        return get_provider(f"{name}:{model or _ADAPTER_MODEL[name]}", **options)

    def _root(self, session: str | None) -> str:
        return self.url if session is None else f"{self.url}/s/{session}"

    # -- what clients did ----------------------------------------------------------------

    def session(self, name: str | None = None) -> Session:
        """Session ``name`` (``None``: the default one)."""
        return self.app.session(name)

    @property
    def requests(self) -> list[WireRequest]:
        """Every request of the default session, credentials masked."""
        return self.app.session(None).requests

    @property
    def errors(self) -> list[str]:
        return [e for s in self._checked_sessions() for e in s.errors]

    def assert_consumed(self, session: str | None = None) -> None:
        """Raise ``AssertionError`` if a request failed or a turn was never served, in
        ``session`` (given), else in every session used (the default one when none was)."""
        sessions = [self.app.session(session)] if session is not None else self._checked_sessions()
        for s in sessions:
            s.assert_consumed()

    def check(self, session: str | None = None) -> ServeReport:
        """Unserved turns, failed requests, and the scenario's ``expect.requests`` against
        what the clients sent: in ``session`` (given), else in every session used."""
        from openprogram_sim.scenario import Failure

        report = ServeReport()
        sessions = [self.app.session(session)] if session is not None else self._checked_sessions()
        for s in sessions:
            label = "" if s.name is None else f"session {s.name!r}: "
            report.checked.append(label.rstrip(": ") or "default session")
            report.failures += [Failure(f"{label}{e}") for e in s.errors]
            if s.unconsumed:
                report.failures.append(
                    Failure(
                        f"{label}{s.unconsumed} of {len(s.script)} scripted turns were never "
                        f"requested (the client made {len(s.calls)} model call(s))",
                        "remove them, or check why the client stopped early",
                    )
                )
            if self.scenario is not None:
                for failure in _check_requests(self.scenario, s.request_fields()):
                    failure.title = label + failure.title
                    report.failures.append(failure)
        return report

    def _checked_sessions(self) -> list[Session]:
        used = [s for s in self.app.sessions.values() if s.used]
        return used or [self.app.session(None)]


def _check_api(api: str) -> str:
    if api not in _SDK_PATH:
        raise ValueError(f"unknown api {api!r}; use one of: {', '.join(_SDK_PATH)}")
    return api


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named explicitly: asyncio sets TCP_NODELAY only on sockets that say so,
    # and without it every response waits out the client's delayed ACK (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _scenario_turns(scenario: Scenario) -> list[tuple[Any, WireFault]]:
    """The scenario's ``model:`` turns, each with its ``wire:`` fault when the scenario
    format has one."""
    from openprogram_sim.scenario import build_model

    turns = build_model(scenario).turns
    raw = scenario.model if isinstance(scenario.model, list) else []
    faults = [WireFault.coerce(_plain(getattr(t, "wire", None))) for t in raw]
    return list(zip(turns, faults, strict=True))


def _plain(spec: Any) -> Any:
    """A ``wire:`` spec as a dict, whether the schema keeps it as one or as a model."""
    dump = getattr(spec, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else spec


def _check_requests(scenario: Scenario, requests: list[dict[str, Any]]) -> list[Failure]:
    """``expect.requests`` against ``requests``, by the check ``run`` uses."""
    from openprogram_sim.scenario import check_requests

    return check_requests(scenario, requests)


@contextmanager
def serve(
    scenario: Scenario | Iterable[TurnLike | tuple[TurnLike, WireFault]] | str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    chunk_size: int = 24,
    cycle: bool = False,
) -> Iterator[WireServer]:
    """Serve a scenario (a :class:`~openprogram_sim.scenario.Scenario`, a path to its
    file, or a list of turns) on a real loopback port from a background thread::

        with serve("scenarios/basics/one_tool.yaml") as server:
            client = openai.OpenAI(base_url=server.base_url("openai"), api_key="x")
            ...  # your agent, against the scripted model
            server.assert_consumed()
            assert server.check().passed, server.check().render()

    ``port=0`` picks a free port. Turns may carry a ``wire:`` fault (see
    :class:`WireFault`). ``cycle=True`` starts the script over when it runs out.
    """
    if isinstance(scenario, str):
        from openprogram_sim.scenario import load_scenario

        scenario = load_scenario(scenario)
    server = WireServer(scenario, host=host, port=port, chunk_size=chunk_size, cycle=cycle)
    server.start()
    try:
        yield server
    finally:
        server.stop()
