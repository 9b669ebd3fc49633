"""Matching a live request to a recorded one: method, path and JSON body, with an ignore
list of volatile fields (the JSON paths and the diff that explains a miss are
:mod:`openprogram_sim.trace`'s).

vcrpy's default matchers ignore the body, so a changed prompt would replay the old answer;
here the body is compared as JSON (bytes when it is not JSON), leaving out the fields an
ignore pattern names. A pattern is a JSON path: ``$.metadata``, ``$.messages[*].content``,
``$["x-y"]``; ``*`` stands for any one key or index, and a pattern covers everything under
what it names.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DEFAULT_IGNORE", "body_of"]

DEFAULT_IGNORE: tuple[str, ...] = ("$.metadata.user_id", "$.user", "$.safety_identifier")
"""Fields left out of the comparison unless told otherwise: per-user identifiers some
clients fill in on every call."""


def body_of(raw: bytes | None) -> Any:
    """A request body as compared: its parsed JSON, else its bytes."""
    if not raw:
        return b""
    if raw[:1] in (b"{", b"["):
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            pass
    return raw
