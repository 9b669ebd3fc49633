"""``openprogram-sim serve SCENARIO``: the scenario's model turns over real HTTP, as every
provider API, until Ctrl-C; then what the clients did, checked like ``run`` checks it."""

from __future__ import annotations

import argparse
import ipaddress
import signal
import sys
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any, TextIO

from openprogram_sim.cli._arguments import add_pythonpath
from openprogram_sim.errors import ScenarioError

__all__ = ["add_parser", "banner", "command", "exposure_warning"]

# The server's own defaults (openprogram_sim.wire._app), restated so that building the
# CLI's parser does not load the server; a test holds the two equal.
DEFAULT_SESSION_TTL = 600.0
DEFAULT_MAX_SESSIONS = 10_000
DEFAULT_MAX_BODY = 16 * 1024 * 1024
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_BODY_MIN_RATE = 1024
DEFAULT_MAX_CONNECTIONS = 512
CLIENT_CHECKS = (
    "answered_once",
    "no_unknown_result",
    "retry_after",
    "max_retries",
    "no_key_in_body",
    "no_request_after_final",
)
DEFAULT_MAX_RETRIES = 4


def banner(server: Any, title: str, turns: int) -> str:
    """The start-up text: where each API's clients point (the official SDKs and
    openprogram's adapters take the same base URL, or read it from the same variable)."""
    url = server.url
    rows = [
        ("OpenAI (Chat, Responses)", server.base_url("openai"), "base_url or OPENAI_BASE_URL"),
        ("Anthropic", server.base_url("anthropic"), "base_url or ANTHROPIC_BASE_URL"),
        ("Gemini", server.base_url("gemini"), "base_url or GOOGLE_GEMINI_BASE_URL"),
        ("Bedrock", server.base_url("bedrock"), "endpoint_url (boto3), base_url"),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [
        f"openprogram-sim serve: {title} ({turns} scripted turn{'s' if turns != 1 else ''})",
        f"listening on {url}  ({server.stack}; Ctrl-C to stop); base URLs (SDKs and "
        "openprogram alike):",
        *(f"  {name.ljust(width)}  {link}  {what}" for name, link, what in rows),
        f"sessions: {url}/s/NAME/... (e.g. {url}/s/NAME/v1) plays a fresh copy of the "
        f"script per NAME; GET {url}/s/NAME/trace gives a live one's trace (JSON)",
        f"  DELETE {url}/s/NAME ends one and answers with its report (GET: so far); "
        f"{_limits(server)}",
    ]
    return "\n".join(lines)


def exposure_warning(host: str) -> str | None:
    """The warning ``serve`` prints when ``host`` is not a loopback address (None when it
    is): what other machines can then reach, and how to stay on this one."""
    if host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host.strip("[]")).is_loopback:
            return None
    except ValueError:
        pass  # a host name: it may resolve to any interface
    every = host.strip("[]") in ("", "0.0.0.0", "::")
    where = "every network interface" if every else f"{host}, which other machines may reach"
    return (
        f"openprogram-sim serve: warning: --host {host or repr(host)} listens on {where}: "
        "anyone who can reach it can play the scenario's script and read the session "
        "reports (the requests clients sent), with no authentication; use --host 127.0.0.1 "
        "(the default) to stay on this machine"
    )


def _limits(server: Any) -> str:
    ttl, cap = server.app.session_ttl, server.app.max_sessions
    idle = "never end when idle" if ttl is None else f"end after {ttl:g} s idle"
    live = "no cap on live sessions" if cap is None else f"at most {cap} live"
    return f"sessions {idle}, {live}"


def command(args: argparse.Namespace) -> int:
    from openprogram_sim.play import scenario_server
    from openprogram_sim.scenario import load_scenario

    try:
        scenario = load_scenario(args.scenario, pythonpath=args.pythonpath)
    except ScenarioError as exc:
        print(f"openprogram-sim: {exc}", file=sys.stderr)
        return 2
    if not isinstance(scenario.model, list):
        print(
            f"openprogram-sim serve: {args.scenario} replays a cassette (model: {{cassette: "
            "...}); serve plays scripted turns: turn the cassette into them with "
            f"`openprogram-sim distill {scenario.model.cassette} --scenario {args.scenario}`",
            file=sys.stderr,
        )
        return 2
    problem = _output_problem(args)
    if problem is not None:
        print(f"openprogram-sim serve: {problem}", file=sys.stderr)
        return 2
    log = None if args.quiet else _printer(sys.stderr)
    details = None
    if args.report or args.junitxml:
        from openprogram_sim.report import session_details

        details = session_details(scenario)
    try:
        server = scenario_server(
            scenario,
            host=args.host,
            port=args.port,
            chunk_size=args.chunk_size,
            cycle=args.cycle,
            log=log,
            session_ttl=args.session_ttl or None,
            max_sessions=args.max_sessions or None,
            max_body=args.max_body_bytes or None,
            header_timeout=args.header_timeout or None,
            body_timeout=args.body_timeout or None,
            body_min_rate=args.body_min_rate or None,
            max_connections=args.max_connections or None,
            client_checks=_client_checks(args),
            details=details,
        )
    except OSError as exc:
        print(f"openprogram-sim: {exc}", file=sys.stderr)
        return 2
    warning = exposure_warning(args.host)
    if warning is not None:
        print(warning, file=sys.stderr, flush=True)
    with _stop_on_signals(server):  # before the banner: a client may act on it at once
        print(banner(server, scenario.scenario, len(server.app.script)), flush=True)
        server.run()
    return _report(server, sys.stdout, args, scenario)


