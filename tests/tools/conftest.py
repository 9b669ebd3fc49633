"""Fixtures for the tool-layer tests: a fresh registry per test, and event recording."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from openprogram import ToolRegistry
from openprogram.tools import default_registry


@pytest.fixture(autouse=True)
def _default_registry_untouched() -> Iterator[None]:
    """What a test registers in the process-wide registry is gone after it (a bare
    ``@function`` registers there), so no state leaks from one test to the next."""
    before = default_registry.snapshot()
    yield
    default_registry.restore(before)


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry()
