"""One cassette session: what each request gets (a recorded reply, a fault, a mismatch
answer, or the live service, recorded), over a vcrpy ``Cassette`` that keeps the
interactions, the record mode and the file.

The HTTP libraries are reached through :mod:`._transport`; this module sees a request as
method, URL, headers and body bytes, and answers with a :class:`Reply`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vcr.cassette import Cassette as VcrCassette
from vcr.record_mode import RecordMode
from vcr.request import Request as VcrRequest

from openprogram_sim.cassettes._codec import max_body as limit_of
from openprogram_sim.cassettes._format import EXTRA, SERIALIZER, body_kind, split_events
from openprogram_sim.cassettes._match import DEFAULT_IGNORE, body_of
from openprogram_sim.cassettes._persist import Persister
from openprogram_sim.cassettes._secrets import (
    REDACTED,
    SECRET_ENV_VARS,
    Scrubber,
    known_secrets,
    secret_sources,
)
from openprogram_sim.errors import CassetteError, CassetteMismatchError
from openprogram_sim.trace import IgnoreList, differences, show_value

__all__ = [
    "RECORD_MODES",
    "Cassette",
    "ReplayFault",
    "Reply",
    "resolve_record_mode",
]

RECORD_MODES = ("none", "once", "new_episodes", "all")
"""vcrpy's record modes: ``none`` replays only; ``once`` records a cassette that does not
exist yet and replays one that does; ``new_episodes`` replays what matches and records the
rest; ``all`` records everything again."""


def resolve_record_mode(requested: str | None = None) -> str:
    """The mode to use: ``requested`` (default ``none``), and ``none`` whenever the ``CI``
    environment variable is set (recording needs keys and a network CI must not use)."""
    mode = requested or "none"
    if mode not in RECORD_MODES:
        raise ValueError(f"record mode {mode!r} is not one of: {', '.join(RECORD_MODES)}")
    if os.environ.get("CI", "").strip() not in ("", "0", "false", "False"):
        return "none"
    return mode


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayFault:
    """A fault played on top of a cassette, at the ``turn``-th request of the replay.

    ``cut_after=N``: the recorded reply stops after its first N events (SSE events or
    event-stream frames) and the connection drops. ``status=429`` (or any 4xx/5xx): the
    request is answered with the API's own error for that status (``retry_after`` sets
    ``retry-after``) and the recorded reply is kept for the next request (a retry)."""

    turn: int
    cut_after: int | None = None
    status: int | None = None
    retry_after: float | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        if self.turn < 1:
            raise ValueError(f"ReplayFault turn={self.turn}: turns count from 1")
        if (self.cut_after is None) == (self.status is None):
            raise ValueError("a ReplayFault gives exactly one of cut_after=N or status=CODE")
        if self.status is not None and not 400 <= self.status <= 599:
            raise ValueError(f"ReplayFault status={self.status}: give a 4xx or 5xx status")
        if self.cut_after is not None and self.cut_after < 0:
            raise ValueError(f"ReplayFault cut_after={self.cut_after}: give 0 or more events")

    @classmethod
    def coerce(cls, value: ReplayFault | Mapping[str, Any]) -> ReplayFault:
        return value if isinstance(value, ReplayFault) else cls(**dict(value))


@dataclass(slots=True)
class Reply:
    """A response to serve: status, headers and the body in its recorded chunks."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    chunks: list[tuple[int, float]] = field(default_factory=lambda: [(0, 0.0)])
    """``(offset, seconds after the previous chunk)`` where each chunk starts."""
    latency: float = 0.0
    cut_at: int | None = None
    """Drop the connection once this many bytes are served."""

    def parts(self) -> Iterator[tuple[bytes, float]]:
        """``(chunk, wait before it)``, up to the cut."""
        end = len(self.body) if self.cut_at is None else self.cut_at
        starts = [o for o, _ in self.chunks if o < end] or [0]
        waits = dict(self.chunks)
        for start, stop in zip(starts, [*starts[1:], end], strict=True):
            if stop > start:
                yield self.body[start:stop], waits.get(start, 0.0)


