"""ScriptedWire: scripted turns served to any httpx client through ``httpx2.MockTransport``,
in the wire format of whichever API the request's path names."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx2

from openprogram_sim.errors import WireEncodeError
from openprogram_sim.models import Turn
from openprogram_sim.wire._encode import ErrorMode, TurnLike, encode
from openprogram_sim.wire._errors import error_response
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


class _Chunks(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """A response body delivered chunk by chunk, to sync and async clients alike."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


def to_httpx(response: WireResponse, request: httpx2.Request | None = None) -> httpx2.Response:
    """``response`` as an ``httpx2.Response`` whose body arrives in its chunks."""
    return httpx2.Response(
        response.status,
        headers=response.headers,
        stream=_Chunks(list(response.chunks)),
        request=request,
    )


class ScriptedWire:
    """Serves ``turns`` in call order to whichever adapter calls, in its own wire format.

    Use :meth:`handler` (or the object itself) as an ``httpx2.MockTransport`` handler, or
    :meth:`client` for a ready ``httpx2.AsyncClient``. The API and streaming mode come from
    each request (:func:`route`), so one script can serve any adapter. A list item may be
    a ready :class:`WireResponse`, served as is (for hand-made faults).

    Every request is recorded in :attr:`requests` (with its parsed body). A request beyond
    the script, to an unknown path, or for a turn that cannot be encoded is answered with
    HTTP 500 (404 for an unknown path) in the API's error shape, saying what happened, and
    recorded in :attr:`errors`; :meth:`assert_consumed` raises on any of them and on turns
    never requested.
    """

    def __init__(
        self,
        turns: Iterable[TurnLike | WireResponse] = (),
        *,
        chunk_size: int = 24,
        error_status: int = 500,
        error_mode: ErrorMode = "auto",
    ) -> None:
        self.turns: list[Turn | WireResponse] = [
            t if isinstance(t, WireResponse) else Turn.coerce(t) for t in turns
        ]
        self.chunk_size = chunk_size
        self.error_status = error_status
        self.error_mode: ErrorMode = error_mode
        self.requests: list[WireRequest] = []
        self.errors: list[str] = []
        self._served = 0
        self._lock = threading.Lock()

    # -- transport glue ------------------------------------------------------------------

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        """The ``httpx2.MockTransport`` handler."""
        response = self.respond(
            request.method, str(request.url), request.content, dict(request.headers)
        )
        return to_httpx(response, request)

    __call__ = handler

    @property
    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handler)

    def client(self, **kwargs: Any) -> httpx2.AsyncClient:
        """An ``httpx2.AsyncClient`` whose every request this wire answers."""
        return httpx2.AsyncClient(transport=self.transport, **kwargs)

    # -- the core (transport-independent) ------------------------------------------------

    def respond(
        self, method: str, url: str, content: bytes, headers: Mapping[str, str] | None = None
    ) -> WireResponse:
        """Record one request and return the response for it."""
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
            item = self.turns[self._served - 1]
        if isinstance(item, WireResponse):
            return item
        try:
            return encode(
                api,
                item,
                stream=stream,
                model=model_of(api, url, body),
                seq=index,
                chunk_size=self.chunk_size,
                error_status=self.error_status,
                error_mode=self.error_mode,
            )
        except WireEncodeError as exc:
            with self._lock:
                return self._fail(
                    api, 500, f"ScriptedWire: turn #{self._served} cannot be encoded: {exc}"
                )

    def _fail(self, api: str | None, status: int, message: str) -> WireResponse:
        self.errors.append(message)
        if api is None:
            body = json.dumps({"error": {"message": message, "type": "scripted_wire"}})
            return WireResponse(status, {"content-type": "application/json"}, [body.encode()])
        return error_response(api, status, message)

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