def _output_problem(args: argparse.Namespace) -> str | None:
    """Why a file ``--report`` or ``--junitxml`` names cannot be written (None: it can),
    found before serving, not after the clients ran."""
    from pathlib import Path

    for flag, value, name in (
        ("--report", args.report, "report.html"),
        ("--junitxml", args.junitxml, "junit.xml"),
    ):
        if value is None:
            continue
        path = Path(value)
        if path.is_dir():
            return f"{flag} {value} is a directory; give the file to write, e.g. {path / name}"
        parent = next((p for p in path.absolute().parents if p.exists()), None)
        if parent is not None and not parent.is_dir():
            return f"{flag} {value}: {parent} is a file, not a directory"
    return None


def _client_checks(args: argparse.Namespace) -> Any:
    from openprogram_sim.wire import ClientChecks

    return ClientChecks(off=frozenset(args.no_check), max_retries=args.max_retries)


def _printer(stream: TextIO) -> Any:
    def log(line: str) -> None:
        print(line, file=stream, flush=True)

    return log


@contextmanager
def _stop_on_signals(server: Any) -> Generator[None, None, None]:
    """Ctrl-C and SIGTERM end the server gracefully, once; the report still prints
    (uvicorn's own handling would raise the signal again after shutting down)."""

    def stop(signum: int, frame: Any) -> None:
        server.request_stop()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _report(server: Any, out: TextIO, args: argparse.Namespace, scenario: Any) -> int:
    report = server.check()
    sessions = ", ".join(report.checked)
    calls = report.model_calls
    print(f"\nopenprogram-sim serve: {calls} model call(s); checked: {sessions}", file=out)
    if report.passed:
        print(
            "PASS every scripted turn was served; expect.requests, expect.trajectory, "
            "expect.properties and the client checks hold",
            file=out,
        )
        status = 0
    else:
        print(f"FAIL {len(report.failures)} problem(s)", file=out)
        print(report.render(), file=out)
        status = 1
    if args.coverage:
        print(f"\n{_coverage(report).table()}", file=out)
    written = _write_files(report, args, scenario, out)
    return status if written else 2


def _coverage(report: Any) -> Any:
    """The client behaviours the sessions showed (each named session, and the default
    one when it had requests)."""
    from openprogram_sim.coverage import WireCoverage, wire_behaviours

    coverage = WireCoverage()
    for one in report.sessions:
        if one.name is not None or one.requests:
            coverage.add(one.label, wire_behaviours(one))
    return coverage


def _write_files(report: Any, args: argparse.Namespace, scenario: Any, out: TextIO) -> bool:
    """Write ``--report`` and ``--junitxml``; False when one could not be written."""
    from openprogram_sim.report import write_session_junit, write_session_report

    ok = True
    for flag, value, write in (
        ("--report", args.report, write_session_report),
        ("--junitxml", args.junitxml, write_session_junit),
    ):
        if value is None:
            continue
        try:
            path = write(value, report, scenario=scenario.scenario, scenario_path=args.scenario)
        except OSError as exc:
            print(f"openprogram-sim serve: {flag}: cannot write {value}: {exc}", file=sys.stderr)
            ok = False
            continue
        what = "report" if flag == "--report" else "JUnit XML"
        print(f"{what}: {path} ({len(report.sessions)} session(s))", file=out)
    return ok


def _non_negative(kind: type[float] | type[int]) -> Any:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'a number' if kind is float else 'a whole number'}"
            ) from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"{text} is negative; use 0 for no limit")
        return value

    return parse


def _add_limit(parser: Any, flag: str, default: float, metavar: str, help: str) -> None:
    """A server limit: a number of ``default``'s type, 0 for none, a negative one refused."""
    kind = int if isinstance(default, int) else float
    parser.add_argument(flag, type=_non_negative(kind), default=default, metavar=metavar, help=help)


