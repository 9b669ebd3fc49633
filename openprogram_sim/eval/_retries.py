"""Retries of a sample's model calls on HTTP 429 and 5xx, below openprogram's adapters
(which report a 429 and its ``retry-after`` but never retry) and above the sample's
cassette.

A rejected attempt is waited out (``retry-after-ms``, else ``retry-after`` in seconds or as
an HTTP date, else exponential backoff with jitter) and sent again, at most
``max_retries`` times. What the loop sees is what the cassette keeps as its interactions:
a call that succeeded on a retry is one exchange, so the cassette replays and distills as
a session that was never refused; each refused attempt is kept in the cassette's metadata
under ``retries`` (the call, the status, what the server asked, the seconds waited). A
call still refused after the last retry reaches the loop (and the cassette) as it came.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2

from openprogram_sim.cassettes import Cassette

__all__ = ["RetryPolicy", "RetryingTransport", "retrying_client"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """When and how long a sample's refused model call is retried."""

    max_retries: int = 4
    """Retries of one call (0: none)."""
    base: float = 0.5
    """Seconds of the first backoff (without ``retry-after``), doubled each retry."""
    cap: float = 30.0
    """The longest backoff."""
    max_wait: float = 60.0
    """The longest ``retry-after`` honoured: a server that asks for more is not retried
    (its answer reaches the loop)."""

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"--max-retries must be 0 or more, got {self.max_retries}")

    def retryable(self, status: int, headers: Mapping[str, str]) -> bool:
        if headers.get("x-should-retry", "").lower() == "false":
            return False
        return status == 429 or 500 <= status <= 599

    def wait(
        self, headers: Mapping[str, str], retry: int, now: float, draw: Callable[[], float]
    ) -> tuple[float | None, str]:
        """Seconds to wait before retry number ``retry`` (from 1) and why; None when the
        server asked for longer than :attr:`max_wait`."""
        asked = asked_wait(headers, now)
        if asked is not None:
            said = asked[1]
            return (asked[0] if asked[0] <= self.max_wait else None), said
        ceiling = min(self.cap, self.base * 2 ** (retry - 1))
        # equal jitter: half the ceiling, plus up to the other half drawn at random
        return ceiling / 2 + draw() * ceiling / 2, f"backoff (up to {ceiling:g} s)"


def asked_wait(headers: Mapping[str, str], now: float) -> tuple[float, str] | None:
    """The seconds a reply's ``retry-after-ms`` (first) or ``retry-after`` (seconds, or an
    HTTP date) asks for, and the header as sent."""
    millis = headers.get("retry-after-ms", "").strip()
    if millis:
        try:
            return max(float(millis) / 1000, 0.0), f"retry-after-ms: {millis}"
        except ValueError:
            pass
    value = headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(float(value), 0.0), f"retry-after: {value}"
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - now, 0.0), f"retry-after: {value}"


class RetryingTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport sending each request through ``cassette`` (its own
    client), retrying a 429 or 5xx under ``policy``; :attr:`log` holds each retry, and the
    cassette's metadata ``retries`` the same."""

    def __init__(
        self,
        cassette: Cassette,
        policy: RetryPolicy,
        *,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.cassette = cassette
        self.policy = policy
        self.log: list[dict[str, Any]] = []
        self._inner = cassette.client()
        self._sleep = sleep
        self._draw = draw
        self._calls = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await request.aread()  # sent again as read: a retry needs the body
        self._calls += 1
        call = self._calls
        retry = 0
        while True:
            before = {id(entry) for entry in self.cassette.vcr.data}
            response: httpx2.Response = await self._inner.send(request, stream=True)
            if retry >= self.policy.max_retries or not self.policy.retryable(
                response.status_code, response.headers
            ):
                return response
            wait, why = self.policy.wait(response.headers, retry + 1, time.time(), self._draw)
            if wait is None:
                return response  # asked for longer than we wait: the loop sees it
            body = await response.aread()
            await response.aclose()  # the cassette records the attempt as it closes
            retry += 1
            self._forget(before, response.status_code)
            self.log.append(
                {
                    "call": call, "retry": retry, "status": response.status_code,
                    "asked": why, "waited": round(wait, 3),
                    "method": request.method, "path": request.url.path,
                    "body": body[:300].decode("utf-8", "replace"),
                }
            )  # fmt: skip
            self.cassette.describe(retries=list(self.log))
            await self._sleep(wait)

    def _forget(self, before: set[int], status: int) -> None:
        """Take the refused attempt out of the cassette's interactions (the loop never
        saw it; it is kept in the metadata instead)."""
        data = self.cassette.vcr.data
        for index in range(len(data) - 1, -1, -1):
            entry = data[index]
            if id(entry) not in before and int(entry[1]["status"]["code"]) == status:
                del data[index]
                return

    async def aclose(self) -> None:
        await self._inner.aclose()


def retrying_client(cassette: Cassette, policy: RetryPolicy, **options: Any) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` answered by ``cassette``, retrying under ``policy``."""
    return httpx2.AsyncClient(transport=RetryingTransport(cassette, policy), **options)
