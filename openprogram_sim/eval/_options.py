"""The checked options of ``openprogram-sim eval``, and where a scenario's samples go."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openprogram_sim.cassettes import Cassette
from openprogram_sim.eval._pricing import PriceTable, load_pricing, tool_table
from openprogram_sim.eval._retries import RetryPolicy, retrying_client
from openprogram_sim.eval._stats import SequentialTest

__all__ = ["LIMITS_SETTING", "EvalOptions", "pyproject_limits", "scenario_slug"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalOptions:
    """How an eval samples: the checked options of ``openprogram-sim eval``."""

    model: str
    """The real adapter, ``PROVIDER:MODEL``."""
    samples: int = 10
    """The most samples per scenario."""
    base_url: str | None = None
    """The adapter's base URL; ``{sample}`` in it is replaced by a name per sample (a wire
    server's session: ``http://127.0.0.1:PORT/s/{sample}/v1``)."""
    threshold: float | None = None
    """The pass rate a scenario must clear (None: every sample must pass)."""
    confidence: float = 0.95
    sequential: bool = True
    """Stop as soon as the verdict is decided (with a threshold)."""
    out: Path = Path("reports/eval")
    timeout: float = 120.0
    """Seconds of real time each sample's run may take (in place of the scenario's
    ``timeout:``, which is set for the scripted model)."""
    concurrency: int = 1
    """Samples in flight at once (over the scenarios too)."""
    provider_limits: Mapping[str, int] = field(default_factory=dict)
    """The most samples in flight per provider (``openai``: 4); :meth:`slots` is the
    smaller of this and :attr:`concurrency` for the model's provider."""
    retries: RetryPolicy = field(default_factory=RetryPolicy)
    """How a model call refused with 429 or 5xx is retried (see :mod:`._retries`)."""
    budget: float | None = None
    """Dollars the eval may spend: no sample is started whose estimated cost would take
    the spend past it."""
    pricing: PriceTable | None = None
    """The prices (None: the bundled table with the pyproject's overrides, read when the
    eval starts)."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"--concurrency must be at least 1, got {self.concurrency}")
        for provider, limit in self.provider_limits.items():
            if limit < 1:
                raise ValueError(
                    f"--max-concurrency-per-provider {provider}={limit}: the limit must be at "
                    "least 1"
                )
        if self.budget is not None and not (math.isfinite(self.budget) and self.budget > 0):
            raise ValueError(f"--budget must be dollars > 0 (e.g. 2.50), got {self.budget}")
        if not self.timeout > 0:
            raise ValueError(f"--timeout must be a number of seconds > 0, got {self.timeout}")
        if self.samples < 1:
            raise ValueError(f"--samples must be at least 1, got {self.samples}")
        if not 0 < self.confidence < 1:
            raise ValueError(
                f"--confidence must be between 0 and 1 (e.g. 0.95), got {self.confidence}"
            )
        if self.threshold is not None and not 0 <= self.threshold <= 1:
            raise ValueError(
                f"--threshold is a pass rate between 0 and 1 (e.g. 0.8), got {self.threshold}"
            )
        if ":" not in self.model:
            raise ValueError(
                f"--model {self.model!r} is not PROVIDER:MODEL (e.g. openai:gpt-4o-mini)"
            )

    @property
    def provider(self) -> str:
        """The provider part of :attr:`model`."""
        return self.model.partition(":")[0]

    def slots(self) -> int:
        """Samples in flight at once: :attr:`concurrency`, within the provider's limit."""
        limit = self.provider_limits.get(self.provider)
        return self.concurrency if limit is None else min(self.concurrency, limit)

    def prices(self) -> PriceTable:
        """:attr:`pricing`, or the bundled table with the pyproject's overrides."""
        return self.pricing if self.pricing is not None else load_pricing()

    def client(self, cassette: Cassette, **options: Any) -> Any:
        """The ``httpx2.AsyncClient`` a sample's adapter sends through: answered by its
        ``cassette``, a 429 or 5xx retried under :attr:`retries`."""
        return retrying_client(cassette, self.retries, **options)

    def test(self) -> SequentialTest | None:
        """The sequential test of the verdict (None without a threshold)."""
        if self.threshold is None:
            return None
        looks = None if self.sequential else 1
        return SequentialTest(self.threshold, self.confidence, self.samples, looks)


LIMITS_SETTING = "max-concurrency-per-provider"
"""The ``[tool.openprogram.eval]`` key of the most samples at once per provider."""


def pyproject_limits(start: Path | None = None) -> dict[str, int]:
    """``[tool.openprogram.eval] max-concurrency-per-provider = {openai = 4}`` of the
    nearest pyproject above ``start`` (default: the working directory): an account's
    limits kept with the project, that ``--max-concurrency-per-provider`` overrides."""
    found = tool_table((start or Path.cwd()).resolve())
    if found is None:
        return {}
    config, tool = found
    table = tool.get("eval", {})
    limits = table.get(LIMITS_SETTING, {}) if isinstance(table, Mapping) else None
    where = f"{config}: [tool.openprogram.eval] {LIMITS_SETTING}"
    if not isinstance(limits, Mapping):
        raise ValueError(f"{where} must be a table of PROVIDER = N (e.g. {{openai = 4}})")
    out = {}
    for provider, limit in limits.items():
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"{where}: {provider} = {limit!r} is not a number of samples >= 1")
        out[str(provider)] = limit
    return out


def scenario_slug(path: str) -> str:
    """The folder name of a scenario's samples under ``--out``: its path (relative to the
    working directory when under it) without the suffix, ``/`` as ``__``."""
    full = Path(path).resolve()
    try:
        rel = full.relative_to(Path.cwd())
    except ValueError:
        rel = Path(full.name)
    return re.sub(r"[^\w.-]+", "_", "__".join(rel.with_suffix("").parts))
