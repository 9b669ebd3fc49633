"""The wire server's own cost for one streamed chat call, in process: ``WireApp`` called
as the server calls it, without the HTTP stack around it.

Each request is ``bench/serve_peers.py``'s (``POST /v1/chat/completions`` with
``"stream": true``, the 10-piece reply), handed to the app with a scope that says its body
came whole and a whole-answer writer that takes the answer (what the guarded uvicorn
protocol gives it); the answer is built and dropped, not written. Two states of the
default session:

- **kept**: the first requests, which the session keeps whole (its URL, headers and body,
  what it served) for the trace and the checks;
- **past the budget**: after the live sessions' budget (``KEPT_LIVE_REQUESTS``, 20,000)
  is full, when requests are counted and checked but no longer kept: most of a
  ``serve_peers`` run.

The figure is the best (and the median) of REPEATS batches of BATCH requests, in µs a
request. Cachegrind gives the same states in instructions, which a shared machine does not
disturb (``--count N`` runs N requests after ``--before`` others, with no timing)::

    python bench/wire_app_cost.py                       # the two states, µs a request
    python bench/wire_app_cost.py --json
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        python bench/wire_app_cost.py --count 6000 --before 21000   # minus --count 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from serve_peers import BODY, CHUNK_SIZE, REPLY

from openprogram_sim.wire._app import BODY_IN, WHOLE, WireApp
from openprogram_sim.wire._session import KEPT_LIVE_REQUESTS

BATCH = 2_000
REPEATS = 15
HEADERS = [
    (b"host", b"127.0.0.1"),
    (b"content-type", b"application/json"),
    (b"authorization", b"Bearer x"),
    (b"content-length", str(len(BODY)).encode()),
]
MESSAGE = {"type": "http.request", "body": BODY, "more_body": False}


class _Caller:
    """Calls a fresh server's app (as ``serve_peers`` configures it, with no socket) with
    one request at a time; counts the answers."""

    def __init__(self) -> None:
        self.app = WireApp([{"text": REPLY}], chunk_size=CHUNK_SIZE, cycle=True)
        self.answers = 0
        self.bytes = 0
        self.sent = 0
        """Messages sent step by step (a turn's first answer, before it is made ready)."""

    async def _receive(self) -> dict[str, Any]:
        return MESSAGE

    async def _send(self, message: dict[str, Any]) -> None:
        self.sent += 1

    def _whole(self, scope: Any, status: int, head: Any, body: bytes, length: bool) -> bool:
        if status != 200:
            raise AssertionError(f"the app answered {status}: {body[:300]!r}")
        self.answers += 1
        self.bytes = len(body)
        return True

    def _scope(self) -> dict[str, Any]:
        return {
            "type": "http", "http_version": "1.1", "scheme": "http", "method": "POST",
            "path": "/v1/chat/completions", "root_path": "", "query_string": b"",
            "headers": HEADERS, "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 5000),
            BODY_IN: True, WHOLE: self._whole,
        }  # fmt: skip

    async def run(self, n: int) -> None:
        app, scope, receive, send = self.app, self._scope, self._receive, self._send
        for _ in range(n):
            await app(scope(), receive, send)


def _batches(caller: _Caller, loop: asyncio.AbstractEventLoop, repeats: int) -> list[float]:
    out = []
    sent, answers = caller.sent, caller.answers
    for _ in range(repeats):
        start = time.perf_counter()
        loop.run_until_complete(caller.run(BATCH))
        out.append((time.perf_counter() - start) / BATCH * 1e6)
    if caller.sent != sent or caller.answers - answers != repeats * BATCH:
        raise AssertionError("a timed request was not answered whole at once")
    return out


def measure(repeats: int = REPEATS) -> dict[str, Any]:
    """µs a request, kept and past the budget, each in a fresh server (best and median)."""
    loop = asyncio.new_event_loop()
    try:
        kept_caller = _Caller()
        loop.run_until_complete(kept_caller.run(1_000))  # warm: the answer is made ready
        kept_runs = max(1, min(repeats, (KEPT_LIVE_REQUESTS - 1_000) // BATCH))
        kept = _batches(kept_caller, loop, kept_runs)
        session = kept_caller.app.session(None)
        assert session.not_kept == 0, "the kept batches ran past the budget"
        past_caller = _Caller()
        loop.run_until_complete(past_caller.run(KEPT_LIVE_REQUESTS + 1_000))
        past = _batches(past_caller, loop, repeats)
        assert past_caller.app.session(None).not_kept > repeats * BATCH
    finally:
        loop.close()
    return {
        "python": platform.python_version(),
        "reply_bytes": past_caller.bytes,
        "kept_us": round(min(kept), 3),
        "kept_us_median": round(statistics.median(kept), 3),
        "kept_batches": kept_runs,
        "past_budget_us": round(min(past), 3),
        "past_budget_us_median": round(statistics.median(past), 3),
        "past_budget_batches": repeats,
        "batch": BATCH,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="batches per state")
    parser.add_argument("--count", type=int, help="run N requests untimed (for cachegrind)")
    parser.add_argument("--before", type=int, default=0, help="with --count: N requests first")
    args = parser.parse_args()
    if args.count is not None:
        import gc

        caller = _Caller()
        loop = asyncio.new_event_loop()
        loop.run_until_complete(caller.run(args.before))
        gc.disable()  # a collection falls on one count and not the other: not the app's
        loop.run_until_complete(caller.run(args.count))
        print(f"{caller.answers} answers", file=sys.stderr)
        return
    result = measure(args.repeats)
    if args.json:
        print(json.dumps(result))
        return
    print(f"WireApp, one streamed chat call in process ({result['reply_bytes']} bytes a reply)")
    print(f"  kept:             {result['kept_us']:.2f} µs (median {result['kept_us_median']:.2f})")
    print(
        f"  past the budget:  {result['past_budget_us']:.2f} µs "
        f"(median {result['past_budget_us_median']:.2f})"
    )


if __name__ == "__main__":
    main()
