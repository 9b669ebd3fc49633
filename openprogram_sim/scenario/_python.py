"""A scenario's references to the user's own Python: ``"pkg.module:attr"`` strings.

Where imports come from, in order: the scenario file's folder, the current directory, the
``pythonpath`` of the nearest ``pyproject.toml`` above the scenario that has a
``[tool.openprogram]`` table (paths relative to that file), and the extra folders given by
the caller (``openprogram-sim run --pythonpath DIR``; under pytest, pytest's own
``pythonpath`` and rootdir rules already apply). Folders are added to ``sys.path`` once, at
its front, and stay there: imported modules stay imported, as they do under pytest.

A reference that cannot be resolved is a :class:`PythonRefError` whose message names the
module that failed and the exception (the run turns it into the file's error, with the line
of the reference: see :mod:`._resolve`). A scenario file may not name a standard-library or
builtin callable unless the same ``[tool.openprogram]`` table lists it under
:data:`STDLIB_SETTING` (:func:`refuse_stdlib`).
"""

from __future__ import annotations

import importlib
import json
import os
import stat
import sys
import sysconfig
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = [
    "STDLIB_SETTING",
    "PythonRefError",
    "Settings",
    "import_ref",
    "import_roots",
    "ref_of",
    "scenario_env",
    "settings",
    "refuse_stdlib",
    "stdlib_origin",
]


class PythonRefError(Exception):
    """A ``pkg.module:attr`` reference that could not be imported (the message says why)."""


STDLIB_SETTING = "allow-stdlib-callables"
"""The ``[tool.openprogram]`` key that lists the standard-library and builtin callables a
scenario file may name (each as the file writes it, ``"module:name"``)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The ``[tool.openprogram]`` table of the nearest ``pyproject.toml`` that has one."""

    config: Path | None
    """That file (None: no such table above the scenario)."""
    pythonpath: tuple[Path, ...] = ()
    allowed: frozenset[str] = frozenset()
    """The references of :data:`STDLIB_SETTING`."""
    problem: str | None = None
    """What is wrong with :data:`STDLIB_SETTING`, when it is not a list of references."""


def settings(start: Path) -> Settings:
    """The settings that apply to scenario files in folder ``start``: the
    ``[tool.openprogram]`` table of the nearest ``pyproject.toml`` above it that has one
    (read again when the file changes)."""
    for folder in (start, *start.parents):
        config = folder / "pyproject.toml"
        try:
            info = config.stat()
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        found = _read_settings(config, info.st_mtime_ns, info.st_size)
        if found is not None:
            return found
    return Settings(None)


@lru_cache(maxsize=256)
def _read_settings(config: Path, mtime_ns: int, size: int) -> Settings | None:
    """``config``'s settings (None: it has no ``[tool.openprogram]`` table); by its time and
    size, so an edited file is read again."""
    try:
        table = tomllib.loads(config.read_text(encoding="utf-8")).get("tool", {})
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return Settings(None)  # unreadable: no settings, as before it had any
    found = table.get("openprogram") if isinstance(table, Mapping) else None
    return _settings_of(config, found) if isinstance(found, Mapping) else None


def _settings_of(config: Path, table: Mapping[str, Any]) -> Settings:
    paths = table.get("pythonpath", [])
    if isinstance(paths, str):
        paths = [paths]
    allowed = table.get(STDLIB_SETTING, [])
    problem = None
    if not isinstance(allowed, list) or not all(isinstance(a, str) for a in allowed):
        problem = (
            f"{config}: [tool.openprogram] {STDLIB_SETTING} must be a list of references "
            f'such as ["subprocess:getoutput"] (got {allowed!r})'
        )
        allowed = []
    return Settings(
        config,
        tuple((config.parent / str(p)).resolve() for p in paths),
        frozenset(allowed),
        problem,
    )


def _pyproject_paths(start: Path) -> list[Path]:
    return list(settings(start).pythonpath)


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


def _stdlib_folders() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    return tuple({Path(paths[k]).resolve() for k in ("stdlib", "platstdlib") if k in paths})


def _is_stdlib(module_name: str) -> bool:
    """Whether module ``module_name`` is the standard library's (the builtins included): its
    top-level name is one of ``sys.stdlib_module_names`` and, when it has a file, that file
    is in the interpreter's library (a user's ``code.py`` that shadows a standard name is not)."""
    top = module_name.partition(".")[0]
    if top not in sys.stdlib_module_names:
        return False
    file = getattr(sys.modules.get(top), "__file__", None)
    if not file:
        return True  # built into the interpreter (builtins, posix, sys) or frozen
    path = Path(file).resolve()
    if {"site-packages", "dist-packages"} & set(path.parts):
        return False
    return any(folder in path.parents for folder in _stdlib_folders())


def _module_of(value: Any) -> str | None:
    """The module ``value`` was defined in: its ``__module__``, else its owner's (a bound
    builtin method's object, a method descriptor's class), else its type's."""
    module = getattr(value, "__module__", None)
    if isinstance(module, str):
        return module
    owner = getattr(value, "__self__", None) or getattr(value, "__objclass__", None)
    kind = owner if isinstance(owner, type) else type(owner if owner is not None else value)
    found = getattr(kind, "__module__", None)
    return found if isinstance(found, str) else None


def stdlib_origin(ref: str, value: Any) -> str | None:
    """Where ``value`` (the object ``ref`` names) comes from when that is the standard library
    or the builtins, e.g. ``"subprocess.getoutput"``; None for anything else. The object is
    judged, not only the reference: ``mymodule:system`` after ``from os import system`` in
    ``mymodule`` is ``posix.system``."""
    module = ref.partition(":")[0]
    if _is_stdlib(module):
        return ref.replace(":", ".")
    owner = _module_of(value)
    if owner is None or not _is_stdlib(owner):
        return None
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    return f"{owner}.{name if isinstance(name, str) else type(value).__qualname__}"


def refuse_stdlib(ref: str, value: Any, folder: Path) -> None:
    """Raise :class:`PythonRefError` when ``value`` (what ``ref``, in a scenario file in
    ``folder``, names) is the standard library's or a builtin, unless the ``[tool.openprogram]``
    table that applies there lists ``ref`` under :data:`STDLIB_SETTING`."""
    origin = stdlib_origin(ref, value)
    if origin is None:
        return
    found = settings(folder)
    if found.problem is not None:
        raise PythonRefError(found.problem)
    if ref in found.allowed:
        return
    if found.config is not None:
        where = f"in {_shown(found.config)}"
    else:
        where = f"in a pyproject.toml in {_shown(folder)} or above it"
    raise PythonRefError(
        f"{ref!r} is {origin}, of the standard library or the builtins: a scenario file "
        "may name only your own code unless you allow it, since such a callable can run "
        f"commands or change files; to allow it, write {where}: [tool.openprogram] "
        f"{STDLIB_SETTING} = [{json.dumps(ref)}]"
    )


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve())) or "."
    except (ValueError, OSError):
        return str(path)


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
