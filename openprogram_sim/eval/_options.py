"""The checked options of ``openprogram-sim eval``, and where a scenario's samples go."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from openprogram_sim.eval._stats import SequentialTest

__all__ = ["EvalOptions", "scenario_slug"]


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

    def __post_init__(self) -> None:
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

    def test(self) -> SequentialTest | None:
        """The sequential test of the verdict (None without a threshold)."""
        if self.threshold is None:
            return None
        looks = None if self.sequential else 1
        return SequentialTest(self.threshold, self.confidence, self.samples, looks)


def scenario_slug(path: str) -> str:
    """The folder name of a scenario's samples under ``--out``: its path (relative to the
    working directory when under it) without the suffix, ``/`` as ``__``."""
    full = Path(path).resolve()
    try:
        rel = full.relative_to(Path.cwd())
    except ValueError:
        rel = Path(full.name)
    return re.sub(r"[^\w.-]+", "_", "__".join(rel.with_suffix("").parts))
