"""The harness's floors, pinned: each capability imports only the floors below it.

    errors -> trace -> models -> scenario -> wire -> cassettes -> play
           -> fuzz / coverage / report -> plugin / cli

Every import counts: at module level, inside functions, under ``TYPE_CHECKING``, a
``sys.modules`` lookup or an ``importlib.import_module`` of a constant name. A circle
broken by a late import is still a circle for a reader, so the package graph must also be
free of cycles (capabilities on one floor may use each other one way). The engine never
imports the harness.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

import openprogram
import openprogram_sim

SIM = Path(openprogram_sim.__file__).parent
ENGINE = Path(openprogram.__file__).parent

FLOORS: list[tuple[str, ...]] = [
    ("errors",),
    ("trace",),
    ("models",),
    ("scenario",),
    ("wire",),
    ("cassettes",),
    ("play",),
    ("fuzz", "eval", "coverage", "report"),
    ("plugin", "cli"),
]
FLOOR = {room: level for level, rooms in enumerate(FLOORS) for room in rooms}
TOP = len(FLOORS)  # the package's face (openprogram_sim/__init__.py) sits above them all


def _room(module: str) -> str | None:
    """The capability a module of the harness belongs to (``<face>`` for the root)."""
    parts = module.split(".")
    if parts[0] != "openprogram_sim":
        return None
    return parts[1] if len(parts) > 1 else "<face>"


def _module_of(path: Path) -> tuple[str, str]:
    """``(module, package)`` of a file of the harness."""
    rel = path.relative_to(SIM.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def _targets(node: ast.AST, package: str) -> Iterator[str]:
    """The modules one AST node imports or looks up."""
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        for alias in node.names:  # ``from openprogram_sim import wire`` imports the package
            child = f"{module}.{alias.name}"
            is_package = (SIM.parent / child.replace(".", "/")).is_dir()
            yield child if is_package else module
    elif isinstance(node, ast.Call | ast.Subscript):
        # importlib.import_module("openprogram_sim.x") and sys.modules["openprogram_sim.x"]
        # / sys.modules.get("openprogram_sim.x"): a name looked up is a dependency too
        text = ast.unparse(node.func if isinstance(node, ast.Call) else node.value)
        if text.endswith(("import_module", "sys.modules.get", "sys.modules")):
            args = node.args if isinstance(node, ast.Call) else [node.slice]
            for arg in args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    yield arg.value


def _edges() -> list[tuple[str, str, str, int]]:
    """``(from room, to room, file, line)`` for every import across rooms."""
    out = []
    for path in sorted(SIM.rglob("*.py")):
        module, package = _module_of(path)
        source = _room(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _targets(node, package):
                room = _room(target)
                if room is not None and room != source and source is not None:
                    rel = str(path.relative_to(SIM.parent))
                    out.append((source, room, rel, getattr(node, "lineno", 0)))
    return out


def _level(room: str) -> int:
    return TOP if room == "<face>" else FLOOR[room]


def test_every_room_has_a_floor() -> None:
    rooms = {p.name for p in SIM.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    rooms |= {p.stem for p in SIM.glob("*.py") if p.stem != "__init__"}
    assert rooms == set(FLOOR), "give each new capability a floor in FLOORS (and DESIGN.md)"


def test_no_room_imports_a_higher_floor() -> None:
    upward = [
        f"{file}:{line}: {src} (floor {_level(src)}) imports {dst} (floor {_level(dst)})"
        for src, dst, file, line in _edges()
        if _level(dst) > _level(src)
    ]
    assert not upward, "imports up a floor (move the shared concept down):\n" + "\n".join(upward)


def test_the_rooms_import_each_other_without_a_circle() -> None:
    graph: dict[str, set[str]] = {}
    where: dict[tuple[str, str], str] = {}
    for src, dst, file, line in _edges():
        graph.setdefault(src, set()).add(dst)
        where.setdefault((src, dst), f"{file}:{line}")
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(room: str) -> list[str] | None:
        state[room] = 1
        stack.append(room)
        for nxt in sorted(graph.get(room, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[room] = 2
        return None

    for room in sorted(graph):
        if room not in state:
            cycle = visit(room)
            assert cycle is None, (
                "import circle: "
                + " -> ".join(cycle)
                + "\n"
                + "\n".join(
                    f"  {a} -> {b} at {where[(a, b)]}" for a, b in itertools.pairwise(cycle)
                )
            )


def test_the_package_root_holds_only_the_face_the_errors_and_the_rooms() -> None:
    loose = {p.name for p in SIM.iterdir() if p.is_file()}
    assert loose <= {"__init__.py", "errors.py", "py.typed"}, sorted(loose)


@pytest.mark.parametrize("path", sorted(ENGINE.rglob("*.py")), ids=lambda p: p.name)
def test_the_engine_never_imports_the_harness(path: Path) -> None:
    found = [
        target
        for node in ast.walk(ast.parse(path.read_text()))
        for target in _targets(node, "openprogram")
        if target.split(".")[0] == "openprogram_sim"
    ]
    assert not found, f"{path.relative_to(ENGINE.parent)} imports {found}"


def test_the_floor_check_sees_late_and_type_checking_imports() -> None:
    """The check itself: an import inside a function or under TYPE_CHECKING is an edge."""
    code = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from openprogram_sim.play import RunOutcome\n"
        "def f():\n    from openprogram_sim.scenario import load_scenario\n"
        "import sys\nsys.modules.get('openprogram_sim.cassettes')\n"
    )
    found = {
        t
        for node in ast.walk(ast.parse(code))
        for t in _targets(node, "openprogram_sim.wire")
        if t.startswith("openprogram_sim")
    }
    assert found == {
        "openprogram_sim.play",
        "openprogram_sim.scenario",
        "openprogram_sim.cassettes",
    }


def _private_names(path: Path) -> list[str]:
    """``from openprogram... import _name`` where ``_name`` is not a module, anywhere in the
    file (inside functions and under ``TYPE_CHECKING`` too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        if node.module.split(".")[0] not in ("openprogram", "openprogram_sim"):
            continue
        for alias in node.names:
            target = SIM.parent / f"{node.module}.{alias.name}".replace(".", "/")
            is_module = target.with_suffix(".py").exists() or target.is_dir()
            if alias.name.startswith("_") and not is_module:
                found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
    return found


@pytest.mark.parametrize("path", sorted(SIM.rglob("*.py")), ids=lambda p: str(p.relative_to(SIM)))
def test_no_harness_module_imports_another_modules_private_names(path: Path) -> None:
    """A neighbour that needs a name gets a public one (``play.GRACE_SECONDS``, the wire
    encoders' ``json_text``), never ``_name``; a private module's public names are fine."""
    found = _private_names(path)
    assert not found, f"{path.relative_to(SIM.parent)} imports private names: {found}"


def test_the_private_name_scan_sees_late_imports(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from openprogram_sim.wire import _plan\n"
        "def late():\n"
        "    from openprogram_sim.play._runner import _Requests\n"
    )
    assert _private_names(planted) == ["line 3: from openprogram_sim.play._runner import _Requests"]