def _api_of(path: str, body: Any) -> str:
    from openprogram_sim.wire import route

    routed = route(path, body)
    return routed[0] if routed is not None else "openai-chat"


def _error_reply(path: str, body: Any, status: int, message: str, **headers: str) -> Reply:
    from openprogram_sim.wire import error_response

    wire = error_response(_api_of(path, body), status, message)
    merged = {**wire.headers, **headers}
    return Reply(status, "", list(merged.items()), wire.body)


def _ignore_advice(path: str) -> str:
    return (
        f"or, if {path} changes from run to run (a date, an id), leave it out of matching: "
        f'ignore: ["{path}"] in a scenario\'s model: {{cassette: ...}} (ignore=[...] in Python)'
    )


class Cassette:
    """A cassette file opened for one session.

    Args:
        path: the cassette file (YAML).
        record_mode: ``none`` (default), ``once``, ``new_episodes`` or ``all``; always
            ``none`` when ``CI`` is set (see :func:`resolve_record_mode`).
        ignore: JSON paths of request-body fields left out of matching (see
            :mod:`._match`); default :data:`~._match.DEFAULT_IGNORE`.
        faults: :class:`ReplayFault` entries (or dicts) played on top of the recording.
        timing: ``instant`` (default) replays every chunk at once; ``recorded`` waits as
            long as the recording did, before the headers and between chunks.
        secrets: more exact values to scrub besides the environment's keys.
        allow_unplayed: recorded interactions never requested do not fail
            :meth:`assert_played` (default: only when ``faults`` are given).
        record_with: how the user records this cassette again, as a replay that does not
            match advises it (e.g. ``openprogram-sim record weather.yaml --record-mode
            all``); default: the ``record_mode`` to pass.
        max_body: the most bytes a compressed body may inflate to, when it is recorded or
            loaded; default: the ``OPENPROGRAM_SIM_CASSETTE_MAX_BODY`` environment
            variable, else 64 MiB.

    Use it as a context manager: it loads on entry and saves what was recorded on exit.
    :meth:`provider` gives openprogram's adapter bound to it; :meth:`client` an
    ``httpx2.AsyncClient`` for any other code; :meth:`patch` routes every ``httpx`` and
    ``httpx2`` client of the process through it (what the pytest fixture does).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        record_mode: str | None = None,
        ignore: Iterable[str] = DEFAULT_IGNORE,
        faults: Iterable[ReplayFault | Mapping[str, Any]] = (),
        timing: str = "instant",
        secrets: Iterable[str] = (),
        allow_unplayed: bool | None = None,
        record_with: str | None = None,
        max_body: int | None = None,
    ) -> None:
        if timing not in ("instant", "recorded"):
            raise ValueError(f"timing {timing!r} is not one of: instant, recorded")
        self.path = Path(path)
        self.record_mode = resolve_record_mode(record_mode)
        self.ignore = IgnoreList(ignore)
        self.faults = {f.turn: f for f in map(ReplayFault.coerce, faults)}
        self.timing = timing
        self.allow_unplayed = bool(self.faults) if allow_unplayed is None else allow_unplayed
        self.record_with = record_with or 'record_mode="all"'
        self.max_body = limit_of(max_body)
        self.scrubber = Scrubber(known_secrets(secrets))
        self.scrubbed_env: set[str] = set()
        """The secret environment variables whose values were scrubbed from request bodies
        (their names are kept in the cassette, for a replay that no longer matches)."""
        self.mismatches: list[str] = []
        """The message of every request the cassette could not answer."""
        self.requests = 0
        """Requests seen so far."""
        self._lock = threading.RLock()
        self._vcr: VcrCassette | None = None

    # -- vcrpy -------------------------------------------------------------------------

    def vcr_config(self) -> dict[str, Any]:
        """What vcrpy's ``Cassette`` is built with: our serializer, persister, matchers
        and scrubbing hooks."""
        return {
            "path": str(self.path),
            "serializer": SERIALIZER,
            "persister": Persister(lambda: self.scrubber.secrets, max_body=self.max_body),
            "record_mode": RecordMode(self.record_mode),
            # all: the session recorded again is the whole cassette (vcrpy would keep the
            # loaded interactions nothing re-recorded, which then fail as never requested)
            "drop_unused_requests": self.record_mode == "all",
            "match_on": (self._match,),
            "before_record_request": self._scrub_request,
            "before_record_response": self._scrub_response,
        }

    def _check_exists(self) -> None:
        if self.record_mode == "none" and not self.path.is_file():
            ci = " (CI is set, so nothing is recorded)" if os.environ.get("CI") else ""
            raise CassetteError(
                f"cassette {self.path} does not exist and the record mode is none{ci}; "
                "record it first: openprogram-sim record SCENARIO --model PROVIDER:MODEL "
                f"--cassette {self.path} --record-mode once (or pytest "
                "--openprogram-record-mode=once)"
            )

    def load(self) -> Cassette:
        """Read the file (when it exists and the mode replays); no patching."""
        self._check_exists()
        self._vcr = VcrCassette.load(**self.vcr_config())
        return self

    def __enter__(self) -> Cassette:
        if self._vcr is None:
            self.load()
        return self

    def __exit__(self, *exc: object) -> None:
        self.save()

    @property
    def vcr(self) -> VcrCassette:
        if self._vcr is None:
            raise CassetteError(f"cassette {self.path} is not open; use `with Cassette(...)`")
        return self._vcr

    def save(self) -> None:
        """Write the cassette if anything was recorded (scrubbed, scanned, atomic)."""
        if self._vcr is not None:
            self.name_scrubbed_env()
            self._vcr._save()  # vcrpy's own save, as its context manager calls it

    def name_scrubbed_env(self) -> None:
        """Before a save of what was recorded: keep the names of :attr:`scrubbed_env` in
        the metadata (``secrets_from_env``), for a replay where one is unset."""
        if self.scrubbed_env and self._vcr is not None and self._vcr.dirty and self.recording:
            known = set(self.metadata.get("secrets_from_env") or [])
            self.describe(secrets_from_env=sorted(known | self.scrubbed_env))

    # -- what a request gets -----------------------------------------------------------

    @property
    def recording(self) -> bool:
        """Whether a request the cassette cannot answer goes to the live service."""
        return not self.vcr.write_protected

    def answer(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> Any:
        """The :class:`Reply` for one request, or the vcrpy request to send live and
        record (:meth:`record` then takes the response)."""
        with self._lock:
            self.requests += 1
            turn = self.requests
            # headers are not matched: the request gets them only if it is recorded
            request = VcrRequest(method, url, body, {})
            self.scrubber.learn(headers)
            fault = self.faults.get(turn)
            if fault is not None and fault.status is not None:
                return self._fault_reply(request, fault)
            played = self._play(request)
            if played is not None:
                reply = self._reply(played)
                if fault is not None and fault.cut_after is not None:
                    reply.cut_at = self._cut_offset(reply, fault.cut_after)
                return reply
            if self.vcr.write_protected:
                return self._mismatch_reply(request, turn)
            request.headers = dict(headers)
            return request

    def _play(self, request: VcrRequest) -> dict[str, Any] | None:
        """The first unplayed recorded response matching ``request`` (marked played), or
        None: vcrpy's ``can_play_response_for`` and ``play_response`` in one pass, which
        skips what was played before comparing anything."""
        vcr_cassette = self.vcr
        if vcr_cassette.record_mode == RecordMode.ALL or not vcr_cassette.rewound:
            return None
        # Stored bodies were scrubbed when recorded. Most requests hold no secret, so the
        # body is matched as sent first; only when that fails is it scrubbed (a key echoed
        # in a prompt) and matched again. Headers are not matched.
        played = self._first_match(request)
        if played is None and not getattr(request, "_op_body_scrubbed", False):
            sent = request.body
            if self._scrub_body_of(request).body != sent:
                played = self._first_match(request)
        return played

    def _first_match(self, request: VcrRequest) -> dict[str, Any] | None:
        vcr_cassette = self.vcr
        counts = vcr_cassette.play_counts
        for index, (stored, response) in enumerate(vcr_cassette.data):
            if counts[index] == 0 and self._match(request, stored):
                counts[index] += 1
                return dict(response)
        return None

    def record(self, request: VcrRequest, response: dict[str, Any]) -> None:
        """Keep a live exchange (vcrpy's response dict plus our extras)."""
        with self._lock:
            self.vcr.append(request, response)

    def _reply(self, response: dict[str, Any]) -> Reply:
        extra = response.get(EXTRA) or {}
        status = response["status"]
        headers = [(k, v) for k, values in response["headers"].items() for v in values]
        chunks = [(int(o), float(a)) for o, a in extra.get("chunks") or [[0, 0.0]]]
        return Reply(
            int(status["code"]),
            str(status.get("message") or ""),
            headers,
            response["body"]["string"] or b"",
            chunks,
            float(extra.get("latency") or 0.0),
        )

    def _cut_offset(self, reply: Reply, events: int) -> int:
        kind = body_kind({k: v for k, v in reply.headers})
        ends = split_events(kind, reply.body)
        return 0 if events == 0 else ends[min(events, len(ends)) - 1]

    def _fault_reply(self, request: VcrRequest, fault: ReplayFault) -> Reply:
        status = int(fault.status or 500)
        message = fault.message or f"injected by the cassette replay (fault at turn {fault.turn})"
        extra = {"x-should-retry": "true"}
        if fault.retry_after is not None:
            extra["retry-after"] = f"{fault.retry_after:g}"
        return _error_reply(request.path, body_of(request.body), status, message, **extra)

    def _mismatch_reply(self, request: VcrRequest, turn: int) -> Reply:
        message = self.explain_mismatch(request, turn)
        self.mismatches.append(message)
        return _error_reply(
            request.path, body_of(request.body), 400, message, **{"x-should-retry": "false"}
        )

    # -- matching ----------------------------------------------------------------------

    def _scrub_request(self, request: VcrRequest) -> VcrRequest:
        """Mask the request's secrets (in place): what is stored, and what vcrpy matches. A
        request read from the file is not scrubbed again."""
        if getattr(request, "_op_scrubbed", False) or getattr(request, "_op_from_file", False):
            return request
        request.uri = self.scrubber.url(request.uri)
        headers = request.headers
        for name, value in self.scrubber.headers(dict(headers)).items():
            if value != headers[name]:
                headers[name] = value
        self._scrub_body_of(request)
        request._op_scrubbed = True
        return request

    def _scrub_body_of(self, request: VcrRequest) -> VcrRequest:
        """Mask the secrets of the request's body (all that matching compares), once."""
        if getattr(request, "_op_body_scrubbed", False) or getattr(request, "_op_from_file", False):
            return request
        raw = request.body if isinstance(request.body, bytes) else None
        text = raw.decode("utf-8", "surrogateescape") if raw else ""
        if raw and self.scrubber.holds_secret(text):
            self.scrubbed_env.update(secret_sources(text))
            request.body = self._scrub_body(raw)
            request._op_body = None  # it may have been parsed before: parse it again
        request._op_body_scrubbed = True
        return request

    def _compared(self, request: VcrRequest) -> Any:
        """The request's body as matching compares it (parsed, ignored fields left out),
        computed once."""
        body = getattr(request, "_op_body", None)
        if body is None:
            parsed = body_of(request.body if isinstance(request.body, bytes) else None)
            body = self.ignore.prune(parsed) if isinstance(parsed, (dict, list)) else parsed
            request._op_body = body
        return body

    def _scrub_body(self, raw: bytes) -> bytes:
        parsed = body_of(raw)
        if isinstance(parsed, (dict, list)):  # each string, so the JSON stays valid
            return json.dumps(self.scrubber.value(parsed), ensure_ascii=False).encode()
        text = raw.decode("utf-8", "surrogateescape")
        return self.scrubber.text(text).encode("utf-8", "surrogateescape")

    def _scrub_response(self, response: dict[str, Any]) -> dict[str, Any]:
        if (response.get(EXTRA) or {}).get("from_file"):
            return response  # scrubbed when it was recorded
        from openprogram_sim.cassettes._scrub import scrub_response

        return scrub_response(response, self.scrubber, max_body=self.max_body)

    def _match(self, r1: VcrRequest, r2: VcrRequest) -> bool:
        """vcrpy's matcher: method, path and body (as compared) are equal. One matcher,
        so a candidate that differs in its method costs no body comparison."""
        if r1.method != r2.method or (r1.path or "/") != (r2.path or "/"):
            return False
        if r1.body == r2.body:  # the same bytes: no need to parse them
            return True
        return bool(self._compared(r1) == self._compared(r2))

    def explain_mismatch(self, request: VcrRequest, turn: int) -> str:
        """Why no recorded interaction answers ``request``: the cassette, the closest
        recorded request and the JSON paths that differ, with both values (scrubbed)."""
        request = self._scrub_request(request)
        where = f"{request.method} {request.path}"
        lines = [f"cassette {self.path}: no recorded interaction matches request {turn} ({where})"]
        closest = self._closest(request)
        diffs: list[tuple[str, str, str]] = []
        if closest is None:
            lines.append("the cassette has no interactions")
        else:
            index, diffs, played = closest
            total = len(self.vcr.data)
            stored = self.vcr.data[index][0]
            state = " (already played)" if played else ""
            lines.append(
                f"closest: interaction {index + 1} of {total}{state}, {stored.method} {stored.path}"
            )
            for label, recorded, sent in diffs[:4]:
                lines.append(f"  {label}: recorded {recorded}, sent {sent}")
            if len(diffs) > 4:
                lines.append(f"  ... and {len(diffs) - 4} more difference(s)")
        advice = None
        if closest is not None:
            advice = self._unset_secret_advice(self.vcr.data[closest[0]][0], request)
            if advice:
                lines.append(advice)
        ignored = ", ".join(self.ignore.patterns) or "nothing"
        lines.append(f"matched on method, path and JSON body (ignored: {ignored})")
        lines.append(self.rerecord_advice())
        fields = [label for label, _, _ in diffs if label.startswith("$")]
        if fields and not advice and not (closest and closest[2]):  # an unplayed one differs
            lines.append(_ignore_advice(fields[0]))
        return "\n".join(lines)

    def _unset_secret_advice(self, stored: VcrRequest, live: VcrRequest) -> str | None:
        """When the recorded request differs where it holds ``<redacted>`` (a secret
        scrubbed by its value), why: the variable that held it is not set here, so the
        request sent is not scrubbed alike. None when no such difference."""
        places = [
            d.path
            for d in differences(self._compared(stored), self._compared(live))
            if isinstance(d.recorded, str) and REDACTED in d.recorded
        ]
        if not places:
            return None
        named = [str(n) for n in self.metadata.get("secrets_from_env") or []]
        where = f"the recording holds {REDACTED} at {places[0]}, a secret scrubbed by its value"
        again = "or keep the secret out of the request and record the cassette again"
        if not named:
            unset = [n for n in SECRET_ENV_VARS if not os.environ.get(n, "").strip()]
            return (
                f"{where} (the cassette does not say which variable held it); of the "
                f"variables whose values are scrubbed, {', '.join(unset) or 'none'} "
                f"{'is' if len(unset) == 1 else 'are'} not set here: set the one that held "
                f"it to the value it had when the cassette was recorded, {again}"
            )
        where += f" (the value of {' or '.join(named)} when it was recorded)"
        unset = [n for n in named if not os.environ.get(n, "").strip()]
        if not unset:
            return (
                f"{where}; the request sent does not hold that value now: set "
                f"{' or '.join(named)} to the value it had when the cassette was recorded, "
                f"{again}"
            )
        return (
            f"{where}; {' and '.join(unset)} {'is' if len(unset) == 1 else 'are'} not set "
            "here, so the request sent cannot be scrubbed alike and does not match: set "
            f"{' and '.join(unset)} to the value it had when the cassette was recorded (in CI, "
            f"from its secret store), {again}"
        )

    def rerecord_advice(self) -> str:
        """What to do when the session no longer matches the recording: record it again."""
        return (
            f"if the session changed, record the cassette again: {self.record_with} "
            "(new_episodes instead of all: record only what it cannot answer)"
        )

    def _closest(self, request: VcrRequest) -> tuple[int, list[tuple[str, str, str]], bool] | None:
        best: tuple[tuple[int, int, int], int, list[tuple[str, str, str]], bool] | None = None
        for index, (stored, _) in enumerate(self.vcr.data):
            diffs = self._diffs(stored, request)
            played = self.vcr.play_counts[index] > 0
            rank = (int(played), len(diffs), index)
            if best is None or rank < best[0]:
                best = (rank, index, diffs, played)
        return None if best is None else (best[1], best[2], best[3])

    def _diffs(self, stored: VcrRequest, live: VcrRequest) -> list[tuple[str, str, str]]:
        out: list[tuple[str, str, str]] = []
        if stored.method != live.method:
            out.append(("method", stored.method, live.method))
        if stored.path != live.path:
            out.append(("path", stored.path, live.path))
        for d in differences(self._compared(stored), self._compared(live)):
            out.append((d.path, show_value(d.recorded), show_value(d.sent)))
        return out

    # -- after the session -------------------------------------------------------------

    @property
    def unplayed(self) -> list[int]:
        """Indexes of recorded interactions never requested (empty while recording: what
        was recorded now counts as played)."""
        if self._vcr is None or self.recording:
            return []
        counts = self._vcr.play_counts
        return [i for i in range(len(self._vcr.data)) if counts[i] == 0]

    def problems(self) -> list[str]:
        """What makes the session fail: unanswered requests, and (unless allowed) recorded
        interactions never requested."""
        out = list(self.mismatches)
        unplayed = self.unplayed
        if unplayed and not self.allow_unplayed:
            shown = ", ".join(str(i + 1) for i in unplayed[:10])
            out.append(
                f"cassette {self.path}: {len(unplayed)} of {len(self.vcr.data)} recorded "
                f"interaction(s) were never requested (interaction {shown}); the client "
                f"stopped early, or asked something else; {self.rerecord_advice()}"
            )
        return out

    def assert_played(self) -> None:
        """Raise :class:`~openprogram_sim.errors.CassetteMismatchError` listing every
        :meth:`problems` entry."""
        problems = self.problems()
        if problems:
            raise CassetteMismatchError("\n\n".join(problems))

    @property
    def metadata(self) -> dict[str, Any]:
        """What the recording said about itself (``model``, ``api``, ``stream``...)."""
        meta = getattr(self._vcr, "_metadata", None) or {}  # read without vcrpy marking it
        info = meta.get("openprogram") if isinstance(meta, dict) else None
        return dict(info) if isinstance(info, dict) else {}

    def describe(self, **info: Any) -> None:
        """Store ``info`` in the cassette's metadata (while recording)."""
        if not self.recording:
            return
        stored = self.vcr.get_metadata("openprogram", {})
        stored.update({k: v for k, v in info.items() if v is not None})
        self.vcr.dirty = True

    # -- clients -------------------------------------------------------------------------

    def client(self, **options: Any) -> Any:
        """An ``httpx2.AsyncClient`` whose requests this cassette answers (no socket is
        opened for a replayed request)."""
        from openprogram_sim.cassettes._transport import async_client

        return async_client(self, **options)

    def provider(self, model: str | None = None, **options: Any) -> Any:
        """openprogram's adapter for ``model`` (default: the one recorded), bound to this
        cassette; when replaying, placeholder credentials and the recorded base URL, so no
        key is needed."""
        from openprogram_sim.cassettes._replay import bound_provider

        return bound_provider(self, model, **options)

    def patch(self) -> Any:
        """A context manager routing every ``httpx``/``httpx2`` transport of the process
        through this cassette (vcrpy's patching, with our stubs); it loads the file on
        entry and saves on exit."""
        from openprogram_sim.cassettes._transport import patched

        return patched(self)

    def _adopt(self, cassette: VcrCassette) -> None:
        self._vcr = cassette
