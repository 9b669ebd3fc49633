"""The process-wide registry is restored between tests: nothing leaks."""

from __future__ import annotations

import pytest

from openprogram import function
from openprogram.tools import default_registry


@pytest.mark.parametrize("attempt", [1, 2])
def test_bare_function_in_one_test_is_gone_in_the_next(attempt: int) -> None:
    assert "leaky" not in default_registry  # the other attempt registered it

    @function
    def leaky() -> int:
        """Leaky."""
        return attempt

    assert "leaky" in default_registry
