"""A session: one client's own copy of the script, what it was sent and what went wrong;
its report once checked, and what the server keeps of sessions that ended.

The server keeps one per ``/s/{session}/`` URL prefix (and one for URLs without it), so
parallel clients each play the script from its first turn. A named session ends when its
client says so (``DELETE /s/{session}``) or when it has been idle for the server's session
TTL; its report is kept for the server's final report (:class:`EndedSessions`), not its
requests, so a long-running server's memory stays bounded.

A ``one_of`` turn (a weighted choice) is drawn each time it is served, from the session's
own ``random.Random``: its seed comes from the scenario's ``seed:`` and the session's name
(the same name draws the same replies), or is fresh; the session report names it.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from openprogram_sim.models import Turn, WireFault, script_seed, session_seed
from openprogram_sim.trace import Failure, render_failures
from openprogram_sim.wire._client_checks import (
    ClientChecks,
    client_verdicts,
    client_violations,
    violation_failures,
)
from openprogram_sim.wire._openai_responses import ResponseStore
from openprogram_sim.wire._requests import read_messages, read_request
from openprogram_sim.wire._scripted import (
    CREDENTIAL_HEADERS,
    WireRequest,
    mask_headers,
    mask_url,
)
from openprogram_sim.wire._trace import (
    KEPT_TEXT,
    Exchange,
    Round,
    Served,
    SessionTrace,
    build_trace,
    keep_trace,
)

if TYPE_CHECKING:
    from starlette.types import Scope

__all__ = [
    "KEPT_ERRORS",
    "KEPT_LIVE_BYTES",
    "KEPT_LIVE_REQUESTS",
    "KEPT_ROUNDS",
    "KEPT_SESSIONS",
    "KEPT_TIMELINES_BYTES",
    "EndedSessions",
    "RequestBudget",
    "RequestCheck",
    "Session",
    "SessionCheck",
    "SessionReport",
    "TraceCheck",
    "TraceDetails",
]

KEPT_ROUNDS = 500
"""Model requests of one session whose facts (:attr:`SessionReport.rounds`) its report
keeps; later ones are counted."""

KEPT_LIVE_REQUESTS = 20_000
"""Requests the live sessions of one server keep between them (each one's method, URL,
headers, body as sent and what it was served: what :attr:`Session.requests`, the checks and
the trace read). A session whose request finds the budget spent keeps none of its later
requests: they are counted (:attr:`Session.not_kept`), left out of its checks and trace,
and its report says so. A session that ends gives its share back."""

KEPT_LIVE_BYTES = 64 * 1024 * 1024
"""Bytes of request bodies (as sent) the live sessions of one server keep between them;
past it, as past :data:`KEPT_LIVE_REQUESTS`."""

KEPT_ERRORS = 100
"""Failed requests of one session whose message it keeps (:attr:`Session.errors`); later
ones are counted, and its report says how many."""

KEPT_SESSIONS = 1000
"""Reports of ended sessions kept for the final report: the first ones to end, then failing
ones only (up to as many again)."""

KEPT_TIMELINES_BYTES = 32 * 1024 * 1024
"""Bytes (as JSON) of kept traces and request facts over every ended session; a session that
ends past it keeps its verdict, not its timeline (:meth:`SessionReport.without_timeline`)."""

RequestCheck = Callable[[list[dict[str, Any]]], list[Failure]]
"""Checks what a session's client sent: each model call as the fields
:func:`~openprogram_sim.wire.read_request` reads, in call order, to the failures found
(a scenario's ``expect.requests``: :func:`openprogram_sim.play.request_check`)."""

TraceCheck = Callable[[list[dict[str, Any]]], list[Failure]]
"""Checks a session's trace (:meth:`Session.trace`) to the failures found (a scenario's
``expect.trajectory`` and ``expect.properties``)."""

TraceDetails = Callable[[list[dict[str, Any]]], dict[str, Any]]
"""What a session's report keeps about its whole trace, as JSON-safe values, computed when
it is checked (the HTML report's trajectory score and property verdicts:
:func:`openprogram_sim.report.session_details`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionCheck:
    """Everything a served session is checked against besides its script: what its client
    sent (``requests``), its trace (``trace``) and the client invariants (``client``).

    It is itself a :data:`RequestCheck` (calling it checks the requests), so it goes
    wherever a ``check=`` does (:func:`~openprogram_sim.wire.serve`); a plain request check
    there leaves every client invariant on."""

    requests: RequestCheck | None = None
    trace: TraceCheck | None = None
    client: ClientChecks = field(default_factory=ClientChecks)
    details: TraceDetails | None = None
    """Kept in the report as :attr:`SessionReport.details` (the trace is not kept whole)."""

    def __call__(self, fields: list[dict[str, Any]]) -> list[Failure]:
        return self.requests(fields) if self.requests is not None else []


SessionState = Literal["live", "ended", "expired"]


class RequestBudget:
    """What the live sessions of one server may keep between them: ``requests`` requests
    and ``bytes`` bytes of their bodies (:data:`KEPT_LIVE_REQUESTS`,
    :data:`KEPT_LIVE_BYTES`; ``None``: no limit)."""

    def __init__(
        self, requests: int | None = KEPT_LIVE_REQUESTS, bytes: int | None = KEPT_LIVE_BYTES
    ) -> None:
        self.requests = requests
        self.bytes = bytes
        self.kept_requests = 0
        self.kept_bytes = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        """Whether one more request of ``size`` body bytes may be kept (then counted)."""
        with self._lock:
            if self.requests is not None and self.kept_requests >= self.requests:
                return False
            if self.bytes is not None and self.kept_bytes + size > self.bytes:
                return False
            self.kept_requests += 1
            self.kept_bytes += size
            return True

    def give(self, requests: int, size: int) -> None:
        """Give back what a session that ended kept."""
        with self._lock:
            self.kept_requests -= requests
            self.kept_bytes -= size


_JOIN = b"\0".join
"""Joins a header's name and value as a kept request holds them."""


@dataclass(slots=True)
class _Kept:
    """One request as a session keeps it: compact, and as it came (the body as sent, the
    headers in one string, the URL in its parts), made back into a :class:`WireRequest`
    when read, credentials masked then (:meth:`request`). Nothing of it is written or sent
    as it is kept: the trace and the reports read the parsed body, not the headers."""

    index: int
    api: str | None
    stream: bool
    method: str
    server: tuple[str, int] | None
    """The server's host and port, as the request's scope gives them."""
    path: str
    """The full path (a session's ``/s/{name}`` prefix included)."""
    query: bytes
    headers: bytes
    """``name\0value\0...`` as sent (credentials masked when read)."""
    raw: bytes
    parsed: bool
    """The body was JSON (``raw`` parses to it), else ``raw`` is kept as is."""
    arrived: float

    @property
    def body(self) -> Any:
        return json.loads(self.raw) if self.parsed else None

    @property
    def url(self) -> str:
        """The URL the request named, a ``key=`` in its query masked."""
        host, port = self.server or ("127.0.0.1", 0)
        query = self.query
        url = f"http://{host}:{port}{self.path}" + (f"?{query.decode('latin-1')}" if query else "")
        return mask_url(url)

    def _header_items(self) -> list[str]:
        return self.headers.decode("latin-1").split("\0") if self.headers else []

    def request(self) -> WireRequest:
        items = self._header_items()
        headers = mask_headers(dict(zip(items[::2], items[1::2], strict=True)))
        return WireRequest(
            self.index, api=self.api, stream=self.stream, method=self.method, url=self.url,
            headers=headers, body=self.body, raw=b"" if self.parsed else self.raw,
        )  # fmt: skip

    def key_in_body(self) -> str | None:
        """The credential header (or ``?key=``) whose key the body as sent holds, if any
        (the ``no_key_in_body`` client check)."""
        items = self._header_items()
        keys: list[tuple[str, str]] = []
        for k, value in zip(items[::2], items[1::2], strict=True):
            name = k.lower()
            if name in CREDENTIAL_HEADERS and name != "cookie":
                _, sep, rest = value.partition(" ")
                keys.append((name, rest if sep and name.endswith("authorization") else value))
        for part in self.query.decode("latin-1").split("&"):
            name, _, value = part.partition("=")
            if name == "key":
                keys.append(("?key=", value))
        raw = self.raw
        for name, key in keys:
            if len(key) >= 8 and key.encode("latin-1", "replace") in raw:
                return name
        return None


@dataclass(slots=True)
class _Checked:
    failures: list[Failure]
    client: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] | None = None


