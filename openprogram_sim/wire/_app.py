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
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from starlette.routing import BaseRoute, Mount, Route, Router
from starlette.types import Receive, Scope, Send

from openprogram_sim.errors import WireEncodeError
from openprogram_sim.wire._encode import TurnLike
from openprogram_sim.wire._errors import error_response
from openprogram_sim.wire._faults import Delivery, WireFault, deliver, split_turn
from openprogram_sim.wire._plan import CREATED, JSON_TYPE, WireResponse, _json
from openprogram_sim.wire._scripted import mask_headers, mask_url
from openprogram_sim.wire._session import Session

__all__ = ["WireApp"]

# A body must carry the API's list of messages (or Responses' input) to be a model call.
_REQUIRED = {
    "openai-chat": ("messages", (list,)),
    "openai-responses": ("input", (list, str)),
    "anthropic": ("messages", (list,)),
    "gemini": ("contents", (list,)),
    "bedrock": ("messages", (list,)),
}


class _Cut(Exception):
    """Raised to drop a connection mid-response on purpose (a scripted fault). The server
    closes the socket; :class:`_QuietCuts` keeps it out of the server's error log."""


class _QuietCuts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _Cut)


QUIET_CUTS = _QuietCuts()
"""Install on the ``uvicorn.error`` logger: deliberate cuts are not server errors."""


