"""The engine's layers: providers depend only on types, events and errors; the loop reaches
the tool layer through its public face, never its private modules."""

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
