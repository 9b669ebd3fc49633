"""ScriptedWire: scripted turns served to any httpx client through ``httpx2.MockTransport``,
in the wire format of whichever API the request's path names, with each turn's ``wire:``
faults played as the loopback server plays them."""

from __future__ import annotations

import asyncio
import json
import random
import re
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx2

from openprogram_sim.errors import WireEncodeError
from openprogram_sim.models import (
    ErrorMode,
    Turn,
    TurnLike,
    WireFault,
    refuse_scenario,
    script_seed,
    session_seed,
    split_turn,
)
from openprogram_sim.wire._errors import error_response
from openprogram_sim.wire._faults import Delivery, DeliveryStep, Step, deliver
from openprogram_sim.wire._plan import WireResponse
from openprogram_sim.wire._routing import model_of, route

__all__ = [
    "CREDENTIAL_HEADERS",
    "ScriptedWire",
    "WireRequest",
    "mask_headers",
    "mask_url",
    "to_httpx",
]


@dataclass(slots=True)
class WireRequest:
    """One request the wire received. Credentials are masked when it is recorded: the
    values of credential headers (:data:`CREDENTIAL_HEADERS`) and of a ``key=`` query
    parameter read ``<redacted>``, so a key never reaches a repr, a log or a report."""

    index: int
    """Call number, from 1."""
    api: str | None
    """The API the path names (``None``: no API matched)."""
    stream: bool
    method: str
    url: str
    headers: dict[str, str]
    body: Any
    """The parsed JSON body (``None`` when it was not JSON)."""
    raw: bytes = field(repr=False, default=b"")
    """The body as sent (the wire server keeps one form: these bytes only when the body was
    not JSON, else empty)."""


CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "x-goog-api-key",
        "api-key",
        "cookie",
        "x-amz-security-token",
    }
)
"""Headers whose values are credentials (compared lower-case)."""

_REDACTED = "<redacted>"
_KEY_PARAM = re.compile(r"([?&](?:key|api_key|access_token)=)[^&#]*", re.IGNORECASE)


