"""A session: one client's own copy of the script, what it was sent and what went wrong.

The server keeps one per ``/s/{session}/`` URL prefix (and one for URLs without it), so
parallel clients each play the script from its first turn.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from openprogram_sim.models import Turn
from openprogram_sim.wire._faults import WireFault
from openprogram_sim.wire._requests import read_request
from openprogram_sim.wire._scripted import WireRequest

__all__ = ["Session"]


class Session:
    """The turns one session has been served, in call order.

    The server's event loop writes; a test thread reads. Reads go through the lock, so a
    test sees whole requests only.
    """

    def __init__(
        self, name: str | None, script: Sequence[tuple[Turn, WireFault]], *, cycle: bool = False
    ) -> None:
        self.name = name
        """The ``/s/{name}/`` prefix (``None``: URLs without one)."""
        self.script = script
        self.cycle = cycle
        self.served = 0
        """Turns handed out."""
        self._requests: list[WireRequest] = []
        self._calls: list[int] = []
        self._errors: list[str] = []
        self.disconnects = 0
        """Responses the client stopped reading before their end (not a failure)."""
        self._lock = threading.Lock()

    # -- written by the server -----------------------------------------------------------

    def record(self, request_args: dict[str, Any]) -> WireRequest:
        with self._lock:
            request = WireRequest(len(self._requests) + 1, **request_args)
            self._requests.append(request)
            return request

    def take(self, request: WireRequest) -> tuple[int, Turn, WireFault] | None:
        """The next turn for ``request`` (a model call): its number (from 1), the turn
        and its fault; ``None`` when the script is exhausted."""
        with self._lock:
            self._calls.append(request.index - 1)
            total = len(self.script)
            if self.served >= total and not (self.cycle and total):
                return None
            turn, fault = self.script[self.served % total]
            self.served += 1
            return self.served, turn, fault

    def fail(self, message: str) -> None:
        with self._lock:
            self._errors.append(message)

    # -- read by tests and the exit report -------------------------------------------------

    @property
    def requests(self) -> list[WireRequest]:
        """Every request this session received, in arrival order (credentials masked)."""
        with self._lock:
            return list(self._requests)

    @property
    def calls(self) -> list[WireRequest]:
        """The requests that asked for a model turn (well-formed bodies on a model API)."""
        with self._lock:
            return [self._requests[i] for i in self._calls]

    @property
    def errors(self) -> list[str]:
        """What went wrong: malformed bodies, calls beyond the script, unknown paths."""
        with self._lock:
            return list(self._errors)

    @property
    def unconsumed(self) -> int:
        """Scripted turns never requested."""
        with self._lock:
            return 0 if self.cycle else max(0, len(self.script) - self.served)

    @property
    def used(self) -> bool:
        with self._lock:
            return bool(self._requests)

    def request_fields(self) -> list[dict[str, Any]]:
        """Each model call as the fields ``expect.requests`` compares (see
        :func:`~openprogram_sim.wire.read_request`)."""
        return [
            read_request(r.api or "", r.body, index=k) for k, r in enumerate(self.calls, start=1)
        ]

    def assert_consumed(self) -> None:
        """Raise ``AssertionError`` if a request failed or a turn was never served."""
        problems = self.errors
        if self.unconsumed:
            problems.append(
                f"{self.unconsumed} of {len(self.script)} scripted turns were never requested "
                f"(the session was called {len(self.calls)} times)"
            )
        if problems:
            label = "default session" if self.name is None else f"session {self.name!r}"
            raise AssertionError(f"wire server ({label}): " + "; ".join(problems))