class WireApp:
    """Serves ``turns`` (turn dicts with an optional ``wire:`` fault, :class:`Turn` objects
    or ``(turn, WireFault)`` pairs) as every API, one session per ``/s/{name}`` prefix.

    Args:
        chunk_size: characters per streamed piece.
        cycle: start the script over when it runs out (load tests) instead of answering
            with the "script exhausted" error.
        log: called with one line per model call and per failure.
    """

    def __init__(
        self,
        turns: Iterable[TurnLike | tuple[TurnLike, WireFault]],
        *,
        chunk_size: int = 24,
        cycle: bool = False,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.script = [split_turn(t) for t in turns]
        self.chunk_size = chunk_size
        self.cycle = cycle
        self.log = log
        self._sessions: dict[str | None, Session] = {}
        self._lock = threading.Lock()
        self._stopping: asyncio.Event | None = None
        routes = _routes(self)
        self.router = Router(
            routes=[*routes, Mount("/s/{session}", routes=routes)], default=self._not_found
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.router(scope, receive, send)

    # -- sessions ------------------------------------------------------------------------

    def session(self, name: str | None = None) -> Session:
        """The session ``name`` (``None``: URLs without ``/s/{name}``), made on first use."""
        found = self._sessions.get(name)
        if found is not None:
            return found
        with self._lock:
            return self._sessions.setdefault(name, Session(name, self.script, cycle=self.cycle))

    @property
    def sessions(self) -> dict[str | None, Session]:
        with self._lock:
            return dict(self._sessions)

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
        await _read_body(receive)
        path = scope.get("path", "")
        message = (
            f"openprogram-sim: {scope.get('method')} {path} is not an API route this server "
            "serves: /v1/chat/completions, /v1/responses, /v1/models, /v1/messages, "
            "/v1beta/models/{model}:generateContent (and :streamGenerateContent, also under "
            "/v1), /model/{modelId}/converse (and /converse-stream), each also under "
            "/s/{session}"
        )
        self.session(None).fail(message)
        body = _json({"error": {"message": message, "type": "not_found"}}).encode()
        await _send_whole(send, WireResponse(404, {"content-type": JSON_TYPE}, [body]))


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
        Route("/v1/models", _Models(), methods=["GET"]),
        *gemini,
        Route("/model/{model}/converse", call("bedrock", False), methods=["POST"]),
        Route("/model/{model}/converse-stream", call("bedrock", True), methods=["POST"]),
    ]


class _Models:
    """``GET /v1/models``: one model, in Anthropic's list shape when the client is
    Anthropic's (it sends ``anthropic-version``), else OpenAI's."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        names = {k.lower() for k, _ in scope["headers"]}
        body: Any
        if b"anthropic-version" in names:
            model = {"type": "model", "id": "scripted", "display_name": "openprogram-sim",
                     "created_at": "2023-11-14T22:13:20Z"}  # fmt: skip
            body = {"data": [model], "has_more": False, "first_id": "scripted",
                    "last_id": "scripted"}  # fmt: skip
        else:
            model = {"id": "scripted", "object": "model", "created": CREATED,
                     "owned_by": "openprogram-sim"}  # fmt: skip
            body = {"object": "list", "data": [model]}
        response = WireResponse(200, {"content-type": JSON_TYPE}, [_json(body).encode()])
        await _send_whole(send, response)


class _ClientGone(Exception):
    """The client disconnected before its request body arrived."""


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGone
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


def _headers(response: WireResponse, length: int | None) -> list[tuple[bytes, bytes]]:
    headers = [(k.encode(), v.encode()) for k, v in response.headers.items()]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return headers


async def _send_whole(send: Send, response: WireResponse) -> None:
    body = response.body
    start = {"type": "http.response.start", "status": response.status}
    await send({**start, "headers": _headers(response, len(body))})
    await send({"type": "http.response.body", "body": body})


class _ModelCall:
    """One API's model-call route: read the body, take the session's next turn, deliver."""

    def __init__(self, app: WireApp, api: str, stream: bool | None) -> None:
        self.app = app
        self.api = api
        self.stream = stream  # None: the body's "stream" says

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            raw = await _read_body(receive)
        except _ClientGone:
            return
        params = scope.get("path_params", {})
        session = self.app.session(params.get("session"))
        delivery = self._answer(scope, raw, session, params)
        await _Delivering(delivery, receive, send, self.app.stopping(), session).run()

    def _answer(
        self, scope: Scope, raw: bytes, session: Session, params: dict[str, Any]
    ) -> Delivery:
        api = self.api
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        streams = isinstance(body, dict) and body.get("stream") is True
        stream = self.stream if self.stream is not None else streams
        request = session.record(_recorded(scope, api, stream, body, raw))
        problem = _malformed(api, body)
        if problem is not None:
            return self._fail(session, 400, f"request #{request.index} ({api}): {problem}")
        taken = session.take(request)
        if taken is None:
            return self._fail(
                session,
                400,
                f"openprogram-sim: the script is exhausted: request #{request.index} ({api}) "
                f"has no scripted turn; the script has {len(self.app.script)}. Add a turn to "
                "the scenario's model:, or check why the client called again.",
            )
        number, turn, fault = taken
        if self.app.log is not None:
            where = "" if session.name is None else f"[{session.name}] "
            mode = "stream" if stream else "json"
            self.app.log(
                f"{where}#{request.index} {api} ({mode}) <- turn {number}/{len(self.app.script)}"
            )
        model = params.get("model") or (body.get("model") if isinstance(body, dict) else None)
        try:
            return deliver(
                api, turn, fault, stream=stream, model=str(model or "scripted"),
                seq=request.index, chunk_size=self.app.chunk_size,
            )  # fmt: skip
        except (WireEncodeError, ValueError) as exc:
            return self._fail(
                session, 500, f"openprogram-sim: turn {number} cannot be served on {api}: {exc}"
            )

    def _fail(self, session: Session, status: int, message: str) -> Delivery:
        session.fail(message)
        if self.app.log is not None:
            self.app.log(f"error: {message}")
        response = error_response(self.api, status, message)
        response.headers["x-should-retry"] = "false"  # not a transient failure: no retries
        return Delivery(response=response)


def _recorded(scope: Scope, api: str, stream: bool, body: Any, raw: bytes) -> dict[str, Any]:
    """A request's fields as :class:`WireRequest` keeps them, credentials masked."""
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
    return {
        "api": api,
        "stream": stream,
        "method": scope["method"],
        "url": mask_url(_url(scope)),
        "headers": mask_headers(headers),
        "body": body,
        "raw": raw,
    }


def _url(scope: Scope) -> str:
    host, port = scope.get("server") or ("127.0.0.1", 0)
    query = scope.get("query_string", b"")
    # the full path: the /s/{session} Mount puts its prefix in root_path, and Starlette
    # keeps it in path too (older versions stripped it from path)
    root = scope.get("root_path", "")
    path = scope["path"] if scope["path"].startswith(root) else root + scope["path"]
    return f"http://{host}:{port}{path}" + (f"?{query.decode('latin-1')}" if query else "")


def _malformed(api: str, body: Any) -> str | None:
    key, kinds = _REQUIRED[api]
    if not isinstance(body, dict):
        return "the request body is not a JSON object"
    if not isinstance(body.get(key), kinds):
        wanted = " or ".join("an array" if k is list else "a string" for k in kinds)
        return f"the request body's {key!r} must be {wanted}"
    return None


class _Delivering:
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
        if d.delay and await self._pause(d.delay):
            return
        if d.hang_first:
            await self._hold()
            return
        whole = d.cut_after is None and not d.hang and len(response.chunks) == 1
        start = {"type": "http.response.start", "status": response.status}
        await self.send(
            {**start, "headers": _headers(response, len(response.body) if whole else None)}
        )
        if d.cut_after == 0:
            raise _Cut
        if d.interval:
            for i, chunk in enumerate(response.chunks, start=1):
                if i > 1 and await self._pause(d.interval):
                    return
                await self._write(chunk)
                if d.cut_after == i:
                    raise _Cut
        else:
            # Nothing to wait for between chunks: one write, as a server writes a reply that
            # is ready (the client reads the same bytes; with `interval`, each chunk is its
            # own write after the pause).
            await self._write(b"".join(response.chunks[: d.cut_after]))
            if d.cut_after is not None:
                raise _Cut
        if d.hang:
            await self._hold()
            return
        await self.send({"type": "http.response.body", "body": b""})

    async def _write(self, data: bytes) -> None:
        await self.send({"type": "http.response.body", "body": data, "more_body": True})

    async def _hold(self) -> None:
        if await self._pause(None) and self._watch is not None and self._watch.result() == "stop":
            raise _Cut

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
