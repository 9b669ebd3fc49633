"""``openprogram-sim init REF``: a starter scenario for the tools a module or registry has.

``REF`` is ``package.module`` (every tool defined in it), ``package.module:registry`` (a
``ToolRegistry``: the scenario then uses it with ``registry:``) or ``package.module:tool``.
The scenario calls each tool once, one round per tool, with arguments built from its schema
(placeholders: a tool may well reject them), then answers in text; its expectations pin that
each tool was called, in order, and the run stopped. Gated tools' ``requires_env`` variables
are set with ``env:`` so they are offered. An ``@agentic_function`` (whose body calls exec) is
stubbed with ``returns:`` so the starter runs without scripting its nested run; the comment
says how to run it for real.

The file's first line points editors (the YAML language server) at the JSON Schema of
scenario files. Such a path is relative to the scenario file, so ``init -o FILE`` also writes
the schema into the project (``--schema``, default ``schema/scenario.schema.json`` below the
current directory, when it is missing or outdated) and points the line at it from FILE.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from openprogram_sim.cassettes._atomic import atomic_write

__all__ = ["add_parser", "command", "starter_scenario"]


def _tools_of(value: Any, ref: str) -> tuple[list[tuple[str, Any, str]], str | None]:
    """``([(name, object, ref)], registry_ref)`` for what ``ref`` names."""
    from openprogram import ToolRegistry
    from openprogram.tools import as_tool
    from openprogram_sim.scenario import ref_of

    if isinstance(value, ToolRegistry):
        return [(t.name, t.source or t, ref_of(t.source) or "") for t in value.tools()], ref
    if isinstance(value, ModuleType):
        found = []
        for attr, obj in sorted(vars(value).items()):
            own = getattr(obj, "__openprogram_tool__", None)
            if own is not None and getattr(obj, "__module__", None) == value.__name__:
                found.append((own.name, obj, f"{value.__name__}:{attr}"))
        return found, None
    tool = as_tool(value)
    return [(tool.name, value, ref)], None


def _flow(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def starter_scenario(ref: str, schema_ref: str = "schema/scenario.schema.json") -> str:
    """The YAML text of a starter scenario for ``ref`` (see the module docstring)."""
    from openprogram.tools import as_tool
    from openprogram_sim.models import example_arguments
    from openprogram_sim.scenario import import_ref, import_roots

    value = import_ref(ref, import_roots(None), module_ok=True)
    found, registry = _tools_of(value, ref)
    if not found:
        raise ValueError(f"{ref!r} has no tools (@function, @agentic_function or Tool objects)")
    lines = [f"# yaml-language-server: $schema={schema_ref}"]
    lines.append(f"scenario: every tool of {ref} is called once and answers")
    lines.append(f"description: A starter made by `openprogram-sim init {ref}`; edit it.")
    lines.append("tags: [starter]")
    if registry:
        lines.append(f"registry: {_flow(registry)}")
    lines.append("tools:")
    turns, ends = [], []
    env: dict[str, str] = {}
    for name, obj, tool_ref in found:
        tool = as_tool(obj)
        agentic = bool(getattr(obj, "agentic", False))
        entry: dict[str, Any] = {}
        if tool_ref and (agentic or not registry):
            entry["python"] = tool_ref
        if agentic:
            entry["returns"] = f"(stubbed) {name} result"
        if entry:
            note = "  # agentic: remove returns: and script its nested turns" if agentic else ""
            lines.append(f"  {name}: {_flow(entry)}{note}")
        args = example_arguments(tool.spec.parameters)
        turns.append(f"  - tool_calls: [{_flow({name: args})}]")
        ends.append(f"    - tool_execution_end: {_flow({'tool_name': name})}")
        env.update(dict.fromkeys(tool.gates.requires_env, "set-by-the-starter"))
    if lines[-1] == "tools:":
        lines.pop()
    if env:
        lines.append(f"env: {_flow(env)}  # the gated tools' variables, so they are offered")
    names = [name for name, _, _ in found]
    lines.append(f"exec: {_flow({'content': 'Use each tool once.', 'tools': names})}")
    lines.append("model:")
    lines.extend(turns)
    lines.append('  - text: "Done."')
    lines.append("expect:")
    lines.append('  result: "Done."')
    lines.append(f"  model_calls: {len(turns) + 1}")
    lines.append("  events:  # add is_error: false and results once the arguments are real ones")
    lines.extend(ends)
    lines.append("    - agent_end: {reason: stop}")
    return "\n".join(lines) + "\n"


def _is_url(ref: str) -> bool:
    return ref.startswith(("http://", "https://", "file://"))


def _schema_ref(schema: str, output: Path | None) -> str:
    """The ``$schema`` of the modeline: a URL as given; a path (relative to the current
    directory) made relative to the folder of the written file, as the YAML language server
    reads it (``output`` None: the file is printed, taken to be saved here)."""
    if _is_url(schema):
        return schema
    folder = output.parent if output is not None else Path()
    return Path(os.path.relpath(Path(schema).absolute(), folder.absolute())).as_posix()


def _schema_state(path: Path, text: str) -> str:
    """``"missing"``, ``"current"``, ``"outdated"`` (ours, from another version: the same
    ``title``) or ``"foreign"`` (another file: never replaced)."""
    if not path.exists():
        return "missing"
    try:
        existing = path.read_text(encoding="utf-8")
        title = json.loads(existing).get("title")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return "foreign"
    if existing == text:
        return "current"
    return "outdated" if title == json.loads(text)["title"] else "foreign"


def command(args: argparse.Namespace) -> int:
    from openprogram_sim.scenario import PythonRefError

    target = Path(args.output) if args.output else None
    try:
        text = starter_scenario(args.ref, _schema_ref(args.schema, target))
    except (PythonRefError, TypeError, ValueError, KeyError) as exc:
        print(f"openprogram-sim init: {exc}", file=sys.stderr)
        return 2
    if target is not None:
        return _write(target, text, args.schema, force=args.force)
    sys.stdout.write(text)
    if not _is_url(args.schema):
        print(f"openprogram-sim init: the $schema line is right for a file saved in the current "
              f"directory, with {args.schema} written by `openprogram-sim schema -o "
              f"{args.schema}`; with -o FILE, init writes both", file=sys.stderr)  # fmt: skip
    return 0


def _write(target: Path, text: str, schema_ref: str, *, force: bool) -> int:
    """Write the starter at ``target`` and, unless ``schema_ref`` is a URL, the JSON Schema
    its first line points at (when missing or outdated; another file there is kept)."""
    from openprogram_sim.cli.schema import schema_text

    if target.exists() and not force:
        print(f"openprogram-sim init: {target} exists; pass --force to replace it",
              file=sys.stderr)  # fmt: skip
        return 2
    schema, wanted = Path(schema_ref), schema_text()
    state = "url" if _is_url(schema_ref) else _schema_state(schema, wanted)
    if state == "foreign":
        print(f"openprogram-sim init: {schema} exists and is not the JSON Schema of scenario "
              "files; pass --schema PATH to put the schema elsewhere", file=sys.stderr)  # fmt: skip
        return 2
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, text, mode=0o644)
    print(f"openprogram-sim init: wrote {target}", file=sys.stderr)
    if state in ("missing", "outdated"):
        schema.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(schema, wanted, mode=0o644)
        done = "wrote" if state == "missing" else "updated"
        print(f"openprogram-sim init: {done} {schema}, the JSON Schema your editor reads "
              f"(the first line of {target} points at it)", file=sys.stderr)  # fmt: skip
    return 0


def add_parser(sub: Any) -> None:
    init = sub.add_parser("init", help="write a starter scenario for your module's tools")
    init.add_argument("ref", help="package.module, package.module:registry or :tool")
    init.add_argument("-o", "--output", help="write to this file instead of stdout")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.add_argument(
        "--schema",
        default="schema/scenario.schema.json",
        metavar="PATH|URL",
        help="the JSON Schema file editors read, relative to the current directory (default: "
        "schema/scenario.schema.json); with -o it is written there when missing or outdated, "
        "and the file's $schema line points at it; a URL is used as given",
    )
    init.set_defaults(func=command)
