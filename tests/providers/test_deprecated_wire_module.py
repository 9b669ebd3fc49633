"""``openprogram.providers.wire`` was renamed ``openprogram.providers.apis``; the old module
still works for one release and says where to import from instead."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from openprogram.providers import apis


def test_the_old_module_warns_on_import_and_still_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "openprogram.providers.wire", raising=False)
    with pytest.warns(DeprecationWarning, match=r"providers\.wire is deprecated.*providers\.apis"):
        wire = importlib.import_module("openprogram.providers.wire")
    assert sorted(wire.__all__) == ["APIS", "parse_response", "tool_choice_fields"]
    assert wire.parse_response is apis.parse_response
    assert wire.tool_choice_fields is apis.tool_choice_fields
    assert wire.APIS == apis.APIS
    assert wire.tool_choice_fields("anthropic", "required", False) == {
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True}
    }


def test_importing_the_package_does_not_import_the_old_module() -> None:
    """Otherwise every user would see the warning."""
    code = (
        "import sys, openprogram, openprogram.providers.apis; "
        "assert 'openprogram.providers.wire' not in sys.modules"
    )
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
