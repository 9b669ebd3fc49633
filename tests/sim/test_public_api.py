"""The harness's public names are pinned: what each face exports and where its classes say
they live."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import types

import pytest

import openprogram_sim

FACES = [
    "openprogram_sim",
    "openprogram_sim.cassettes",
    "openprogram_sim.cli",
    "openprogram_sim.coverage",
    "openprogram_sim.eval",
    "openprogram_sim.fuzz",
    "openprogram_sim.fuzz.agent",
    "openprogram_sim.fuzz.loop",
    "openprogram_sim.fuzz.tools",
    "openprogram_sim.models",
    "openprogram_sim.play",
    "openprogram_sim.report",
    "openprogram_sim.scenario",
    "openprogram_sim.trace",
    "openprogram_sim.wire",
]
"""Packages whose ``__init__`` only re-exports: every public attribute is in ``__all__``."""

MODULES = ["openprogram_sim.errors", "openprogram_sim.fuzz.strategies"]
"""Public modules that define things: every public class or function defined there is in
``__all__``."""


def _public(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


@pytest.mark.parametrize("name", FACES + MODULES + ["openprogram_sim.plugin"])
def test_every_name_in_all_is_importable(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__all__, name
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == []
    assert len(set(module.__all__)) == len(module.__all__)


@pytest.mark.parametrize("name", FACES)
def test_a_face_exports_exactly_its_all(name: str) -> None:
    module = importlib.import_module(name)
    for attr in module.__all__:  # the top-level face loads its names lazily
        getattr(module, attr)
    assert _public(module) == set(module.__all__)


@pytest.mark.parametrize("name", MODULES)
def test_a_module_exports_everything_it_defines(name: str) -> None:
    module = importlib.import_module(name)
    defined = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and (inspect.isclass(v) or inspect.isfunction(v))
        and v.__module__ == name
    }
    assert defined <= set(module.__all__)


def _exported_classes() -> list[tuple[str, str, type]]:
    out = []
    for name in FACES + MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            value = getattr(module, attr)
            if inspect.isclass(value) and value.__module__.startswith("openprogram_sim"):
                out.append((name, attr, value))
    return out


@pytest.mark.parametrize(("face", "attr", "cls"), _exported_classes(), ids=lambda v: str(v))
def test_public_classes_name_a_public_module(face: str, attr: str, cls: type) -> None:
    module = cls.__module__
    assert "._" not in module and not module.startswith("_"), f"{face}.{attr}: {module}"
    assert getattr(importlib.import_module(module), cls.__name__) is cls
    assert f"<class '{module}.{cls.__qualname__}'>" == repr(cls)


def test_the_top_level_face_offers_what_a_test_needs() -> None:
    from openprogram_sim.models import ScriptedModel
    from openprogram_sim.play import run_scenario
    from openprogram_sim.trace import assert_events

    assert openprogram_sim.ScriptedModel is ScriptedModel
    assert openprogram_sim.run_scenario is run_scenario
    assert openprogram_sim.assert_events is assert_events
    assert {"Scenario", "load_scenario", "check_outcome", "TraceRecorder", "SimError"} <= set(
        openprogram_sim.__all__
    )
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = openprogram_sim.nope  # type: ignore[attr-defined]


def test_every_harness_error_is_a_sim_error() -> None:
    from openprogram_sim import errors

    for name in errors.__all__:
        value = getattr(errors, name)
        if inspect.isclass(value) and issubclass(value, BaseException):
            assert issubclass(value, errors.SimError), name
    # the stdlib bases callers already catch stay in place
    assert issubclass(errors.ScriptExhaustedError, AssertionError)
    assert issubclass(errors.WireEncodeError, ValueError)


def test_importing_the_face_loads_no_subpackage() -> None:
    code = (
        "import sys, openprogram_sim\n"
        "loaded = [m for m in ('pydantic', 'yaml', 'openprogram', 'openprogram_sim.scenario') "
        "if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "openprogram_sim.ScriptedModel\n"
        "assert 'openprogram_sim.models' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_importing_the_fuzz_face_loads_neither_hypothesis_nor_a_campaign() -> None:
    code = (
        "import sys, openprogram_sim.fuzz as fuzz\n"
        "heavy = ('hypothesis', 'openprogram_sim.fuzz.loop', 'openprogram_sim.fuzz.tools')\n"
        "loaded = [m for m in heavy if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "fuzz.check_invariants\n"
        "assert 'hypothesis' not in sys.modules  # the invariants need no Hypothesis\n"
        "assert fuzz.run_campaign.__module__ == 'openprogram_sim.fuzz.loop._campaign'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_deprecated_aliases_are_gone() -> None:
    """0.1.0 was never released: the old paths were deleted, not kept for a release."""
    for old in ("check", "runner", "scripted", "strategies", "matchers", "clock", "pytest_plugin"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"openprogram_sim.{old}")


def test_a_scenario_is_served_by_play_and_wire_refuses_it_with_the_fix() -> None:
    from openprogram_sim.scenario import parse_scenario
    from openprogram_sim.wire import ScriptedWire, serve

    scenario = parse_scenario(
        "scenario: s\nexec: {content: hi}\nmodel: [{text: hello}]\n", path="s.yaml"
    )
    with pytest.raises(TypeError, match=r"pass scenario\.script\(\).*serve_scenario"):
        ScriptedWire(scenario)  # type: ignore[arg-type]
    path = pytest.raises(TypeError, match=r"not the path 's\.yaml'.*serve_scenario\(path\)")
    with path, serve("s.yaml"):  # type: ignore[arg-type]
        pass
    wire = ScriptedWire(scenario.script())
    assert [t.text for t in wire.turns] == ["hello"]
