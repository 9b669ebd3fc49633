"""What every HTTP adapter shares: keys, error text, cancellation and the request cycle.

:class:`HTTPProvider` is the base of the wire adapters. A subclass states only what differs
between the APIs: where to send (:meth:`~HTTPProvider.endpoint`), how to authenticate
(:meth:`~HTTPProvider.auth_headers`, when not a bearer token), how a call maps to a request body
(:attr:`~HTTPProvider.request_mapping`) and which parser reads the answer
(:attr:`~HTTPProvider.parser_class`); the base does the rest: one POST through an
``httpx2.AsyncClient`` (injected or owned), HTTP errors and transport failures turned into an
``error`` event, and ``options.cancel`` turned into an ``aborted`` one.

Its contract: :meth:`~HTTPProvider.stream` never raises; every failure is an ``error`` stop
with a useful message and :class:`~openprogram.types.ErrorDetails`. Every error text passes
through one place (the builder's ``scrub``), which masks every form of every credential the
adapter holds and then cuts the text to :data:`~openprogram.providers._errors.MAX_ERROR_TEXT`
characters; a key never appears in an error message or a repr.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, ClassVar, Protocol, TypeVar
from urllib.parse import urlsplit

import httpx2

from openprogram.errors import ConfigurationError
from openprogram.events import ProviderEvent
from openprogram.providers._errors import (
    MAX_ERROR_BODY,
    Redactor,
    check_key,
    clip,
    credential_values,
    http_error,
    transport_details,
)
from openprogram.providers._parsing import WireParser, parse_body
from openprogram.providers.base import Context, StreamOptions
from openprogram.providers.builder import MessageBuilder
from openprogram.types import (
    AnyMessage,
    AssistantMessage,
    ErrorDetails,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "HTTPProvider",
    "RequestMapping",
    "resolve_api_key",
    "resolve_base_url",
    "sendable_messages",
    "tool_call_text",
    "tool_result_text",
    "user_content",
]

T = TypeVar("T")
_CANCELLED: Any = object()
_EOF: Any = object()


def resolve_api_key(
    api_key: str | None,
    env_vars: tuple[str, ...],
    *,
    provider: str,
    custom_base_url: bool,
    argument: str = "api_key",
) -> str | None:
    """The key to send: ``api_key``, else the first non-empty variable of ``env_vars``,
    without surrounding whitespace.

    Without either, a custom base URL (a compatible server, the wire simulator) means "send
    no auth"; otherwise :class:`ConfigurationError` names the variable(s) to set. A key an
    HTTP header cannot carry is refused the same way, by an error that does not show it.
    """
    if api_key:
        return check_key(api_key, provider=provider, source=f"{argument}=")
    for name in env_vars:
        value = os.environ.get(name, "")
        if value.strip():
            return check_key(value, provider=provider, source=f"the {name} environment variable")
    if custom_base_url:
        return None
    names = " or ".join(env_vars)
    raise ConfigurationError(
        f"{provider}: no API key found. Set the {names} environment variable, or pass "
        f"{argument}=... to the provider (a custom base_url needs no key)."
    )


_VERSION_SEGMENT = re.compile(r"/v\d+(?:(?:alpha|beta)\d*)?$")
"""A path that ends in an API version: ``/v1``, ``/v1beta``, ``/v1alpha``, ``/v1beta1``."""


def resolve_base_url(
    base_url: str | None, *, env_var: str, default: str, version: str
) -> tuple[str, bool]:
    """Where to send, and whether it is a custom base URL (one that needs no key).

    ``base_url=`` wins; else ``env_var`` when it is set and not empty (the variable the
    API's official SDK reads, e.g. ``ANTHROPIC_BASE_URL``); else ``default``. The URL may
    take either form: the root, as the SDK takes it, which gets ``/{version}`` appended
    (Anthropic's ``v1``, Gemini's ``v1beta``), or one whose path already ends in a version
    segment, kept as it is. With ``version=""`` the URL is used as given (OpenAI's SDK base
    URL already ends in ``/v1``). A trailing slash is dropped."""
    if base_url is None and env_var:
        base_url = os.environ.get(env_var, "").strip() or None
    url = (base_url or default).rstrip("/")
    if version and not _VERSION_SEGMENT.search(urlsplit(url).path):
        url = f"{url}/{version}"
    return url, base_url is not None


def sendable_messages(messages: list[AnyMessage]) -> Iterator[AnyMessage]:
    """The history as a wire adapter should send it.

    Assistant replies that ended in ``error`` or ``aborted`` are left out (they may hold half
    a tool call the API would reject), and so are tool results answering calls of theirs;
    tool calls that have no result (left by an abort) are left out of their message.
    """
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)}
    dropped: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage) and message.stop_reason in ("error", "aborted"):
            dropped.update(call.id for call in message.tool_calls)
            continue
        if isinstance(message, ToolResultMessage) and message.tool_call_id in dropped:
            continue
        if isinstance(message, AssistantMessage) and any(
            c.id not in answered for c in message.tool_calls
        ):
            # An abort mid-batch leaves calls that never ran and have no result; the APIs
            # reject unanswered calls, so they are not sent (the history keeps them).
            content = [
                b for b in message.content if not isinstance(b, ToolCall) or b.id in answered
            ]
            if not content:
                continue
            message = replace(message, content=content)
        yield message


def user_content(message: UserMessage, *, last: bool) -> list[TextContent | ImageContent]:
    """A user message's blocks as the APIs that reject an empty text block take them
    (Anthropic, Gemini, Bedrock): empty texts left out, so a message with nothing else is
    not sent. The last message of a request may not be empty: left out, the request would
    end on the model's own reply, which those APIs continue as a prefill; a ValueError
    says so (the call then ends in an ``error`` stop, ``invalid_request``)."""
    content = [b for b in message.content if not isinstance(b, TextContent) or b.text]
    if not content and last:
        raise ValueError(
            "the last user message is empty, and this API rejects an empty text: "
            "send some text (or an image)"
        )
    return content


def tool_call_text(call: ToolCall) -> str:
    """A past tool call as text, for a request that may not carry tool blocks (one that
    offers no tools): the model still sees what was called."""
    args = call.arguments if isinstance(call.arguments, dict) else {}
    return f"[called tool {call.name} (id {call.id}) with {json.dumps(args, ensure_ascii=False)}]"


def tool_result_text(message: ToolResultMessage) -> str:
    """A past tool result as text (see :func:`tool_call_text`)."""
    flag = " (error)" if message.is_error else ""
    return f"[result of tool {message.tool_name} (id {message.tool_call_id}){flag}: {message.text}]"


class RequestMapping(Protocol):
    """An adapter's ``build_request``: the JSON body of one call (``max_tokens`` is the
    limit to send, already resolved against the provider's default)."""

    def __call__(
        self,
        context: Context,
        options: StreamOptions,
        *,
        model: str,
        stream: bool,
        max_tokens: int | None,
    ) -> dict[str, Any]: ...


class _Racer:
    """Races reads against one cancel event for the life of one response.

    A read is awaited in the caller's own task (no task per chunk: a stream has hundreds of
    them); one waiter per response watches ``cancel`` and, when it is set while a read is
    pending, cancels the caller's task, which the read then reports as ``_CANCELLED``.
    Between reads (while the caller handles a chunk) a set ``cancel`` is seen by the next
    read before it starts.
    """

    __slots__ = ("_cancel", "_ours", "_reading", "_task", "_waiter")

    def __init__(self, cancel: asyncio.Event | None) -> None:
        self._cancel = cancel
        self._waiter: asyncio.Future[Any] | None = None
        self._task: asyncio.Task[Any] | None = None
        self._reading = False
        self._ours = False

    async def read(self, awaitable: Awaitable[T]) -> T:
        cancel = self._cancel
        if cancel is None:
            return await awaitable
        if cancel.is_set():
            _discard(awaitable)
            return _CANCELLED  # type: ignore[no-any-return]
        if self._waiter is None:
            self._task = asyncio.current_task()
            self._waiter = asyncio.ensure_future(cancel.wait())
            self._waiter.add_done_callback(self._fire)
        self._reading = True
        try:
            return await awaitable
        except asyncio.CancelledError:
            if not self._ours:
                raise  # somebody else's cancellation: let it through
            self._ours = False
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return _CANCELLED  # type: ignore[no-any-return]
        finally:
            self._reading = False

    def _fire(self, waiter: asyncio.Future[Any]) -> None:
        if waiter.cancelled() or not self._reading or self._task is None:
            return
        self._ours = True
        self._task.cancel()

    def close(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.remove_done_callback(self._fire)
            self._waiter.cancel()


def _discard(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()  # a coroutine never awaited: close it, no "never awaited" warning


async def _read_error_body(response: httpx2.Response, racer: _Racer) -> Any:
    """The start of a non-2xx body: at most ``MAX_ERROR_BODY`` bytes, each read raced
    against the cancel event (``_CANCELLED`` when it is set first). A body that never ends
    holds neither."""
    parts: list[bytes] = []
    size = 0
    chunks = response.aiter_bytes()
    try:
        while size < MAX_ERROR_BODY:
            chunk = await racer.read(anext(chunks, _EOF))
            if chunk is _CANCELLED:
                return _CANCELLED
            if chunk is _EOF:
                break
            parts.append(chunk)
            size += len(chunk)
    finally:
        await chunks.aclose()
    return b"".join(parts)[:MAX_ERROR_BODY]


class HTTPProvider(ABC):
    """Base of the HTTP wire adapters (see the module docstring).

    Args:
        model_id: the provider's model name, e.g. ``gpt-4o-mini``.
        api_key: the key; default: the class's environment variables.
        base_url: where the API lives (a compatible server, the wire simulator); default:
            the class's :attr:`base_url_env` variable when set, as the official SDK reads
            it, else the public endpoint. The SDK's form works (Anthropic's and Gemini's
            root), and so does the root with the version path (see
            :func:`resolve_base_url`).
        client: an ``httpx2.AsyncClient`` to send through (tests pass one with
            ``httpx2.MockTransport``); it is not closed. Default: a client per call.
        timeout: seconds (or an ``httpx2.Timeout``) applied to every request.
        max_tokens: the reply's token limit when ``StreamOptions.max_tokens`` is unset.
        stream: stream the reply (SSE) or ask for one JSON body.
        headers: extra headers sent with every request (credentials among them are
            masked in error texts like the key).

    Raises:
        ConfigurationError: no key and no custom ``base_url``; or a key an HTTP header
            cannot carry (a control or non-ASCII character inside it: surrounding
            whitespace, such as a key file's newline, is stripped). The error never shows
            the key.
    """

    api: ClassVar[str] = ""
    label: ClassVar[str] = ""
    request_mapping: ClassVar[RequestMapping]
    """The API's request shape (the adapter module's ``build_request``, as a
    ``staticmethod``)."""
    parser_class: ClassVar[type[WireParser]]
    """The API's response parser: one instance reads one body (SSE, JSON or event-stream)."""
    env_vars: ClassVar[tuple[str, ...]] = ()
    default_base_url: ClassVar[str] = ""
    """The public endpoint, in the form the API's official SDK takes."""
    base_url_env: ClassVar[str] = ""
    """The environment variable the official SDK reads for its base URL (read when no
    ``base_url=`` is given)."""
    api_version: ClassVar[str] = ""
    """The version path joined to a root base URL (``v1``); ``""``: none is added."""
    key_argument: ClassVar[str] = "api_key"
    """The constructor argument that takes the key, as error messages name it."""

    def __init__(
        self,
        model_id: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: httpx2.AsyncClient | None = None,
        timeout: float | httpx2.Timeout = 60.0,
        max_tokens: int | None = None,
        stream: bool = True,
        headers: dict[str, str] | None = None,
    ) -> None:
        if not model_id:
            raise ConfigurationError(f"{self.label}: model_id must be a non-empty string")
        self.model_id = model_id
        self.base_url, custom = resolve_base_url(
            base_url,
            env_var=self.base_url_env,
            default=self.default_base_url,
            version=self.api_version,
        )
        self._api_key = resolve_api_key(
            api_key,
            self.env_vars,
            provider=self.label,
            custom_base_url=custom,
            argument=self.key_argument,
        )
        self.client = client
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.streaming = stream
        self.headers = dict(headers or {})
        self._redact = Redactor(self._api_key, *credential_values(self.headers))
        self._cached_url: tuple[str, httpx2.URL] | None = None
        self._timeout_extension: tuple[Any, dict[str, float | None]] | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_id={self.model_id!r}, base_url={self.base_url!r})"

    # -- what subclasses implement -------------------------------------------------------

    @abstractmethod
    def endpoint(self) -> str:
        """The URL to POST to."""

    def auth_headers(self, api_key: str) -> dict[str, str]:
        """The headers that carry ``api_key``. Default: a bearer token, as OpenAI's APIs and
        Bedrock's API keys take it."""
        return {"authorization": f"Bearer {api_key}"}

    def api_headers(self) -> dict[str, str]:
        """Headers the API needs on every request, with or without a key (e.g. a version)."""
        return {}

    async def prepare(self, request: httpx2.Request) -> httpx2.Request:
        """Last look at the request before it is sent (e.g. to sign it). Default: as is."""
        return request

    def effective_max_tokens(self, options: StreamOptions) -> int | None:
        return options.max_tokens if options.max_tokens is not None else self.max_tokens

    # -- what the base derives from them -------------------------------------------------

    def request_body(self, context: Context, options: StreamOptions) -> dict[str, Any]:
        """The JSON body for one call, as :attr:`request_mapping` shapes it."""
        return self.request_mapping(
            context,
            options,
            model=self.model_id,
            stream=self.streaming,
            max_tokens=self.effective_max_tokens(options),
        )

    def parser(self, builder: MessageBuilder, content_type: str) -> WireParser:
        """A fresh :attr:`parser_class` for one response body."""
        return self.parser_class(builder, content_type)

    @classmethod
    def parse_response(
        cls, body: bytes | str, *, content_type: str, status: int = 200
    ) -> AssistantMessage:
        """A whole recorded response of this API (a JSON body, a whole SSE or event-stream
        body, or an error body when ``status`` is outside 2xx) as an
        :class:`~openprogram.types.AssistantMessage`, read by the parser the live adapter
        streams through."""
        parser = cls.parser_class(MessageBuilder(api=cls.api, model=""), content_type)
        return parse_body(parser, body, status=status)

    # -- the request cycle ---------------------------------------------------------------

    async def stream(
        self, context: Context, options: StreamOptions
    ) -> AsyncIterator[ProviderEvent]:
        """Yield ``start``, the reply's block events, then ``done`` or ``error``; never
        raise (see the module docstring)."""
        builder = MessageBuilder(api=self.api, model=self.model_id, scrub=self._scrub)
        yield builder.start()
        try:
            body = self.request_body(context, options)
        except (TypeError, ValueError, RecursionError) as exc:
            yield self._unsendable(builder, exc)
            return
        ended = False
        try:
            async for event in self._exchange(body, builder, options.cancel):
                ended = event.type in ("done", "error")
                yield event
        except Exception as exc:  # the contract: a failed call is an event, never a raise
            if not ended:
                for event in self._failed(builder, exc):
                    yield event

    def _scrub(self, text: str) -> str:
        # The one place every error text passes: mask the secrets first, then cut, so no
        # piece of a secret survives at the cut.
        return clip(self._redact(text))

    def _unsendable(self, builder: MessageBuilder, exc: Exception) -> ProviderEvent:
        hint = " (header values must be ASCII)" if isinstance(exc, UnicodeEncodeError) else ""
        return builder.error(
            f"{self.label}: could not build the request{hint}: {type(exc).__name__}: {exc}",
            details=ErrorDetails(reason="invalid_request"),
        )

    def _failed(self, builder: MessageBuilder, exc: Exception) -> list[ProviderEvent]:
        """The events ending a call that raised: what arrived is closed and kept."""
        events: list[ProviderEvent] = list(builder.close_open_blocks())
        if isinstance(exc, httpx2.HTTPError):
            text = f"{self.label} request failed: {type(exc).__name__}: {exc}"
        else:
            text = f"{self.label}: unexpected failure: {type(exc).__name__}: {exc}"
        events.append(builder.error(text, details=transport_details(exc)))
        return events

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[httpx2.AsyncClient]:
        if self.client is not None:
            yield self.client
            return
        async with httpx2.AsyncClient(timeout=self.timeout) as client:
            yield client

    def _headers(self) -> dict[str, str]:
        """The headers of every request; a later source replaces an earlier one's header of
        the same name in any case (``headers={"Authorization": ...}`` replaces the adapter's
        ``authorization``: one header, not two)."""
        accept = "text/event-stream" if self.streaming else "application/json"
        sources = [{"content-type": "application/json", "accept": accept}, self.api_headers()]
        if self._api_key is not None:
            sources.append(self.auth_headers(self._api_key))
        sources.append(self.headers)
        merged: dict[str, tuple[str, str]] = {}
        for source in sources:
            for name, value in source.items():
                merged[name.lower()] = (name, value)
        return dict(merged.values())

    def _build(self, client: httpx2.AsyncClient, body: dict[str, Any]) -> httpx2.Request:
        """The POST for ``body``, as ``client.build_request`` builds it (the client's
        headers and cookies merged in, a relative URL joined to its ``base_url``), with
        the parsed URL and the timeout kept between calls: a loop sends to the same
        endpoint every round. The client's query parameters are added to the endpoint's
        own (``build_request`` would replace Gemini's ``alt=sse`` with them)."""
        content = json.dumps(body).encode()
        url = self.endpoint()
        cached = self._cached_url
        if cached is None or cached[0] != url:
            cached = self._cached_url = (url, httpx2.URL(url))
        target = cached[1]
        if target.is_relative_url:
            target = client.build_request("POST", target).url
        if client.params:
            target = target.copy_merge_params(client.params)
        timeout = self._timeout_extension
        if timeout is None or timeout[0] is not self.timeout:
            timeout = (self.timeout, httpx2.Timeout(self.timeout).as_dict())
            self._timeout_extension = timeout
        headers = httpx2.Headers(client.headers)
        headers.update(self._headers())
        return httpx2.Request(
            "POST",
            target,
            content=content,
            headers=headers,
            cookies=client.cookies,
            extensions={"timeout": timeout[1]},
        )

    async def _exchange(
        self, body: dict[str, Any], builder: MessageBuilder, cancel: asyncio.Event | None
    ) -> AsyncIterator[ProviderEvent]:
        async with self._client() as client:
            try:
                request = self._build(client, body)
            except (ValueError, RecursionError, httpx2.InvalidURL) as exc:
                yield self._unsendable(builder, exc)
                return
            request = await self.prepare(request)
            # One racer for the whole exchange: the send, then every read of the body.
            racer = _Racer(cancel)
            try:
                response = await racer.read(client.send(request, stream=True))
                if response is _CANCELLED:
                    yield builder.error(f"{self.label} request aborted", aborted=True)
                    return
                try:
                    async for event in self._read(response, builder, racer):
                        yield event
                finally:
                    await response.aclose()
            finally:
                racer.close()

    async def _read(
        self, response: httpx2.Response, builder: MessageBuilder, racer: _Racer
    ) -> AsyncIterator[ProviderEvent]:
        if not response.is_success:
            raw = await _read_error_body(response, racer)
            if raw is _CANCELLED:
                yield builder.error(f"{self.label} request aborted", aborted=True)
                return
            text, details = http_error(self.label, response.status_code, raw, response.headers)
            yield builder.error(text, details=details)
            return
        parser = self.parser(builder, response.headers.get("content-type", ""))
        chunks = response.aiter_bytes()
        try:
            while not parser.finished:
                chunk = await racer.read(anext(chunks, _EOF))
                if chunk is _CANCELLED:
                    for event in parser.abort(f"{self.label} stream aborted"):
                        yield event
                    return
                if chunk is _EOF:
                    break
                for event in parser.feed(chunk):
                    yield event
        finally:
            # Closed here, not left to the garbage collector: a reply that ends before its
            # body does would otherwise cost a thread-safe callback and a task to close it.
            await chunks.aclose()
        for event in parser.finish():
            yield event
