"""A scenario's references to the user's own Python: ``"pkg.module:attr"`` strings.

Where imports come from, in order: the scenario file's folder, the current directory, the
``pythonpath`` of the nearest ``pyproject.toml`` above the scenario that has a
``[tool.openprogram]`` table (paths relative to that file), and the extra folders given by
the caller (``openprogram-sim run --pythonpath DIR``; under pytest, pytest's own
``pythonpath`` and rootdir rules already apply). Folders are added to ``sys.path`` once, at
its front, and stay there: imported modules stay imported, as they do under pytest.

A reference that cannot be resolved is a :class:`PythonRefError` whose message names the
module that failed and the exception (the loader turns it into the file's error, with the
line of the reference).
"""

from __future__ import annotations

import importlib
import os
import sys
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["PythonRefError", "import_ref", "import_roots", "ref_of", "scenario_env"]


class PythonRefError(Exception):
    """A ``pkg.module:attr`` reference that could not be imported (the message says why)."""


@lru_cache(maxsize=256)
def _pyproject_paths(start: Path) -> list[Path]:
    for folder in (start, *start.parents):
        config = folder / "pyproject.toml"
        if not config.is_file():
            continue
        try:
            table = tomllib.loads(config.read_text(encoding="utf-8")).get("tool", {})
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            return []
        settings = table.get("openprogram")
        if isinstance(settings, Mapping):
            paths = settings.get("pythonpath", [])
            if isinstance(paths, str):
                paths = [paths]
            return [(folder / str(p)).resolve() for p in paths]
    return []


def import_roots(scenario_path: str | None, extra: Sequence[str | Path] = ()) -> list[Path]:
    """The folders imports of a scenario at ``scenario_path`` are resolved from."""
    here = Path(scenario_path).resolve().parent if scenario_path else Path.cwd()
    roots = [here, Path.cwd(), *_pyproject_paths(here), *(Path(p).resolve() for p in extra)]
    unique: list[Path] = []
    for root in roots:
        if root not in unique:
            unique.append(root)
    return unique


def _add_to_path(roots: Sequence[Path]) -> None:
    for root in reversed(roots):
        text = str(root)
        if text not in sys.path:
            sys.path.insert(0, text)


def import_ref(ref: str, roots: Sequence[Path] = (), *, module_ok: bool = False) -> Any:
    """The object ``ref`` (``"pkg.module:attr"``, attr may be dotted) names; with
    ``module_ok``, a bare ``"pkg.module"`` is the module itself."""
    module_name, sep, attr = ref.partition(":")
    if module_ok and not sep:
        attr = ""
    elif not sep or not module_name or not attr:
        raise PythonRefError(f"{ref!r} is not a reference: write it as 'package.module:name'")
    _add_to_path(roots)
    try:
        value: Any = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure is the user's to see, named
        where = ", ".join(str(r) for r in roots) or "sys.path"
        raise PythonRefError(
            f"cannot import module {module_name!r} for {ref!r}: {type(exc).__name__}: {exc} "
            f"(searched from {where})"
        ) from exc
    for part in attr.split(".") if attr else ():
        try:
            value = getattr(value, part)
        except AttributeError:
            raise PythonRefError(
                f"module {module_name!r} has no attribute {attr!r} (for {ref!r})"
            ) from None
    return value


@contextmanager
def scenario_env(env: Mapping[str, str]) -> Iterator[None]:
    """Set ``env`` in ``os.environ`` for the run, restoring every value afterwards."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def ref_of(obj: Any) -> str | None:
    """``module:name`` that ``obj`` (a decorated function, a tool's source) can be imported
    as (what a scenario's ``python:`` names), else None."""
    fn = getattr(obj, "__wrapped__", obj)
    module, name = getattr(fn, "__module__", None), getattr(fn, "__name__", None)
    if module and name and getattr(sys.modules.get(module), name, None) is obj:
        return f"{module}:{name}"
    return None