def _served_facts(served: Served | None, cut: bool) -> dict[str, Any]:
    if served is None:
        return {"status": None, "stop": None, "failure": None, "error": None,
                "retry_after": None, "calls": 0, "final": False}  # fmt: skip
    failure = None
    if served.failed:
        failure = "http" if served.status >= 400 else ("cut" if cut else "stream")
    error = served.error
    if error is not None and len(error) > KEPT_TEXT:
        error = error[:KEPT_TEXT] + "..."
    return {
        "status": served.status, "stop": served.stop_reason, "failure": failure,
        "error": error, "retry_after": served.retry_after,
        "calls": 0 if served.failed else len(served.calls), "final": served.final,
    }  # fmt: skip


class Session:
    """The turns one session has been served, in call order.

    The server's event loop writes; a test thread reads. Reads go through the lock, so a
    test sees whole requests only.
    """

    def __init__(
        self,
        name: str | None,
        script: Sequence[tuple[Turn, WireFault]],
        *,
        cycle: bool = False,
        now: float = 0.0,
        keep_bodies: int | None = None,
        seed: int | None = None,
        budget: RequestBudget | None = None,
    ) -> None:
        self.name = name
        base = script_seed([turn for turn, _ in script])
        self.seed: int = seed if seed is not None else session_seed(base, name)
        """The seed this session draws its ``one_of`` turns from."""
        self.draws: list[tuple[int, int]] = []
        """Each ``one_of`` turn served: (turn number served, option drawn from 0)."""
        self._rng: random.Random | None = None
        """Made when the first ``one_of`` turn is drawn (its state is 2.5 KiB a session)."""
        self.script = script
        self.cycle = cycle
        self.served = 0
        """Turns handed out."""
        self._requests: list[_Kept] = []
        self._calls: list[int] = []
        self._errors: list[str] = []
        self.errors_dropped = 0
        """Failed requests past :data:`KEPT_ERRORS`, counted, their messages not kept."""
        self.count = 0
        """Requests received (kept or not)."""
        self.call_count = 0
        """Model calls received (kept or not)."""
        self.not_kept = 0
        """Requests not kept (past the server's :class:`RequestBudget`): counted only,
        left out of :attr:`requests`, the checks and the trace."""
        self.draws_dropped = 0
        """``one_of`` draws past :data:`KEPT_ROUNDS`, counted, not listed in :attr:`draws`."""
        self.budget = budget
        self._kept_bytes = 0
        self.disconnects = 0
        """Responses the client stopped reading before their end (not a failure)."""
        self.active = 0
        """Requests being answered now (the server's own count; a busy session never
        expires)."""
        self.last_active = now
        """When a request last started or ended (the server's clock)."""
        self.keep_bodies = keep_bodies
        """Requests whose body is kept (``None``: all); later ones are recorded without it."""
        self.bodies_dropped = 0
        """Requests recorded without their body (past ``keep_bodies``)."""
        self._served: dict[int, Served] = {}
        self._whole: dict[int, Any] = {}
        self._cuts: set[int] = set()
        """Requests whose turn was planned to break its stream (a cut, a corrupt chunk,
        ``truncate``, ``hang``, ``raise``)."""
        self.responses = ResponseStore()
        """The Responses it served, for ``previous_response_id``."""
        self._lock = threading.Lock()

    # -- written by the server -----------------------------------------------------------

    def arrive(self, api: str | None, stream: bool, scope: Scope, raw: bytes, parsed: bool) -> int:
        """Note one request and return its number (from 1): ``scope`` its ASGI scope (the
        method, the full path, the query and the headers as the server received them),
        ``raw`` its body as sent (``parsed``: it is JSON). It is kept while the server's
        :class:`RequestBudget` allows (with its body for the first ``keep_bodies``), else
        counted only; what is kept is masked when it is read (:attr:`requests`)."""
        with self._lock:
            return self._arrive(api, stream, scope, raw, parsed)

    def arrive_call(
        self, api: str | None, stream: bool, scope: Scope, raw: bytes
    ) -> tuple[int, tuple[int, Turn, WireFault] | None]:
        """:meth:`arrive` of a well-formed model call (its body JSON) and :meth:`take` of
        its turn, under one hold of the lock: the request's number and the turn (``None``:
        the script is exhausted)."""
        with self._lock:
            index = self._arrive(api, stream, scope, raw, True)
            return index, self._take(index)

    def _arrive(self, api: str | None, stream: bool, scope: Scope, raw: bytes, parsed: bool) -> int:
        # (the lock held)
        self.count += 1
        index = self.count
        keep = self.keep_bodies
        if keep is not None and index > keep:
            raw, parsed = b"", False
            self.bodies_dropped += 1
        size = len(raw)
        full = self.not_kept or (self.budget is not None and not self.budget.take(size))
        if full:
            self.not_kept += 1
            return index
        self._kept_bytes += size
        # the full path: the /s/{session} Mount puts its prefix in root_path, and Starlette
        # keeps it in path too (older versions stripped it from path)
        path, root = scope["path"], scope.get("root_path", "")
        if not path.startswith(root):
            path = root + path
        blob = b"\0".join(map(_JOIN, scope["headers"]))  # name\0value\0name\0value: in C
        kept = _Kept(
            index, api, stream, scope["method"], scope.get("server"), path,
            scope.get("query_string", b""), blob, raw, parsed, time.monotonic(),
        )  # fmt: skip
        self._requests.append(kept)
        return index

    def kept(self, index: int) -> bool:
        """Whether request ``index`` is kept (not past the server's budget)."""
        return index <= len(self._requests)

    def release(self) -> None:
        """Give what this session kept back to the server's budget (it ended)."""
        with self._lock:
            if self.budget is not None:
                self.budget.give(len(self._requests), self._kept_bytes)
                self.budget = None

    def served_with(self, index: int, served: Served) -> None:
        """Note what model call ``index`` was answered with (for the trace)."""
        # No lock: one dict store is whole under the GIL (a reader copies the dict in C
        # before it reads it, and the index was kept under the lock, in arrive)
        if index <= len(self._requests):
            self._served[index] = served

    def whole_body(self, index: int, body: Any) -> None:
        """Note request ``index``'s body with the conversation its
        ``previous_response_id`` ends (what the checks and the trace read instead of the
        body sent)."""
        with self._lock:
            if index <= len(self._requests):
                self._whole[index] = body

    def take(self, index: int) -> tuple[int, Turn, WireFault] | None:
        """The next turn for request ``index`` (a model call): its number (from 1), the
        turn and its fault; ``None`` when the script is exhausted."""
        with self._lock:
            return self._take(index)

    def _take(self, index: int) -> tuple[int, Turn, WireFault] | None:
        # (the lock held)
        self.call_count += 1
        if index <= len(self._requests):
            self._calls.append(index - 1)
        total = len(self.script)
        if self.served >= total and not (self.cycle and total):
            return None
        turn, fault = self.script[self.served % total]
        self.served += 1
        if turn.fault is not None or fault.cut_after is not None or fault.corrupt_chunk:
            self._cuts.add(index)
        option = None
        if turn.one_of:
            if self._rng is None:
                self._rng = random.Random(self.seed)
            turn, option = turn.draw(self._rng)
        if option is not None and len(self.draws) < KEPT_ROUNDS:
            self.draws.append((self.served, option))
        elif option is not None:
            self.draws_dropped += 1
        return self.served, turn, fault

    def fail(self, message: str) -> None:
        with self._lock:
            if len(self._errors) < KEPT_ERRORS:
                self._errors.append(message)
            else:
                self.errors_dropped += 1

    # -- read by tests and the exit report -------------------------------------------------

    @property
    def label(self) -> str:
        return _label(self.name)

    @property
    def requests(self) -> list[WireRequest]:
        """Every request this session received and kept, in arrival order (credentials
        masked; past the server's :class:`RequestBudget` requests are counted in
        :attr:`not_kept` instead)."""
        with self._lock:
            kept = list(self._requests)
        return [k.request() for k in kept]

    @property
    def calls(self) -> list[WireRequest]:
        """The requests that asked for a model turn (well-formed bodies on a model API)."""
        with self._lock:
            kept = [self._requests[i] for i in self._calls]
        return [k.request() for k in kept]

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
        """Whether a request reached it (one that failed before being recorded counts)."""
        with self._lock:
            return bool(self.count or self._errors)

    def request_fields(self) -> list[dict[str, Any]]:
        """Each model call as the fields ``expect.requests`` compares (see
        :func:`~openprogram_sim.wire.read_request`); calls recorded without their body
        (past ``keep_bodies``) are left out."""
        keep = self.keep_bodies
        with self._lock:
            kept = [self._requests[i] for i in self._calls]
            whole = dict(self._whole)
        kept = [r for r in kept if keep is None or r.index <= keep]
        return [
            read_request(r.api or "", _body(r, whole), index=k) for k, r in enumerate(kept, start=1)
        ]

    def trace(self) -> SessionTrace:
        """The session's trace: what its client sent and what it was served, as the
        events our own loop's trace has (see :mod:`openprogram_sim.wire._trace`); calls
        recorded without their body (past ``keep_bodies``) are left out."""
        return build_trace(self._exchanges())

    def _exchanges(self) -> list[Exchange]:
        keep = self.keep_bodies
        with self._lock:
            calls = [self._requests[i] for i in self._calls]
            whole, served = dict(self._whole), dict(self._served)
        return [
            Exchange(
                index=r.index,
                arrived=r.arrived,
                messages=read_messages(r.api or "", _body(r, whole)),
                served=served.get(r.index),
            )
            for r in calls
            if keep is None or r.index <= keep
        ]

    def _checked(self, check: RequestCheck | None, built: SessionTrace) -> _Checked:
        """The request check, the trace check and the client invariants."""
        out = _Checked(failures=check(self.request_fields()) if check is not None else [])
        if isinstance(check, SessionCheck):
            trace_check, client, details = check.trace, check.client, check.details
        else:
            trace_check, client, details = None, ClientChecks(), None
        many_runs = self.name is None and self.cycle
        # (the default session of a cycling server is a load test's many runs in one)
        if trace_check is not None and not many_runs:
            out.failures += trace_check(built.trace)
        if details is not None and not many_runs:
            out.details = details(built.trace)
        if self.name is None:
            return out  # the default session is shared: its requests are many clients'
        with self._lock:
            kept = list(self._requests)
        # (worked out as the check reads them: a request keeps its headers as sent)
        leaks = {r.index: h for r in kept if (h := r.key_in_body()) is not None}
        found = client_violations(built.rounds, leaks, max_retries=client.retries)
        out.failures += violation_failures(found, label=self.label, checks=client)
        out.client = client_verdicts(found, client)
        return out

    def report(
        self, check: RequestCheck | None = None, state: SessionState = "live"
    ) -> SessionReport:
        """This session checked: failed requests, turns never requested and, given a
        request check, what the client sent against it; its trace against a
        :class:`SessionCheck`'s trace check; and the client invariants. The report keeps
        a compact copy of the trace (:func:`~openprogram_sim.wire._trace.keep_trace`) and
        the facts of each request (:meth:`round_facts`), for the HTML report."""
        errors = self.errors
        calls = self.call_count
        unconsumed = self.unconsumed
        failures = [Failure(e) for e in errors]
        if self.errors_dropped:
            failures.append(
                Failure(
                    f"{self.errors_dropped} more failed request(s), past the first "
                    f"{KEPT_ERRORS} listed"
                )
            )
        if unconsumed:
            failures.append(
                Failure(
                    f"{unconsumed} of {len(self.script)} scripted turns were never requested "
                    f"(the client made {calls} model call(s))",
                    "remove them, or check why the client stopped early",
                )
            )
        built = self.trace()
        checked = self._checked(check, built)
        failures += checked.failures
        kept = keep_trace(built.trace)
        return SessionReport(
            name=self.name, state=state, turns=len(self.script), served=self.served,
            unconsumed=unconsumed, model_calls=calls, requests=self.count,
            requests_not_kept=self.not_kept, draws_dropped=self.draws_dropped,
            disconnects=self.disconnects, errors=errors, failures=failures,
            seed=self.seed if self.draws else None, draws=list(self.draws),
            trace=kept.entries, numbers=kept.numbers, trace_dropped=kept.dropped,
            rounds=self.round_facts(built.rounds),
            rounds_dropped=max(0, len(built.rounds) - KEPT_ROUNDS),
            client=checked.client, details=checked.details, duration=self._duration(),
        )  # fmt: skip

    def round_facts(self, rounds: Sequence[Round]) -> list[dict[str, Any]]:
        """What the trace's events cannot say of each model request (the first
        :data:`KEPT_ROUNDS`), as JSON values: ``request`` (its number), ``round``,
        ``api``, ``stream``, ``at`` (seconds since the session's first request),
        ``waited`` (seconds since the previous answer ended), ``status``, ``stop``,
        ``failure`` (``http``: an error status; ``cut``: a stream broken off; ``stream``:
        an error inside a 200 answer; None), ``error``, ``retry_after``, ``retry_of``,
        ``new_user``, ``calls`` (served), ``answered`` (results this request carries for
        each call of the previous answer), ``strays``, ``final`` and ``previous_response``
        (the body named a ``previous_response_id`` the session expanded)."""
        with self._lock:
            requests = {r.index: r for r in self._requests}
            cuts, whole = set(self._cuts), set(self._whole)
        start = rounds[0].exchange.arrived if rounds else 0.0
        out: list[dict[str, Any]] = []
        prev: Served | None = None
        for r in rounds[:KEPT_ROUNDS]:
            ex, served = r.exchange, r.exchange.served
            request = requests.get(ex.index)
            waited = None
            if prev is not None and prev.ended is not None:
                waited = round(ex.arrived - prev.ended, 4)
            out.append(
                {
                    "request": ex.index,
                    "round": r.round,
                    "api": request.api if request is not None else None,
                    "stream": bool(request.stream) if request is not None else None,
                    "at": round(ex.arrived - start, 4),
                    "waited": waited,
                    **_served_facts(served, ex.index in cuts),
                    "retry_of": r.retry_of,
                    "new_user": r.new_user,
                    "answered": [r.answered[i] for i in sorted(r.answered)],
                    "strays": len(r.strays),
                    "previous_response": ex.index in whole,
                }
            )
            prev = served
        return out

    def _duration(self) -> float:
        """Seconds from the first request to the last answer's end (0: none)."""
        with self._lock:
            arrived = [r.arrived for r in self._requests]
            ended = [s.ended for s in list(self._served.values()) if s.ended is not None]
        if not arrived:
            return 0.0
        return round(max([*arrived, *ended]) - min(arrived), 4)

    def assert_consumed(self) -> None:
        """Raise ``AssertionError`` if a request failed or a turn was never served."""
        _assert_consumed(
            self.label, self.errors, self.unconsumed, len(self.script), self.call_count
        )


