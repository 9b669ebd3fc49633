"""Memory flat with the work: ``openprogram-sim run`` and ``openprogram-sim serve``.

- **run**: ``openprogram-sim run`` over a library of 1,000 and of 10,000 scenario files
  (``scenarios/`` copied until there are that many), each in a fresh process; the figure is
  that process's peak resident set (``ru_maxrss``) when the command returns, the report
  printed. ``run_rss_ratio`` is 10,000 against 1,000 (goal: ≤ 2).
- **serve**: a wire server (``WireServer``, cycling a one-turn script) in a fresh process,
  driven over loopback by plain keep-alive HTTP/1.1 clients in this one: 10,000 and then
  100,000 chat requests spread round-robin over 1,000 named sessions (``/s/NAME/``), none
  ended; the figure is the server process's resident set (``VmRSS``) after each count.
  ``serve_rss_ratio`` is 100,000 against 10,000 (goal: ≤ 1.5).

``--quick`` divides every count by 10 (100 / 1,000 scenarios, 1,000 / 10,000 requests over
100 sessions) and finishes in well under a minute. ``--profile`` also prints the largest
allocations ``tracemalloc`` still holds after an in-process ``run_paths`` over the library
(what each kept result costs), and after the serve load in the server's process.

    python bench/memory.py [--quick] [--json] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = 4
BODY = json.dumps(
    {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello there"}]}
).encode()


def _library(target: Path, size: int) -> Path:
    """``scenarios/`` copied into ``target`` until it holds ``size`` files."""
    source = sorted((ROOT / "scenarios").rglob("*.yaml"))
    count = copy = 0
    while count < size:
        for path in source:
            if count == size:
                break
            dest = target / f"c{copy}" / path.relative_to(ROOT / "scenarios")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
            count += 1
        copy += 1
    return target


# --------------------------------------------------------------------------- run

_RUN_CHILD = """
import resource, sys
from openprogram_sim.cli import main
try:
    code = main(["run", *sys.argv[1:]])
except SystemExit as exc:
    code = exc.code
