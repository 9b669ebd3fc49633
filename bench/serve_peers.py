"""Streamed OpenAI chat replies per second: ``openprogram-sim serve`` beside aimock and a
hello-world floor, measured by a light keep-alive client.

Servers, each in its own process, each answering ``POST /v1/chat/completions`` with
``"stream": true`` by the same 10-piece reply (24 characters a piece, as SSE ``data:``
events ending in ``[DONE]``):

- **wire**: ``openprogram-sim serve``'s server (:class:`~openprogram_sim.wire.WireServer`,
  the script cycling, every request counted and checked as usual; the first 20,000 are
  kept whole, the live sessions' budget, and later ones counted only: most of a run), on
  the stack it picks by itself (uvloop + httptools when the ``fast`` extra is installed);
- **wire-pure** (with ``--pure``): the same, told to use the pure-Python stack (asyncio +
  h11), what the default install runs;
- **floor**: uvicorn + starlette's router on the same stack answering the same bytes the
  same way (the head, then the chunked body and its end in one write): the least any
  endpoint on this stack can cost;
- **aimock** (``@copilotkit/aimock``, Node): served the same reply from a fixture, when
  Node and the package are present (``--peers DIR`` or ``$OPENPROGRAM_PEERS``, default
  ``$TMPDIR/openprogram-peers``; ``--install`` runs ``npm install @copilotkit/aimock``
  there). When either is missing the result says why.

The client is a raw asyncio HTTP/1.1 client (a protocol reading the bytes as they come,
no HTTP library; on uvloop when installed) holding 1, 10 or 50 keep-alive connections, each
sending its next request as soon as the previous reply's last chunk arrived. The servers
take turns run by run and the order rotates (a shared machine's busy moments then fall on
all); each figure is the best of the runs (``*_median``: the median), ratios are best over
best. ``cat /proc/loadavg`` is recorded before and after.

    python bench/serve_peers.py [--json] [--quick] [--pure] [--install]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PIECES = 10
CHUNK_SIZE = 24
REPLY = "".join(f"piece {i:02d} of the reply, ok. "[:CHUNK_SIZE] for i in range(PIECES))
USER = "hi"
BODY = json.dumps(
    {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": USER}]}
).encode()
REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
    b"content-type: application/json\r\nauthorization: Bearer x\r\n"
    b"content-length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY
)
CLIENTS = (1, 10, 50)
AIMOCK = "@copilotkit/aimock"


# --------------------------------------------------------------------------- servers


def _serve(kind: str) -> None:
    """Run one server in this process (``wire``, ``wire-pure``, ``floor``): print its
    URL and stack, serve until killed."""
    from openprogram_sim.wire import WireServer

    server = WireServer(
        [{"text": REPLY}], chunk_size=CHUNK_SIZE, cycle=True,
        stack="pure" if kind == "wire-pure" else "auto",
    )  # fmt: skip
    if kind == "floor":
        _floor(server)
        return
    print(server.url, server.stack, flush=True)
    server.run()


def _floor(wire: Any) -> None:
    """The wire server's own stack (its uvicorn config, loop, guarded protocol, socket)
    with starlette's router holding one raw route in place of the app, answering the
    same bytes the same way: the head, then the chunked body and its end in one write."""
    from starlette.routing import Route, Router

    from openprogram_sim.wire import encode

    response = encode("openai-chat", REPLY, model="gpt-4o-mini", chunk_size=CHUNK_SIZE)
    headers = [(k.encode(), v.encode()) for k, v in response.headers.items()]
    body = response.body

    class Endpoint:  # starlette calls a class instance as a raw ASGI app
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            while (await receive()).get("more_body"):
                pass
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})

    wire.app.router = Router([Route("/v1/chat/completions", Endpoint(), methods=["POST"])])
    print(wire.url, wire.stack, flush=True)
    wire.run()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _peers_dir(given: str | None) -> Path:
    return Path(
        given
        or os.environ.get("OPENPROGRAM_PEERS")
        or Path(tempfile.gettempdir()) / "openprogram-peers"
    )


def aimock_command(peers: Path, port: int, fixture: Path) -> list[str] | str:
    """The command that runs aimock on ``port``, or why it cannot run."""
    node = shutil.which("node")
    if node is None:
        return "aimock not available: node is not on PATH (install Node.js 20+)"
    cli = peers / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"
    if not cli.exists():
        return (
            f"aimock not available: {AIMOCK} is not installed in {peers} (run "
            f"`python bench/serve_peers.py --install`, or `npm install {AIMOCK}` there)"
        )
    return [
        node, str(cli), "--port", str(port), "--host", "127.0.0.1", "--fixtures", str(fixture),
        "--chunk-size", str(CHUNK_SIZE), "--log-level", "silent",
    ]  # fmt: skip


def aimock_version(peers: Path) -> str | None:
    package = peers / "node_modules" / "@copilotkit" / "aimock" / "package.json"
    try:
        return str(json.loads(package.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _install(peers: Path) -> None:
    peers.mkdir(parents=True, exist_ok=True)
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is not on PATH: install Node.js 20+ to measure aimock")
    if not (peers / "package.json").exists():
        (peers / "package.json").write_text('{"name": "openprogram-peers", "private": true}\n')
    subprocess.run([npm, "install", "--no-audit", "--no-fund", AIMOCK], cwd=peers, check=True)


class _Servers:
    """The servers under test, each in its own process; :meth:`close` stops them."""

    def __init__(self, kinds: list[str], peers: Path, workdir: Path) -> None:
        self.urls: dict[str, str] = {}
        self.stacks: dict[str, str] = {}
        self.missing: dict[str, str] = {}
        self.pids: dict[str, int] = {}
        self._processes: list[subprocess.Popen[str]] = []
        for kind in kinds:
            if kind == "aimock":
                self._aimock(peers, workdir)
                continue
            process = subprocess.Popen(
                [sys.executable, __file__, "--serve", kind], stdout=subprocess.PIPE, text=True
            )
            self._processes.append(process)
            self.pids[kind] = process.pid
            url, _, stack = process.stdout.readline().strip().partition(" ")  # type: ignore[union-attr]
            self.urls[kind], self.stacks[kind] = url, stack

    def _aimock(self, peers: Path, workdir: Path) -> None:
        fixture = workdir / "aimock.json"
        reply = {"match": {"userMessage": USER}, "response": {"content": REPLY}}
        fixture.write_text(json.dumps({"fixtures": [reply]}))
        port = _free_port()
        command = aimock_command(peers, port, fixture)
        if isinstance(command, str):
            self.missing["aimock"] = command
            return
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        self._processes.append(process)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if process.poll() is not None:
                err = (process.stderr.read() if process.stderr else "")[-400:]
                self.missing["aimock"] = f"aimock not available: it exited ({err.strip()})"
                return
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            except OSError:
                time.sleep(0.05)
                continue
            self.urls["aimock"] = f"http://127.0.0.1:{port}"
            self.pids["aimock"] = process.pid
            self.stacks["aimock"] = f"node {_node_version()}, aimock {aimock_version(peers)}"
            return
        self.missing["aimock"] = "aimock not available: it did not listen within 20 s"

    def close(self) -> None:
        for process in self._processes:
            process.terminate()
        for process in self._processes:
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _node_version() -> str:
    node = shutil.which("node")
    if node is None:
        return "?"
    return subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()


# --------------------------------------------------------------------------- the client


class _Connection(asyncio.Protocol):
    """One keep-alive connection sending the request again as soon as each reply has
    ended (``content-length`` or the chunked body's last chunk), counting replies."""

    def __init__(self, done: asyncio.Future[None], until: list[float]) -> None:
        self.done = done
        self.until = until
        self.buffer = bytearray()
        self.replies = 0
        self.bytes = 0
        self.transport: asyncio.Transport | None = None
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.write(REQUEST)  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        while True:
            end = _reply_end(buffer)
            if end is None:
                return
            if not buffer.startswith(b"HTTP/1.1 200"):
                self._fail(RuntimeError(f"not a 200 answer: {bytes(buffer[:200])!r}"))
                return
            self.replies += 1
            self.bytes += end
            del buffer[:end]
            if time.perf_counter() >= self.until[0]:
                if not self.done.done():
                    self.done.set_result(None)
                return
            self.transport.write(REQUEST)  # type: ignore[union-attr]

    def _fail(self, exc: BaseException) -> None:
        if not self.closing and not self.done.done():
            self.done.set_exception(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionError(f"the server closed a keep-alive connection ({exc})"))


def _reply_end(buffer: bytearray) -> int | None:
    """Where the whole reply at the start of ``buffer`` ends (``None``: not there yet)."""
    head_end = buffer.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    head = bytes(buffer[:head_end]).lower()
    start = head_end + 4
    marker = head.find(b"\r\ncontent-length:")
    if marker >= 0:
        value_end = head.find(b"\r\n", marker + 2)
        length = int(head[marker + 17 : value_end if value_end >= 0 else None])
        return start + length if len(buffer) >= start + length else None
    position = start  # chunked: size line, data, CRLF ... until the 0-size chunk
    while True:
        line_end = buffer.find(b"\r\n", position)
        if line_end < 0:
            return None
        size = int(bytes(buffer[position:line_end]).split(b";")[0], 16)
        if size == 0:
            end = line_end + 4  # no trailers: the final CRLF
            return end if len(buffer) >= end else None
        position = line_end + 2 + size + 2
        if position > len(buffer):
            return None


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds process ``pid`` used so far (0 where /proc is missing)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _run(
    url: str, clients: int, seconds: float, pid: int | None = None
) -> tuple[float, int, float]:
    """Replies per second over ``clients`` connections for ``seconds`` (after a warm-up),
    the bytes of one reply, and the server's CPU microseconds per reply (``pid``'s)."""
    host, port = url.removeprefix("http://").split(":")
    loop = asyncio.get_running_loop()
    for phase, length in (("warm", min(0.3, seconds / 3)), ("timed", seconds)):
        until = [float("inf")]
        dones = [loop.create_future() for _ in range(clients)]
        conns = []
        for done in dones:
            _, conn = await loop.create_connection(
                functools.partial(_Connection, done, until), host, int(port)
            )
            conns.append(conn)
        start, cpu = time.perf_counter(), _cpu_seconds(pid)
        until[0] = start + length
        await asyncio.gather(*dones)
        elapsed, cpu = time.perf_counter() - start, _cpu_seconds(pid) - cpu
        for conn in conns:
            conn.closing = True  # the end of the run, not a failure
            if conn.transport is not None:
                conn.transport.close()
        if phase == "timed":
            replies = max(sum(c.replies for c in conns), 1)
            return replies / elapsed, sum(c.bytes for c in conns) // replies, cpu / replies * 1e6
    raise AssertionError("unreachable")


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _loadavg() -> str | None:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return None


# --------------------------------------------------------------------------- measure


def measure(quick: bool, *, pure: bool = False, peers: str | None = None) -> dict[str, Any]:
    """Every server at 1, 10 and 50 clients, runs interleaved: the rows (see the module
    doc). ``pure`` adds the pure-Python stack's server (``wire-pure``)."""
    runs, seconds = (2, 0.6) if quick else (5, 1.2)
    kinds = ["wire", "floor", "aimock"] + (["wire-pure"] if pure else [])
    rates: dict[str, dict[int, list[float]]] = {}
    cpus: dict[str, dict[int, list[float]]] = {}
    sizes: dict[str, int] = {}
    result: dict[str, Any] = {"serve_load_before": _loadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        servers = _Servers(kinds, _peers_dir(peers), Path(tmp))
        try:
            present = [k for k in kinds if k in servers.urls]
            rates = {k: {c: [] for c in CLIENTS} for k in present}
            cpus = {k: {c: [] for c in CLIENTS} for k in present}
            loop = _new_loop()
            try:
                for clients in CLIENTS:
                    for run in range(runs):
                        order = present[run % len(present) :] + present[: run % len(present)]
                        for kind in order:
                            rate, size, cpu = loop.run_until_complete(
                                _run(servers.urls[kind], clients, seconds, servers.pids[kind])
                            )
                            rates[kind][clients].append(rate)
                            cpus[kind][clients].append(cpu)
                            sizes[kind] = size
            finally:
                loop.close()
        finally:
            servers.close()
    result["serve_load_after"] = _loadavg()
    result["serve_stack"] = servers.stacks.get("wire")
    result["serve_client"] = "raw asyncio HTTP/1.1 protocol in one process, on " + (
        "uvloop" if _has_uvloop() else "asyncio"
    )
    names = {"wire": "serve", "floor": "serve_floor", "aimock": "aimock", "wire-pure": "serve_pure"}
    for kind, by_clients in rates.items():
        result[f"{names[kind]}_reply_bytes"] = sizes[kind]
        for clients, values in by_clients.items():
            result[f"{names[kind]}_rps_c{clients}"] = round(max(values))
            result[f"{names[kind]}_rps_c{clients}_median"] = round(statistics.median(values))
            used = min(cpus[kind][clients])
            result[f"{names[kind]}_cpu_us_c{clients}"] = round(used, 1) if used else None
    if "aimock" in servers.missing:
        result["aimock"] = servers.missing["aimock"]
    else:
        result["aimock"] = servers.stacks.get("aimock")
    for clients in CLIENTS:
        ours = rates.get("wire", {}).get(clients)
        if not ours:
            continue
        for peer, key in (("aimock", "aimock"), ("floor", "floor"), ("wire-pure", "pure")):
            theirs = rates.get(peer, {}).get(clients)
            if theirs:
                result[f"serve_x_{key}_c{clients}"] = round(max(ours) / max(theirs), 2)
                paired = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
                result[f"serve_x_{key}_c{clients}_median"] = round(paired, 2)
                mine, other = min(cpus["wire"][clients]), min(cpus[peer][clients])
                if mine and other:  # their CPU per reply over ours: > 1, we use less
                    result[f"serve_cpu_x_{key}_c{clients}"] = round(other / mine, 2)
    return result


def _has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def _print(result: dict[str, Any]) -> None:
    print(f"load average: before {result['serve_load_before']}, after {result['serve_load_after']}")
    print(f"wire stack: {result['serve_stack']}; aimock: {result['aimock']}")
    print(f"client: {result['serve_client']}")
    names = [
        ("serve", "openprogram-sim serve"),
        ("serve_pure", "serve, pure-Python stack"),
        ("serve_floor", "floor (uvicorn+starlette, same bytes)"),
        ("aimock", "aimock"),
    ]
    print(f"{'server':<40} {'c1':>14} {'c10':>14} {'c50':>14}   (best / median req/s)")
    for key, label in names:
        if f"{key}_rps_c1" not in result:
            continue
        cells = [
            f"{result[f'{key}_rps_c{c}']:,}/{result[f'{key}_rps_c{c}_median']:,}" for c in CLIENTS
        ]
        print(f"{label:<40} {cells[0]:>14} {cells[1]:>14} {cells[2]:>14}")
    for key in ("aimock", "floor", "pure"):
        if f"serve_x_{key}_c1" in result:
            cells = [
                f"{result[f'serve_x_{key}_c{c}']:.2f}/{result[f'serve_x_{key}_c{c}_median']:.2f}"
                for c in CLIENTS
            ]
            print(f"{'serve ÷ ' + key:<40} {cells[0]:>14} {cells[1]:>14} {cells[2]:>14}")
    print(f"{'server CPU per reply':<40} {'c1':>14} {'c10':>14} {'c50':>14}   (µs, least)")
    for key, label in names:
        if f"{key}_cpu_us_c1" in result:
            cells = [str(result[f"{key}_cpu_us_c{c}"]) for c in CLIENTS]
            print(f"{label:<40} {cells[0]:>14} {cells[1]:>14} {cells[2]:>14}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="2 short runs instead of 5")
    parser.add_argument("--pure", action="store_true", help="also the pure-Python stack")
    parser.add_argument("--peers", help="where aimock is installed (node_modules inside)")
    parser.add_argument("--install", action="store_true", help="npm install aimock, then measure")
    parser.add_argument("--serve", choices=["wire", "wire-pure", "floor"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve)
        return
    if args.install:
        _install(_peers_dir(args.peers))
    result = measure(args.quick, pure=args.pure, peers=args.peers)
    result.update(bench="serve_peers", python=platform.python_version(), cpus=os.cpu_count())
    if args.json:
        print(json.dumps(result))
    else:
        _print(result)


if __name__ == "__main__":
    main()