def _body(request: _Kept, whole: dict[int, Any]) -> Any:
    """``request``'s body as the checks read it: the whole conversation, where noted."""
    found = whole.get(request.index)  # (the kept body is parsed only when it is read)
    return request.body if found is None else found


def _label(name: str | None) -> str:
    return "default session" if name is None else f"session {name!r}"


def _assert_consumed(
    label: str, errors: list[str], unconsumed: int, turns: int, calls: int
) -> None:
    problems = list(errors)
    if unconsumed:
        problems.append(
            f"{unconsumed} of {turns} scripted turns were never requested "
            f"(the session was called {calls} times)"
        )
    if problems:
        raise AssertionError(f"wire server ({label}): " + "; ".join(problems))


@dataclass(slots=True, kw_only=True)
class SessionReport:
    """One session checked: what its client did against the script and the scenario (the
    checks of the server's final report, for one session). ``DELETE /s/{name}`` answers
    with it as JSON (:meth:`to_json`)."""

    name: str | None
    """The session (``None``: the default one, URLs without ``/s/{name}``)."""
    state: SessionState
    """``live`` (still open), ``ended`` (ended by ``DELETE /s/{name}`` or
    :meth:`~openprogram_sim.wire.WireServer.end_session`) or ``expired`` (idle longer
    than the server's session TTL)."""
    turns: int
    """Scripted turns."""
    served: int
    unconsumed: int
    """Scripted turns never requested."""
    model_calls: int
    requests: int
    """Every request, model calls and failed ones."""
    disconnects: int
    """Responses the client stopped reading before their end (not a failure)."""
    errors: list[str]
    """Requests that failed: malformed bodies, calls beyond the script, unknown paths."""
    failures: list[Failure]
    """Everything that did not hold: the errors, turns never requested, and each
    ``expect.requests`` entry that differs (with the diff ``run`` prints)."""
    seed: int | None = None
    """The seed the session drew its ``one_of`` turns from (None: it served none)."""
    draws: list[tuple[int, int]] = field(default_factory=list)
    """Each ``one_of`` turn served: (turn number served, option drawn from 0)."""
    trace: list[dict[str, Any]] = field(default_factory=list)
    """A compact copy of the session's trace for its timeline (see
    :func:`~openprogram_sim.wire._trace.keep_trace`): no ``message_start``, strings cut at
    :data:`~openprogram_sim.wire._trace.KEPT_TEXT` characters, about
    :data:`~openprogram_sim.wire._trace.KEPT_TRACE_BYTES` bytes at most."""
    numbers: list[int] = field(default_factory=list)
    """Each kept entry's position in the whole trace (the ``#N`` the failures name)."""
    trace_dropped: int = 0
    """Entries of the trace past the cap, not kept."""
    rounds: list[dict[str, Any]] = field(default_factory=list)
    """The facts of each model request the events do not carry (retries, waits, failures
    served, results per call): :meth:`Session.round_facts`."""
    rounds_dropped: int = 0
    """Model requests past :data:`KEPT_ROUNDS`, whose facts were not kept."""
    client: dict[str, str] = field(default_factory=dict)
    """Each client invariant: ``held``, ``broken`` or ``off`` (empty: not checked, as on
    the default session)."""
    details: dict[str, Any] | None = None
    """What the :class:`SessionCheck`'s ``details`` made of the whole trace (None: none)."""
    duration: float = 0.0
    """Seconds from the session's first request to its last answer's end."""
    requests_not_kept: int = 0
    """Requests past the server's :class:`RequestBudget` (live sessions keep
    :data:`KEPT_LIVE_REQUESTS` requests between them): counted in :attr:`requests`, left
    out of the checks and the trace."""
    draws_dropped: int = 0
    """``one_of`` draws past :data:`KEPT_ROUNDS`, not listed in :attr:`draws`."""
    timeline_dropped: bool = False
    """The trace and the request facts were not kept (the ended sessions' budget,
    :data:`KEPT_TIMELINES_BYTES`, was spent)."""

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def kept_size(self) -> int:
        """Bytes (as JSON) of the kept trace and request facts."""
        return len(json.dumps([self.trace, self.rounds], ensure_ascii=False, default=str))

    def without_timeline(self) -> SessionReport:
        """This report without its trace and request facts (its verdict, counts and
        details stay)."""
        return replace(
            self, trace=[], numbers=[], rounds=[], timeline_dropped=True,
            trace_dropped=self.trace_dropped + len(self.numbers),
            rounds_dropped=self.rounds_dropped + len(self.rounds),
        )  # fmt: skip

    @property
    def label(self) -> str:
        return _label(self.name)

    def render(self) -> str:
        """The failures as the CLI prints them (empty when it passed), with the seed its
        ``one_of`` turns were drawn from."""
        text = render_failures(self.failures)
        if text and self.seed is not None:
            text += f"\n(one_of turns drawn from seed {self.seed})"
        return text

    def assert_consumed(self) -> None:
        """Raise ``AssertionError`` if a request failed or a turn was never served."""
        _assert_consumed(self.label, self.errors, self.unconsumed, self.turns, self.model_calls)

    def labelled(self) -> list[Failure]:
        """The failures with the session named first (``session 'x': ...``), as the
        server's final report lists them; the default session's are left as they are."""
        prefix = "" if self.name is None else f"{self.label}: "
        return [replace(f, title=prefix + f.title) for f in self.failures]

    def to_json(self) -> dict[str, Any]:
        """The report as the server sends it (plain JSON values); ``seed`` and ``draws``
        only for a session that served a ``one_of`` turn."""
        out: dict[str, Any] = {
            "session": self.name,
            "state": self.state,
            "passed": self.passed,
            "turns": self.turns,
            "served": self.served,
            "unconsumed": self.unconsumed,
            "model_calls": self.model_calls,
            "requests": self.requests,
            "disconnects": self.disconnects,
            "errors": list(self.errors),
            "failures": [
                {"title": f.title, "where": f.where, "detail": f.detail} for f in self.failures
            ],
            "report": self.render(),
        }
        if self.seed is not None:
            out.update(seed=self.seed, draws=[list(d) for d in self.draws])
        if self.requests_not_kept:
            out["requests_not_kept"] = self.requests_not_kept
        return out