def add_parser(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve a scenario's model turns over HTTP as the OpenAI, Anthropic, Gemini and "
        "Bedrock APIs",
        description="Serve SCENARIO's model turns, one per request, to any client: the "
        "official SDKs, other agent frameworks, openprogram's adapters. At exit (Ctrl-C), "
        "turns never requested, expect.requests, and on each /s/NAME session's trace "
        "expect.trajectory, expect.properties and the client invariants are checked (exit "
        "status 1 on failure); --report, --junitxml and --coverage show every session.",
    )
    serve.add_argument("scenario", help="the scenario file")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; any other is "
        "reachable by other machines, unauthenticated, and serve warns)",
    )
    serve.add_argument(
        "--port", type=int, default=8000, help="port to listen on (0: any free port)"
    )
    serve.add_argument(
        "--chunk-size", type=int, default=24, metavar="N", help="characters per streamed piece"
    )
    serve.add_argument("-q", "--quiet", action="store_true", help="no line per request")
    serve.add_argument(
        "--cycle",
        action="store_true",
        help="start the script over when it runs out (load tests; nothing is left unserved)",
    )
    _add_limit(
        serve, "--session-ttl", DEFAULT_SESSION_TTL, "SECONDS",
        "end a /s/NAME session idle this long; its report is kept for the one at exit "
        f"(default {DEFAULT_SESSION_TTL:g}; 0: never)",
    )  # fmt: skip
    _add_limit(
        serve, "--max-sessions", DEFAULT_MAX_SESSIONS, "N",
        "refuse a request that would open more live /s/NAME sessions (HTTP 503; "
        f"default {DEFAULT_MAX_SESSIONS}; 0: no cap)",
    )  # fmt: skip
    _add_limit(
        serve, "--max-body-bytes", DEFAULT_MAX_BODY, "N",
        "refuse a request body longer than N bytes (HTTP 413, while it is read; "
        f"default {DEFAULT_MAX_BODY} = 16 MiB; 0: no cap)",
    )  # fmt: skip
    _add_limit(
        serve, "--header-timeout", DEFAULT_HEADER_TIMEOUT, "SECONDS",
        "close a connection that has not sent a whole request head this long after it "
        "opened or after its last answer (HTTP 408 when part of one came; "
        f"default {DEFAULT_HEADER_TIMEOUT:g}; 0: no limit)",
    )  # fmt: skip
    _add_limit(
        serve, "--body-timeout", DEFAULT_BODY_TIMEOUT, "SECONDS",
        "answer HTTP 408 to a request body that goes this long without a byte (and close "
        f"the connection; default {DEFAULT_BODY_TIMEOUT:g}; 0: no limit)",
    )  # fmt: skip
    _add_limit(
        serve, "--body-min-rate", DEFAULT_BODY_MIN_RATE, "BYTES",
        "bytes a second a request body must average beyond its first --body-timeout "
        f"seconds (HTTP 408 if slower; default {DEFAULT_BODY_MIN_RATE}; 0: no rate)",
    )  # fmt: skip
    _add_limit(
        serve, "--max-connections", DEFAULT_MAX_CONNECTIONS, "N",
        "answer HTTP 503 (retry-after: 1) to a request that arrives while more than N "
        f"connections are open, idle ones included (default {DEFAULT_MAX_CONNECTIONS}; "
        "0: no cap)",
    )  # fmt: skip
    serve.add_argument(
        "--no-check",
        action="append",
        default=[],
        choices=CLIENT_CHECKS,
        metavar="NAME",
        help="do not check this client invariant on the sessions (repeatable; as well as "
        "those the scenario's wire: checks: turns off): " + ", ".join(CLIENT_CHECKS),
    )
    serve.add_argument(
        "--max-retries",
        type=_non_negative(int),
        default=None,
        metavar="N",
        help="retries of one request in a row the max_retries invariant allows "
        f"(default: the scenario's wire: max_retries, else {DEFAULT_MAX_RETRIES})",
    )
    serve.add_argument(
        "--report",
        metavar="PATH",
        help="at exit, write one self-contained HTML report: a section per session with its "
        "verdict, its failures and its timeline, and the client behaviours seen",
    )
    serve.add_argument(
        "--junitxml",
        metavar="PATH",
        help="at exit, write a JUnit XML file: a test case per session (name: the session's, "
        "classname: the scenario file)",
    )
    serve.add_argument(
        "--coverage",
        action="store_true",
        help="at exit, print which client behaviours the sessions showed (a tool error "
        "passed back, retry-after honoured, a cut stream recovered, ...)",
    )
    add_pythonpath(serve, "scenario")
    serve.set_defaults(func=command)
