"""What samples cost: the bundled price table (``pricing.toml``, dollars per million tokens
and the date they were read), overridden by a ``[tool.openprogram.pricing]`` table in the
nearest ``pyproject.toml`` and by ``--pricing FILE``; a model the table does not hold has
no price, never a guessed one."""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["BUNDLED", "Price", "PriceTable", "load_pricing"]

BUNDLED = "pricing.toml"
"""The price table shipped in ``openprogram_sim/eval/``."""

_KINDS = ("input", "output", "cache_read", "cache_write")
_ALIASES = {"openai-chat": "openai", "openai-responses": "openai", "google": "gemini"}
_DATED = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """One model's prices, in dollars per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    """Input tokens read from a prompt cache (None: charged at ``input``)."""
    cache_write: float | None = None
    """Tokens written to a prompt cache (None: charged at ``input``)."""
    source: str = ""
    """Where the prices were read (a file, or the provider's pricing page)."""

    def cost(self, usage: Mapping[str, int]) -> float:
        """Dollars for ``usage`` (``input``, ``output``, ``cache_read``, ``cache_write``
        tokens; ``reasoning`` is part of ``output`` and not charged again)."""
        rates = {
            "input": self.input,
            "output": self.output,
            "cache_read": self.input if self.cache_read is None else self.cache_read,
            "cache_write": self.input if self.cache_write is None else self.cache_write,
        }
        return sum(usage.get(kind, 0) * rate for kind, rate in rates.items()) / 1_000_000

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in _KINDS if getattr(self, k) is not None}
        out["per"] = "1M tokens"
        if self.source:
            out["source"] = self.source
        return out


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices per model (``PROVIDER:MODEL``), and where they came from."""

    models: Mapping[str, Price] = field(default_factory=dict)
    date: str = ""
    """The bundled table's date (an override's when it gives one)."""
    files: tuple[str, ...] = ()
    """The files read, bundled first."""

    def key(self, model: str) -> str | None:
        """The entry that prices ``model``: itself, under its provider's alias
        (``openai-responses`` → ``openai``), then without a date suffix."""
        provider, _, name = model.partition(":")
        for p in dict.fromkeys((provider, _ALIASES.get(provider, provider))):
            for n in dict.fromkeys((name, _DATED.sub("", name))):
                if f"{p}:{n}" in self.models:
                    return f"{p}:{n}"
        return None

    def price(self, model: str) -> Price | None:
        key = self.key(model)
        return None if key is None else self.models[key]

    def cost(self, model: str, usage: Mapping[str, int]) -> float | None:
        """Dollars for ``usage`` on ``model`` (None: the table has no price for it)."""
        price = self.price(model)
        return None if price is None else price.cost(usage)

    def describe(self, model: str) -> dict[str, Any]:
        """The price used for ``model``, for the ``--json`` file."""
        key = self.key(model)
        return {
            "model": model,
            "entry": key,
            "price": None if key is None else self.models[key].to_json(),
            "date": self.date,
            "files": list(self.files),
        }


def _number(where: str, model: str, kind: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(
            f"{where}: [models.{model!r}] {kind} = {value!r} is not a price (dollars per "
            "million tokens, a number >= 0)"
        )
    if not math.isfinite(value):
        raise ValueError(f"{where}: [models.{model!r}] {kind} = {value!r} is not finite")
    return float(value)


def _price(where: str, model: str, entry: Any) -> Price:
    if ":" not in model:
        raise ValueError(
            f'{where}: model {model!r} is not PROVIDER:MODEL (e.g. "openai:gpt-4o-mini")'
        )
    if not isinstance(entry, Mapping):
        raise ValueError(
            f"{where}: [models.{model!r}] must be a table of prices (input, output, "
            f"cache_read, cache_write), got {entry!r}"
        )
    unknown = sorted(set(entry) - {*_KINDS, "source"})
    if unknown:
        raise ValueError(
            f"{where}: [models.{model!r}] unknown key {unknown[0]!r}; the keys are input, "
            "output, cache_read, cache_write, source"
        )
    for kind in ("input", "output"):
        if kind not in entry:
            raise ValueError(f"{where}: [models.{model!r}] has no {kind} price")
    values = {k: _number(where, model, k, entry[k]) for k in _KINDS if k in entry}
    return Price(**values, source=str(entry.get("source") or where))


def _models(where: str, table: Mapping[str, Any]) -> dict[str, Price]:
    models = table.get("models", {})
    if not isinstance(models, Mapping):
        raise ValueError(f'{where}: models must be a table of [models."PROVIDER:MODEL"]')
    return {str(name): _price(where, str(name), entry) for name, entry in models.items()}


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"--pricing {path}: cannot read it ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"--pricing {path}: not TOML ({exc})") from None


def _bundled() -> dict[str, Any]:
    text = resources.files("openprogram_sim.eval").joinpath(BUNDLED).read_text("utf-8")
    return tomllib.loads(text)


def tool_table(start: Path) -> tuple[Path, Mapping[str, Any]] | None:
    """The ``[tool.openprogram]`` table of the nearest ``pyproject.toml`` above ``start``
    that has one, and that file (as the scenario files' settings are found)."""
    for folder in (start, *start.parents):
        config = folder / "pyproject.toml"
        if not config.is_file():
            continue
        try:
            data = tomllib.loads(config.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue
        tool = data.get("tool", {}).get("openprogram")
        if isinstance(tool, Mapping):
            return config, tool
    return None


def pyproject_pricing(start: Path) -> tuple[Path, Mapping[str, Any]] | None:
    """The ``[tool.openprogram.pricing]`` table of the nearest ``pyproject.toml`` above
    ``start`` that has a ``[tool.openprogram]`` table, and that file."""
    found = tool_table(start)
    if found is None:
        return None
    config, tool = found
    pricing = tool.get("pricing")
    if pricing is None:
        return None
    if not isinstance(pricing, Mapping):
        raise ValueError(
            f"{config}: [tool.openprogram] pricing must be a table "
            '([tool.openprogram.pricing.models."PROVIDER:MODEL"])'
        )
    return config, pricing


def load_pricing(files: Iterable[str | Path] = (), *, start: Path | None = None) -> PriceTable:
    """The bundled table, then ``[tool.openprogram.pricing]`` of the nearest pyproject
    above ``start`` (default: the working directory), then each of ``files`` (the bundled
    layout): a later entry for a model replaces an earlier one whole."""
    bundled = _bundled()
    models = _models(BUNDLED, bundled)
    date = str(bundled.get("date", ""))
    read = [f"openprogram_sim/eval/{BUNDLED}"]
    layers: list[tuple[str, Mapping[str, Any]]] = []
    found = pyproject_pricing((start or Path.cwd()).resolve())
    if found is not None:
        layers.append((f"{found[0]} [tool.openprogram.pricing]", found[1]))
    for file in files:
        layers.append((f"--pricing {file}", _read(Path(file))))
    for where, table in layers:
        unknown = sorted(set(table) - {"models", "date", "currency"})
        if unknown:
            raise ValueError(
                f"{where}: unknown key {unknown[0]!r}; a price table has date, currency and "
                '[models."PROVIDER:MODEL"] tables'
            )
        if table.get("currency", "USD") != "USD":
            raise ValueError(f"{where}: currency {table['currency']!r}: prices are in USD")
        models.update(_models(where, table))
        date = str(table.get("date", date))
        read.append(where)
    return PriceTable(models, date, tuple(read))
