"""Traces out: each scenario run's trace written to a folder (``run --trace-out DIR``, the
plugin's ``--openprogram-trace-out DIR``), as the JSON ``openprogram-sim check`` reads, and
with ``otel`` as OpenTelemetry GenAI spans in OTLP JSON too (:mod:`._otel_export`).

One file per run, named after the scenario file and its title (``scenarios__basics__
one_pick--one-pick.trace.json``; characters other than letters, digits, ``.``, ``_`` and
``-`` become ``-``, a long name is cut and ends with a hash of the whole), written
atomically. The trace holds what the model and the tools said (texts, arguments, results,
error messages): every string is scrubbed as a cassette's body is (key shapes and the
secret values of the environment's provider variables) before it is written.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from openprogram_sim.cassettes._atomic import atomic_write
from openprogram_sim.cassettes._secrets import Scrubber, known_secrets
from openprogram_sim.play import RunOutcome
from openprogram_sim.report._otel_export import otlp_json

__all__ = ["TraceOut", "trace_file_stem"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_STEM = 150


def _safe(text: str) -> str:
    return _UNSAFE.sub("-", text).strip("-.") or "scenario"


def trace_file_stem(path: str, title: str) -> str:
    """The file name (without suffix) of a run of the scenario file ``path`` (as shown,
    relative to where the run started) titled ``title``."""
    parts = [p for p in PurePath(path).with_suffix("").parts if p not in ("/", "\\", "..", ".")]
    stem = "__".join(_safe(p) for p in parts) + "--" + _safe(title)
    if len(stem) > _MAX_STEM:
        digest = hashlib.sha256(f"{path}\0{title}".encode()).hexdigest()[:10]
        stem = stem[: _MAX_STEM - 11].rstrip("-._") + "-" + digest
    return stem


@dataclass(frozen=True, slots=True)
class TraceOut:
    """Where traces go (``folder``) and whether OTLP spans go with them (``otel``)."""

    folder: Path
    otel: bool = False

    def write(
        self,
        trace: Sequence[dict[str, Any]],
        *,
        path: str,
        title: str,
        model: str | None = None,
        api: str | None = None,
        duration: float = 0.0,
    ) -> list[Path]:
        """Write one run's trace (and its spans, with ``otel``); return the files written.
        Raises :class:`~openprogram_sim.report._otel_export.OtelMissingError` when
        ``otel`` is set and the SDK is not installed, ``OSError`` when the folder cannot
        be written."""
        clean = Scrubber(known_secrets()).value(list(trace))
        stem = trace_file_stem(path, title)
        written = [self.folder / f"{stem}.trace.json"]
        data = {"path": path, "title": title, "trace": clean}
        spans = None
        if self.otel:  # built first: a missing SDK leaves no half of the pair behind
            spans = otlp_json(clean, title=title, model=model, api=api, duration=duration)
        atomic_write(written[0], json.dumps(data, indent=1, ensure_ascii=False, default=str) + "\n")
        if spans is not None:
            written.append(self.folder / f"{stem}.otlp.json")
            atomic_write(written[1], spans)
        return written

    def write_outcome(self, outcome: RunOutcome, *, path: str) -> list[Path]:
        """:meth:`write` for one scenario run: its trace, title, duration, and the model
        and wire API of the provider it used (a cassette's adapter's, a real adapter's,
        ``scripted``)."""
        provider = outcome.provider
        inner = getattr(provider, "inner", None)  # a cassette's replay wraps the adapter
        # ScriptedModel.model; the HTTP adapters' model_id
        model = next(
            (
                v
                for p in (provider, inner)
                for v in (getattr(p, "model", None), getattr(p, "model_id", None))
                if isinstance(v, str) and v
            ),
            None,
        )
        api = getattr(provider, "api", None) or getattr(inner, "api", None)
        return self.write(
            outcome.trace,
            path=path,
            title=outcome.scenario.scenario,
            model=model,
            api=api if isinstance(api, str) else None,
            duration=outcome.duration,
        )
