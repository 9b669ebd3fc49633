"""Requests per second of the wire server (``openprogram-sim serve``) over loopback.

Two servers on the same stack (uvicorn + starlette's router, each in its own process, as
``openprogram-sim serve`` runs), measured by one httpx2 client in this process:

- **hello world** (the floor): ``POST`` a chat body, get ``Hello, world!`` back; the least
  any endpoint on this stack can cost;
- **streamed reply**: ``POST /v1/chat/completions`` with ``"stream": true``, served a scripted
  reply of 10 text pieces (14 SSE events with the role, finish, usage and ``[DONE]`` events),
  each written as its own chunk; the script cycles, and every request is recorded and
  parsed as a normal run's would be.

Each is measured over one connection (sequential requests) and over 10 concurrent
connections; the client reads every body to its end. Each figure is the best of ``--runs``
timed runs after a warm-up, the two servers taking turns run by run (a shared machine's busy
moments then fall on both). Prints a table, then one JSON line.

    python bench/serve_throughput.py [--requests 3000] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any

import httpx2

BODY = json.dumps(
    {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()
PIECES = 10
CHUNK_SIZE = 24
REPLY = "".join(f"piece {i:02d} of the reply, ok. "[:CHUNK_SIZE] for i in range(PIECES))


# --------------------------------------------------------------------------- servers


async def _hello(scope: Any, receive: Any, send: Any) -> None:
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"text/plain"), (b"content-length", b"13")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"Hello, world!"})


class _Hello:
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await _hello(scope, receive, send)


def _serve(kind: str) -> None:
    """Run one server in this process; print its URL, serve until killed."""
    from openprogram_sim.wire import WireServer

    server = WireServer([{"text": REPLY}], chunk_size=CHUNK_SIZE, cycle=True)
    if kind == "hello":
        from starlette.routing import Route, Router

        # the same uvicorn config, socket and shutdown; only the app differs
        server.app.router = Router([Route("/v1/chat/completions", _Hello(), methods=["POST"])])
    print(server.url, flush=True)
    server.run()


def _start(kind: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind], stdout=subprocess.PIPE, text=True
    )
    url = process.stdout.readline().strip()  # type: ignore[union-attr]
    return process, url


# --------------------------------------------------------------------------- client


async def _measure(url: str, requests: int, concurrency: int) -> tuple[float, int]:
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    received = 0
    async with httpx2.AsyncClient(base_url=url, limits=limits, timeout=30) as client:

        async def one() -> None:
            nonlocal received
            async with client.stream("POST", "/v1/chat/completions", content=BODY) as reply:
                async for chunk in reply.aiter_raw():
                    received += len(chunk)
            if reply.status_code != 200:
                raise RuntimeError(f"HTTP {reply.status_code}")

        async def worker(n: int) -> None:
            for _ in range(n):
                await one()

        await asyncio.gather(*(worker(20) for _ in range(concurrency)))  # warm-up
        received = 0
        start = time.perf_counter()
        await asyncio.gather(*(worker(requests // concurrency) for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    done = requests // concurrency * concurrency
    return done / elapsed, received // done


def _interleaved(
    urls: dict[str, str], requests: int, concurrency: int, runs: int
) -> dict[str, Any]:
    """Best of ``runs`` for each server, the servers taking turns run by run, so a busy
    moment of a shared machine falls on both."""
    best: dict[str, float] = dict.fromkeys(urls, 0.0)
    size: dict[str, int] = {}
    for _ in range(runs):
        for kind, url in urls.items():
            rate, size[kind] = asyncio.run(_measure(url, requests, concurrency))
            best[kind] = max(best[kind], rate)
    return {kind: {"rps": round(best[kind]), "bytes": size[kind]} for kind in urls}


# --------------------------------------------------------------------------- report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000, help="requests per timed run")
    parser.add_argument("--runs", type=int, default=3, help="timed runs (the best is kept)")
    parser.add_argument("--serve", choices=["wire", "hello"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve)
        return
    servers = {kind: _start(kind) for kind in ("hello", "wire")}
    rows: dict[str, dict[str, Any]] = {}
    try:
        urls = {kind: url for kind, (_, url) in servers.items()}
        for concurrency in (1, 10):
            measured = _interleaved(urls, args.requests, concurrency, args.runs)
            rows.update({f"{kind}/{concurrency}": row for kind, row in measured.items()})
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait()
    rows = {k: rows[k] for k in ("hello/1", "hello/10", "wire/1", "wire/10")}
    _print(rows)


def _print(rows: dict[str, dict[str, Any]]) -> None:
    print(f"{'server':<44} {'connections':>11} {'req/s':>8} {'bytes/reply':>11} {'÷ floor':>8}")
    labels = {"hello": "hello world (the floor)", "wire": "scripted reply, 10 pieces streamed"}
    for key, row in rows.items():
        kind, concurrency = key.split("/")
        floor = rows[f"hello/{concurrency}"]["rps"]
        ratio = row["rps"] / floor
        print(
            f"{labels[kind]:<44} {concurrency:>11} {row['rps']:>8,} {row['bytes']:>11,} "
            f"{ratio:>8.2f}"
        )
    summary = {
        "bench": "serve_throughput",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "rps": {k: v["rps"] for k, v in rows.items()},
        "streamed_vs_floor": {
            c: round(rows[f"wire/{c}"]["rps"] / rows[f"hello/{c}"]["rps"], 3) for c in ("1", "10")
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
