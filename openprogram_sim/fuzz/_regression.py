"""Regression files as a person writes them: YAML with literal blocks for multi-line text,
one line per expected event and per request, named by a digest of the content (so the same
case is written once).

Both campaigns write their files here: the loop campaign's, whose expectations come from the
seed's rules (:mod:`.loop._regression`), and the tool contract's (:mod:`.tools._regression`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

from openprogram_sim.cassettes._atomic import atomic_write

__all__ = ["regression_text", "write_document"]


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks, the way a person writes them."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value and value.strip() == value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


class _Line(dict[str, Any]):
    """A mapping written on one line (an expected event, a request)."""


def _line(dumper: yaml.SafeDumper, value: _Line) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", value, flow_style=True)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(_Line, _line)


def regression_text(document: dict[str, Any]) -> str:
    """The document as the YAML a person would write: one line per expected event and per
    request."""
    expect = dict(document.get("expect") or {})
    expect["events"] = [{k: _Line(v) for k, v in e.items()} for e in expect.get("events", [])]
    expect["requests"] = [_Line(r) for r in expect.get("requests", [])]
    return yaml.dump(
        {**document, "expect": {k: v for k, v in expect.items() if v != []}},
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=None,
        width=200,
    )


def write_document(directory: str | Path, document: dict[str, Any]) -> Path:
    """Write a regression ``document`` as YAML under ``directory``; returns its path (named by
    a digest of the content), atomically: a run killed while writing leaves no half file to
    collect."""
    text = regression_text(document)
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fuzz_{digest}.yaml"
    atomic_write(path, text, mode=0o644)
    return path