sys.stderr.write("RSS_KIB %d\\n" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def run_rss(count: int, extra: tuple[str, ...] = ()) -> float:
    """Peak RSS (MiB) of one fresh ``openprogram-sim run`` over ``count`` scenario files."""
    with tempfile.TemporaryDirectory() as tmp:
        library = _library(Path(tmp) / "lib", count)
        done = subprocess.run(
            [sys.executable, "-c", _RUN_CHILD, str(library), *extra],
            cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    for line in done.stderr.splitlines():
        if line.startswith("RSS_KIB "):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"run over {count} scenarios failed:\n{done.stderr[-2000:]}")


def run_profile(count: int, top: int = 12) -> list[str]:
    """The largest allocations still held after ``run_paths`` over ``count`` files."""
    import tracemalloc

    from openprogram_sim.cli import run_paths

    with tempfile.TemporaryDirectory() as tmp:
        library = _library(Path(tmp) / "lib", count)
        tracemalloc.start(1)
        results = run_paths([library])
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
    stats = snapshot.statistics("lineno")
    total = sum(s.size for s in stats)
    lines = [f"{len(results)} results kept; traced {total / 1024 / len(results):.1f} KiB each"]
    lines += [f"{s.size / 1024:9.1f} KiB  {s.count:7d}  {s.traceback[0]}" for s in stats[:top]]
    return lines


# --------------------------------------------------------------------------- serve

_SERVE_CHILD = """
import sys, threading
from openprogram_sim.wire import WireServer
profile = sys.argv[1] == "1"
if profile:
    import tracemalloc
    tracemalloc.start(1)
server = WireServer([{"text": "Hello from the scripted model."}], cycle=True, session_ttl=None,
                    max_sessions=None)
print(server.url, flush=True)
def _report():
    for line in sys.stdin:
        if line.strip() == "profile" and profile:
            stats = tracemalloc.take_snapshot().statistics("lineno")
            for s in stats[:12]:
                print("PROFILE %9.1f KiB %7d  %s" % (s.size / 1024, s.count, s.traceback[0]))
            print("PROFILE-END", flush=True)
    server.stop()
threading.Thread(target=_report, daemon=True).start()
server.run()
"""


def _vmrss(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _post(conn: socket.socket, host: str, path: str) -> None:
    head = (
        f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"authorization: Bearer x\r\ncontent-length: {len(BODY)}\r\n\r\n"
    ).encode()
    conn.sendall(head + BODY)
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            raise RuntimeError("the server closed the connection")
        buf += chunk
    head_bytes, _, rest = buf.partition(b"\r\n\r\n")
    if not head_bytes.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"unexpected answer: {head_bytes[:200]!r}")
    length = 0
    for line in head_bytes.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            raise RuntimeError("the server closed the connection mid-body")
        rest += chunk


def _drive(url: str, start: int, stop: int, sessions: int) -> None:
    """Requests ``start``..``stop`` (exclusive), request i to session ``i % sessions``,
    over ``CLIENTS`` keep-alive connections taking turns."""
    import threading

    hostport = url.split("//", 1)[1].rstrip("/")
    host, port = hostport.rsplit(":", 1)

    def worker(k: int) -> None:
        with socket.create_connection((host, int(port))) as conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for i in range(start + k, stop, CLIENTS):
                _post(conn, hostport, f"/s/u{i % sessions}/v1/chat/completions")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def serve_rss(
    counts: tuple[int, ...], sessions: int, profile: bool = False
) -> tuple[list[float], list[str]]:
    """The server process's RSS (MiB) after each request count of ``counts`` (cumulative,
    one fresh server), and its tracemalloc top entries at the end with ``profile``."""
    child = subprocess.Popen(
        [sys.executable, "-c", _SERVE_CHILD, "1" if profile else "0"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert child.stdout is not None and child.stdin is not None
    try:
        url = child.stdout.readline().strip()
        done = 0
        out: list[float] = []
        for count in counts:
            _drive(url, done, count, sessions)
            done = count
            time.sleep(0.2)
            out.append(_vmrss(child.pid))
        lines: list[str] = []
        if profile:
            child.stdin.write("profile\n")
            child.stdin.flush()
            for line in child.stdout:
                if line.startswith("PROFILE-END"):
                    break
                lines.append(line[len("PROFILE ") :].rstrip())
        return out, lines
    finally:
        child.stdin.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


# --------------------------------------------------------------------------- all


def measure(quick: bool) -> dict[str, Any]:
    """Every figure, each run in a fresh process (see the module's docstring)."""
    scale = 10 if quick else 1
    small, large = 1000 // scale, 10000 // scale
    run_small, run_large = run_rss(small), run_rss(large)
    sessions = 1000 // scale
    few, many = 10000 // scale, 100000 // scale
    (serve_small,), _ = serve_rss((few,), sessions)
    (_, serve_large), _ = serve_rss((few, many), sessions)
    return {
        "run_scenarios": [small, large],
        "run_rss_1k_mib": round(run_small, 1),
        "run_rss_10k_mib": round(run_large, 1),
        "run_rss_ratio": round(run_large / run_small, 3),
        "serve_requests": [few, many],
        "serve_sessions": sessions,
        "serve_rss_10k_mib": round(serve_small, 1),
        "serve_rss_100k_mib": round(serve_large, 1),
        "serve_rss_ratio": round(serve_large / serve_small, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every count divided by 10")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument(
        "--profile", action="store_true", help="print tracemalloc's top entries too"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    data = measure(args.quick)
    data.update(
        bench="memory", python=platform.python_version(), cpus=os.cpu_count(),
        seconds=round(time.perf_counter() - started, 1),
    )  # fmt: skip
    small, large = data["run_scenarios"]
    few, many = data["serve_requests"]
    print(f"run    {small:>7,} scenarios  {data['run_rss_1k_mib']:8.1f} MiB")
    print(f"run    {large:>7,} scenarios  {data['run_rss_10k_mib']:8.1f} MiB")
    print(f"run    ratio {data['run_rss_ratio']:.2f} (goal <= 2)")
    print(f"serve  {few:>7,} requests   {data['serve_rss_10k_mib']:8.1f} MiB")
    print(f"serve  {many:>7,} requests   {data['serve_rss_100k_mib']:8.1f} MiB")
    print(f"serve  ratio {data['serve_rss_ratio']:.2f} (goal <= 1.5)")
    if args.profile:
        print("\nrun: tracemalloc, what run_paths keeps")
        for line in run_profile(small):
            print("  " + line)
        _, lines = serve_rss((many,), data["serve_sessions"], profile=True)
        print(f"\nserve: tracemalloc after {many:,} requests")
        for line in lines:
            print("  " + line)
    if args.json:
        print(json.dumps(data))


if __name__ == "__main__":
    main()