def mask_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` with every credential value replaced (an auth scheme such as ``Bearer``
    is kept, so a test can still see which scheme was used)."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        if name.lower() in CREDENTIAL_HEADERS:
            scheme, sep, _ = value.partition(" ")
            keep = sep and name.lower().endswith("authorization") and scheme.isascii()
            out[name] = f"{scheme} {_REDACTED}" if keep else _REDACTED
        else:
            out[name] = value
    return out


def mask_url(url: str) -> str:
    """``url`` with a key in its query string (Gemini's ``?key=``) replaced."""
    return _KEY_PARAM.sub(lambda m: m.group(1) + _REDACTED, url)


_CUT_MESSAGE = (
    "peer closed connection without sending complete message body (incomplete chunked read)"
)
"""What httpx2 reports (from h11) for a connection dropped mid-body; an in-process cut says
the same, so a client's error reads alike on either transport."""


def _read_timeout(request: httpx2.Request | None) -> float | None:
    timeout = request.extensions.get("timeout") if request is not None else None
    return timeout.get("read") if isinstance(timeout, Mapping) else None


class _Delivered(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """A :class:`Delivery` played to an in-process client, step by step
    (:meth:`Delivery.steps`), to sync and async clients alike.

    Waits are real (``asyncio.sleep``; ``time.sleep`` for a sync client). A cut is the
    ``RemoteProtocolError`` httpx2 raises for a connection dropped mid-body. A hold, and
    any wait longer than the request's read timeout, ends in ``ReadTimeout`` once that
    timeout has passed (no timeout: it lasts until the client cancels), as on a socket.
    The steps before the head (``latency``, a hold that sends nothing) are waited out by
    :class:`_Transport` before it hands the response over, else at the first read.
    """

    def __init__(self, delivery: Delivery, request: httpx2.Request | None = None) -> None:
        self._request = request
        self._steps = delivery.steps()
        self._before_head: list[DeliveryStep] = []
        for step in self._steps:
            if step is Step.HEAD:
                break
            self._before_head.append(step)

    def _wait(self, step: DeliveryStep) -> tuple[float | None, bool]:
        """How long ``step`` (a wait or a hold) waits (``None``: until cancelled), and
        whether the read times out at its end. Raises the cut."""
        if step is Step.CUT:
            raise httpx2.RemoteProtocolError(_CUT_MESSAGE, request=self._request)
        seconds = step if isinstance(step, (int, float)) else None
        limit = _read_timeout(self._request)
        if limit is not None and (seconds is None or seconds > limit):
            return limit, True
        return seconds, False

    def _timed_out(self) -> httpx2.ReadTimeout:
        return httpx2.ReadTimeout("", request=self._request)  # httpx2's own reads say no more

    # -- async clients -------------------------------------------------------------------

    async def ahead(self) -> None:
        """Wait out the steps before the head."""
        steps, self._before_head = self._before_head, []
        for step in steps:
            await self._astep(step)

    async def _astep(self, step: DeliveryStep) -> None:
        seconds, times_out = self._wait(step)
        if seconds is None:
            await asyncio.Event().wait()
        else:
            await asyncio.sleep(seconds)
        if times_out:
            raise self._timed_out()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        await self.ahead()
        for step in self._steps:
            if isinstance(step, list):
                for chunk in step:
                    yield chunk
            elif step is not Step.END:
                await self._astep(step)

    # -- sync clients --------------------------------------------------------------------

    def head(self) -> None:
        """Wait out the steps before the head."""
        steps, self._before_head = self._before_head, []
        for step in steps:
            self._step(step)

    def _step(self, step: DeliveryStep) -> None:
        seconds, times_out = self._wait(step)
        if seconds is None:
            threading.Event().wait()
        else:
            time.sleep(seconds)
        if times_out:
            raise self._timed_out()

    def __iter__(self) -> Iterator[bytes]:
        self.head()
        for step in self._steps:
            if isinstance(step, list):
                yield from step
            elif step is not Step.END:
                self._step(step)


class _Transport(httpx2.MockTransport):
    """``httpx2.MockTransport`` that waits out a delivery's time before its first byte
    (``latency``, a ``hang`` that sends nothing) before it hands the response over, as a
    connection does: a timeout or a cancellation then happens while the client sends."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handle_request(request)
        if isinstance(response.stream, _Delivered):
            response.stream.head()
        return response

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        if isinstance(response.stream, _Delivered):
            await response.stream.ahead()
        return response


def _to_httpx(delivery: Delivery, request: httpx2.Request | None) -> httpx2.Response:
    response = delivery.response
    return httpx2.Response(
        response.status,
        headers=response.headers,
        stream=_Delivered(delivery, request),
        request=request,
    )


def to_httpx(response: WireResponse, request: httpx2.Request | None = None) -> httpx2.Response:
    """``response`` as an ``httpx2.Response`` whose body arrives in its chunks."""
    return _to_httpx(Delivery(response=response), request)


class ScriptedWire:
    """Serves ``turns`` in call order to whichever adapter calls, in its own wire format.

    Use :meth:`handler` (or the object itself) as an ``httpx2.MockTransport`` handler, or
    :attr:`transport` / :meth:`client` for a ready transport or ``httpx2.AsyncClient``. The
    API and streaming mode come from each request (:func:`route`), so one script can serve
    any adapter. A scenario's turns are :meth:`Scenario.script()
    <openprogram_sim.scenario.Scenario.script>`; a list item may be a ready
    :class:`WireResponse`, served as is (for hand-made faults).

    A turn's faults (its ``wire:`` key or a ``(turn, WireFault)`` pair, ``latency``,
    ``fault: raise`` and ``hang``) are delivered by the code the loopback server delivers
    them with: the same statuses, headers and bytes; ``latency`` and ``interval`` as real
    waits; ``cut_after`` and ``fault: raise`` as the ``httpx2.RemoteProtocolError`` a
    dropped connection gives; ``hang`` as a read that lasts until the request's read
    timeout (``httpx2.ReadTimeout``) or the client cancels. Through :meth:`handler` in a
    MockTransport of your own, the wait before the first byte happens at the first body
    read instead of before the response. One difference remains: without ``interval`` the
    server writes a reply at once, while ScriptedWire hands its chunks over one by one, so
    what a client that aborts mid-reply has read may differ.

    Every request is recorded in :attr:`requests` (with its parsed body). A request beyond
    the script, to an unknown path, or for a turn that cannot be encoded is answered with
    HTTP 500 (404 for an unknown path) in the API's error shape, saying what happened
    (``x-should-retry: false``: it is no transient failure), and recorded in
    :attr:`errors`; :meth:`assert_consumed` raises on any of them and on turns never
    requested.

    ``error_status`` and ``error_mode`` apply to error turns that name no
    ``error_reason``, ``wire.status`` or ``wire.error_mode``.
    """

    def __init__(
        self,
        turns: Iterable[TurnLike | tuple[TurnLike, WireFault] | WireResponse] = (),
        *,
        chunk_size: int = 24,
        error_status: int = 500,
        error_mode: ErrorMode = "auto",
        seed: int | None = None,
    ) -> None:
        refuse_scenario(turns, "ScriptedWire()")
        items = [t if isinstance(t, WireResponse) else split_turn(t) for t in turns]
        self.turns: list[Turn | WireResponse] = [
            t if isinstance(t, WireResponse) else t[0] for t in items
        ]
        self._faults = [None if isinstance(t, WireResponse) else t[1] for t in items]
        self.chunk_size = chunk_size
        self.error_status = error_status
        self.error_mode: ErrorMode = error_mode
        self.requests: list[WireRequest] = []
        self.errors: list[str] = []
        self._served = 0
        self._lock = threading.Lock()
        given = (
            seed
            if seed is not None
            else script_seed([t for t in self.turns if isinstance(t, Turn)])
        )
        self.seed: int = given if given is not None else session_seed(None, None)
        """The seed ``one_of`` turns are drawn from (given, the script's, or picked), as
        :class:`~openprogram_sim.models.ScriptedModel` draws them."""
        self._rng = random.Random(self.seed)

    # -- transport glue ------------------------------------------------------------------

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        """The ``httpx2.MockTransport`` handler."""
        delivery = self._answer(
            request.method, str(request.url), request.content, dict(request.headers)
        )
        return _to_httpx(delivery, request)

    __call__ = handler

    @property
    def transport(self) -> httpx2.MockTransport:
        """A ``httpx2.MockTransport`` over :meth:`handler` that also waits out each
        response's time before its first byte."""
        return _Transport(self.handler)

    def client(self, **kwargs: Any) -> httpx2.AsyncClient:
        """An ``httpx2.AsyncClient`` whose every request this wire answers."""
        return httpx2.AsyncClient(transport=self.transport, **kwargs)

    # -- the core (transport-independent) ------------------------------------------------

    def respond(
        self, method: str, url: str, content: bytes, headers: Mapping[str, str] | None = None
    ) -> WireResponse:
        """Record one request and return the response for it: status, headers and every
        body chunk it sends (a corrupt chunk corrupted; the timing, a cut and a hang are
        the transport's: see :meth:`handler`)."""
        return self._answer(method, url, content, headers).response

    def _answer(
        self, method: str, url: str, content: bytes, headers: Mapping[str, str] | None
    ) -> Delivery:
        try:
            body: Any = json.loads(content) if content else None
        except ValueError:
            body = None
        path = urlsplit(url).path
        target = route(url, body)
        api, stream = target if target is not None else (None, False)
        with self._lock:
            index = len(self.requests) + 1
            self.requests.append(
                WireRequest(
                    index,
                    api,
                    stream,
                    method,
                    mask_url(url),
                    mask_headers(headers or {}),
                    body,
                    content,
                )
            )
            if api is None:
                return self._fail(
                    None,
                    404,
                    f"ScriptedWire: request #{index} ({method} {path}) matches no provider API "
                    "path (/chat/completions, /responses, /messages, :generateContent, "
                    ":streamGenerateContent, /converse, /converse-stream)",
                )
            if self._served >= len(self.turns):
                return self._fail(
                    api,
                    500,
                    f"ScriptedWire: request #{index} ({api}, {method} {path}) has no scripted "
                    f"turn; the script has {len(self.turns)}. Add a turn, or lower "
                    "max_iterations.",
                )
            self._served += 1
            number = self._served
            item = self.turns[number - 1]
            if isinstance(item, Turn):  # a one_of turn is drawn here, in call order
                item = item.draw(self._rng)[0]
        fault = self._faults[number - 1] if number <= len(self._faults) else None
        if isinstance(item, WireResponse):
            return Delivery(response=item)
        try:
            return deliver(
                api, item, fault or WireFault(), stream=stream,
                model=model_of(api, url, body), seq=index, chunk_size=self.chunk_size,
                error_status=self.error_status, error_mode=self.error_mode,
            )  # fmt: skip
        except (WireEncodeError, ValueError) as exc:
            message = f"ScriptedWire: turn #{number} cannot be encoded: {exc}"
            with self._lock:
                return self._fail(api, 500, message)

    def _fail(self, api: str | None, status: int, message: str) -> Delivery:
        self.errors.append(message)
        if api is None:
            body = json.dumps({"error": {"message": message, "type": "scripted_wire"}})
            response = WireResponse(status, {"content-type": "application/json"}, [body.encode()])
        else:
            response = error_response(api, status, message, should_retry=False)
        return Delivery(response=response)

    # -- checks --------------------------------------------------------------------------

    @property
    def calls(self) -> int:
        return len(self.requests)

    @property
    def unconsumed(self) -> list[Turn | WireResponse]:
        """Turns never served."""
        return self.turns[self._served :]

    def assert_consumed(self) -> None:
        """Raise ``AssertionError`` if a request failed here or a turn was never served."""
        problems = list(self.errors)
        if self.unconsumed:
            problems.append(
                f"{len(self.unconsumed)} of {len(self.turns)} scripted turns were never "
                f"requested (the wire was called {self.calls} times)"
            )
        if problems:
            raise AssertionError("ScriptedWire: " + "; ".join(problems))
