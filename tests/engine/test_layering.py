"""The engine's layers: providers depend only on types, events and errors; the loop reaches
the tool layer through its public face, never its private modules; and no module imports
another module's private names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import openprogram

ROOT = Path(openprogram.__file__).parent


def _imports(path: Path) -> set[str]:
    """Every ``openprogram...`` module a file imports (at run time or for type checking)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] == "openprogram"}


@pytest.mark.parametrize("path", sorted((ROOT / "providers").glob("*.py")), ids=lambda p: p.name)
def test_providers_depend_only_on_types_events_and_errors(path: Path) -> None:
    allowed = ("openprogram.types", "openprogram.events", "openprogram.errors")
    outside = {
        name
        for name in _imports(path)
        if not name.startswith("openprogram.providers") and name not in allowed
    }
    assert not outside, f"{path.name} imports {sorted(outside)}"


@pytest.mark.parametrize(
    "path", [*sorted((ROOT / "agent").glob("*.py")), ROOT / "runtime.py"], ids=lambda p: p.name
)
def test_the_loop_imports_tools_through_the_public_face(path: Path) -> None:
    private = {
        name
        for name in _imports(path)
        if name.startswith("openprogram.tools.")
        and any(part.startswith("_") for part in name.split("."))
    }
    assert not private, f"{path.name} imports private tool modules {sorted(private)}"


def _is_module(dotted: str) -> bool:
    path = ROOT.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _private_imports(path: Path) -> list[str]:
    """``from openprogram.x import _name`` where ``_name`` is not a module, anywhere in the
    file (inside functions and under ``TYPE_CHECKING`` too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        if node.module.split(".")[0] != "openprogram":
            continue
        for alias in node.names:
            name = f"{node.module}.{alias.name}"
            if alias.name.startswith("_") and not _is_module(name):
                found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
    return found


def test_the_private_name_scan_tells_modules_from_names(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from openprogram.tools import _choices\n"
        "def late():\n"
        "    from openprogram.agent.agent_loop import _run_loop\n"
    )
    assert _private_imports(planted) == [
        "line 3: from openprogram.agent.agent_loop import _run_loop"
    ]


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_engine_module_imports_another_modules_private_names(path: Path) -> None:
    """A name with a leading underscore is its module's own; another module that needs it
    gets a public name for it (a private module's public names are fine: ``_history``'s
    ``check_history``)."""
    found = _private_imports(path)
    assert not found, f"{path.relative_to(ROOT)} imports private names: {found}"