class EndedSessions:
    """What the server keeps of sessions that ended, bounded however many there were:
    the report of every failing one (the first ``keep``; the rest are counted), the most
    recent ``keep`` reports by name (``GET /s/{name}`` after the end), the reports of the
    first ``keep`` sessions to end, passing or not, for the final HTML report
    (:attr:`reports`), and totals. A report keeps a compact trace, not the requests."""

    def __init__(self, keep: int = KEPT_SESSIONS, budget: int = KEPT_TIMELINES_BYTES) -> None:
        self.keep = keep
        self.budget = budget
        """Bytes of kept traces and request facts over every report kept."""
        self.kept_bytes = 0
        self.timelines_dropped = 0
        """Reports kept without their timeline (past ``budget``)."""
        self.count = 0
        """Sessions ended."""
        self.passed = 0
        self.model_calls = 0
        self.failing_dropped = 0
        """Failing sessions whose reports were not kept (beyond ``keep``)."""
        self.passing_dropped = 0
        """Passing sessions whose reports are not among :attr:`reports` (beyond ``keep``)."""
        self._failing: list[SessionReport] = []
        self._reports: list[SessionReport] = []
        self._recent: OrderedDict[str | None, SessionReport] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, report: SessionReport) -> None:
        size = report.kept_size
        with self._lock:
            self.count += 1
            self.model_calls += report.model_calls
            kept_failing = False
            if report.passed:
                self.passed += 1
            elif len(self._failing) < self.keep:
                kept_failing = True
            else:
                self.failing_dropped += 1
            if self.count <= self.keep or kept_failing:
                if self.kept_bytes + size > self.budget:
                    report = report.without_timeline()
                    self.timelines_dropped += 1
                else:
                    self.kept_bytes += size
                self._reports.append(report)
            else:
                report = report.without_timeline()  # kept by name only, for GET /s/NAME
                self.passing_dropped += report.passed
            if kept_failing:
                self._failing.append(report)
            self._recent.pop(report.name, None)
            self._recent[report.name] = report
            if len(self._recent) > self.keep:
                self._recent.popitem(last=False)

    def get(self, name: str | None) -> SessionReport | None:
        """The report of the session last ended under ``name``, while it is kept."""
        with self._lock:
            return self._recent.get(name)

    @property
    def failing(self) -> list[SessionReport]:
        """The failing sessions' reports kept, in the order they ended."""
        with self._lock:
            return list(self._failing)

    @property
    def reports(self) -> list[SessionReport]:
        """The reports kept for the final report, in the order the sessions ended: the
        first ``keep`` to end, and every failing one kept after them."""
        with self._lock:
            return list(self._reports)
