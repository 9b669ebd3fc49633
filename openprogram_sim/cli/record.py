"""``openprogram-sim record SCENARIO``: run a scenario's exec through a real adapter and
keep the HTTP session as a cassette (scrubbed, scanned, written atomically)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from openprogram.errors import OpenProgramError
from openprogram_sim.cli._arguments import add_pythonpath
from openprogram_sim.errors import CassetteError, ScenarioError

__all__ = ["add_parser", "command"]

SETUP_STATUSES = {401: "unauthorized", 403: "forbidden", 404: "not found"}
"""Statuses that, on every request of a session, say the setup is wrong (the key, the base
URL, the model name), not how the model behaves."""


def _defaults(scenario: Any, args: argparse.Namespace) -> tuple[str, Path]:
    """``--model`` and ``--cassette``, or what the scenario's ``model: {cassette, model}``
    names (the cassette relative to the scenario file)."""
    from openprogram_sim.scenario import CassetteModel

    spec = scenario.model if isinstance(scenario.model, CassetteModel) else None
    model = args.model or (spec.model if spec is not None else None)
    cassette = args.cassette
    if cassette is None and spec is not None:
        cassette = str(Path(args.scenario).parent / spec.cassette)
    missing = [flag for flag, value in (("--model", model), ("--cassette", cassette)) if not value]
    if missing:
        raise ValueError(
            f"give {' and '.join(missing)} (or name them in the scenario: model: "
            "{cassette: FILE, model: PROVIDER:MODEL})"
        )
    return str(model), Path(str(cassette))


def _ignore(scenario: Any) -> tuple[str, ...]:
    """The scenario's ``model.ignore`` when it names a cassette, else the default."""
    from openprogram_sim.cassettes import DEFAULT_IGNORE

    patterns = getattr(scenario.model, "ignore", None)
    return tuple(patterns) if patterns is not None else DEFAULT_IGNORE


async def _session(scenario: Any, cassette: Any, model: str, base_url: str | None) -> Any:
    from openprogram_sim.play import arun_scenario

    options = {"base_url": base_url} if base_url else {}
    async with cassette.client() as client:
        provider = cassette.provider(model, client=client, **options)
        return await arun_scenario(scenario, provider)


def command(args: argparse.Namespace) -> int:
    from openprogram_sim.cassettes import Cassette, resolve_record_mode
    from openprogram_sim.play import check_outcome
    from openprogram_sim.scenario import load_scenario

    try:
        scenario = load_scenario(args.scenario, pythonpath=args.pythonpath)
        model, path = _defaults(scenario, args)
        mode = resolve_record_mode(args.record_mode)
        if mode != args.record_mode:
            print(f"openprogram-sim: CI is set: record mode {mode} (replay only)", file=sys.stderr)
        cassette = Cassette(path, record_mode=mode, ignore=_ignore(scenario)).load()
        loaded = len(cassette.vcr.data)
        outcome = asyncio.run(_session(scenario, cassette, model, args.base_url))
        mistake = _setup_mistake(cassette, loaded)
        if mistake is not None and not args.keep_errors:
            print(f"openprogram-sim record: {cassette.path}: {mistake}", file=sys.stderr)
            print(f"  exec raised {outcome.error_text}", file=sys.stderr)
            return 2
        cassette.describe(
            model=model,
            scenario=os.path.relpath(Path(args.scenario).resolve(), path.resolve().parent),
            recorded_with="openprogram-sim record",
        )
        cassette.save()
    except (ScenarioError, CassetteError, OpenProgramError, ValueError) as exc:
        print(f"openprogram-sim: {exc}", file=sys.stderr)
        return 2
    return _report(cassette, loaded, check_outcome(outcome), sys.stdout)


def _setup_mistake(cassette: Any, loaded: int) -> str | None:
    """What to say when every request this session recorded got a 401, 403 or 404, else
    None."""
    codes = [int(response["status"]["code"]) for _, response in cassette.vcr.data[loaded:]]
    if not codes or any(code not in SETUP_STATUSES for code in codes):
        return None
    got = ", ".join(f"HTTP {c} ({SETUP_STATUSES[c]})" for c in sorted(set(codes)))
    hints = []
    if 404 in codes:
        hints.append("a 404 is a wrong --base-url or model name")
    if 401 in codes or 403 in codes:
        hints.append("a 401 or 403 a missing, wrong or unauthorised key")
    return (
        f"not written: every request of the session got {got}, a setup mistake rather than a "
        f"session to keep ({'; '.join(hints)}). Fix it and record again, or pass "
        "--keep-errors to keep such a session"
    )


def _report(cassette: Any, loaded: int, verdict: Any, out: TextIO) -> int:
    outcome = verdict.outcome
    recorded = len(cassette.vcr.data) - loaded
    replayed = sum(cassette.vcr.play_counts.values())
    print(
        f"openprogram-sim record: {cassette.path}: {recorded} interaction(s) recorded, "
        f"{replayed} replayed (record mode {cassette.record_mode})",
        file=out,
    )
    ended = f"raised {outcome.error_text}" if outcome.error is not None else "returned"
    print(f"  exec {ended} after {outcome.model_calls} model call(s)", file=out)
    if verdict.passed:
        print("  the scenario's expect: holds for this session", file=out)
    else:
        print(
            f"  the scenario's expect: does not hold for this session ({len(verdict.failures)} "
            "failure(s)); a real model may answer otherwise than the script",
            file=out,
        )
    problems = cassette.problems()
    for problem in problems:
        print(f"\n{problem}", file=out)
    return 1 if problems else 0


def add_parser(sub: Any) -> None:
    record = sub.add_parser(
        "record",
        help="run a scenario's exec through a real adapter and save the session as a cassette",
        description="Run SCENARIO's exec (its tools simulated or real) through openprogram's "
        "real adapter for --model (the key from the usual environment variable) and save "
        "the HTTP session to --cassette, secrets scrubbed. Replay it with model: {cassette: "
        "FILE, model: PROVIDER:MODEL} in a scenario.",
    )
    record.add_argument("scenario", help="the scenario file whose exec is run")
    record.add_argument(
        "--model",
        metavar="PROVIDER:MODEL",
        help="the real adapter, e.g. anthropic:claude-sonnet-4-5 (default: the scenario's "
        "model.model)",
    )
    record.add_argument(
        "--cassette",
        metavar="PATH",
        help="the cassette file to write (default: the scenario's model.cassette)",
    )
    record.add_argument(
        "--base-url",
        metavar="URL",
        help="the adapter's base URL, as the API's SDK takes it (default: OPENAI_BASE_URL, "
        "ANTHROPIC_BASE_URL or GOOGLE_GEMINI_BASE_URL when set, else the public endpoint)",
    )
    record.add_argument(
        "--record-mode",
        choices=("none", "once", "new_episodes", "all"),
        default="once",
        help="once (default): record a cassette that does not exist, replay one that does; "
        "new_episodes: record what the cassette cannot answer; all: record everything again; "
        "none: replay only. Always none when CI is set.",
    )
    record.add_argument(
        "--keep-errors",
        action="store_true",
        help="save the session even when every request got HTTP 401, 403 or 404 (by default "
        "such a session is a setup mistake: nothing is written and the exit status is 2)",
    )
    add_pythonpath(record, "scenario")
    record.set_defaults(func=command)
