"""Explaining a mismatch so that the difference shows.

A failed event expectation prints the trace around the closest actual event, then the
expected and actual fields side by side, down to the differing key (``args.body``) or
index (``tool_calls[2]``); a value too long for its column is cut around where the two
differ, never at the same place on both sides. Hints follow where a common mistake shows:
an expected mapping that does not name every key (``$subset``), an expected argument the
model never sent because only the tool's schema has it as a default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from openprogram_sim.trace._match import EventMismatch
from openprogram_sim.trace._matchers import (
    LINE_WIDTH,
    Unmatched,
    describe,
    describe_pair,
    show,
    unmatched,
)
from openprogram_sim.trace._paths import ABSENT, path_text

__all__ = ["CELL", "diff_lines", "render_entry", "render_mismatch"]

CELL = 40
"""The most characters a value takes in the side-by-side table of fields."""
PLACES = 10
"""The most differing places shown under one field."""


def render_entry(entry: Mapping[str, Any]) -> str:
    """One trace entry as a line a person can read: ``tool_execution_end search(...) -> ...``."""
    t = entry["type"]
    head = f"{t:<22} d{entry.get('depth', 0)} r{entry.get('round', 0)}"
    if t.startswith("tool_execution"):
        args = show(entry.get("args"))
        text = f"{head} {entry.get('tool_name')}({_cut(args, 60)})"
        if t == "tool_execution_end":
            flag = "error" if entry.get("is_error") else "ok"
            text += f" -> {flag}: {show(_cut(str(entry.get('result')), 60))}"
        return text
    if t.startswith("message"):
        text = f"{head} {entry.get('role')}"
        if entry.get("tool_calls"):
            text += f" calls={show(entry['tool_calls'])}"
        if entry.get("text"):
            text += f" {show(_cut(entry['text'], 60))}"
        if t == "message_end" and entry.get("role") == "assistant":
            text += f" [{entry.get('stop_reason')}]"
        return text
    if t == "agent_end":
        return f"{head} reason={entry.get('reason')}"
    return head


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def render_mismatch(
    mismatch: EventMismatch,
    trace: list[dict[str, Any]],
    *,
    total: int,
    context: int = 3,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """The first expectation that did not match, the events around the closest actual event
    of its type, and expected and actual fields side by side, down to the differing keys.

    ``schemas`` maps a tool's name to the JSON Schema of its arguments (as the model was
    sent it): an expected argument missing from a call then says when the schema has a
    default for it."""
    ((event_type, fields),) = mismatch.expected.items()
    fields = fields or {}
    want = ", ".join(f"{k}: {describe(v)}" for k, v in fields.items())
    lines = [
        f"expected event {mismatch.index + 1} of {total} did not match: {mismatch.reason}",
        f"  {event_type} {{{want}}}",
        *_window(mismatch, trace, event_type, context),
    ]
    if mismatch.candidate is not None:
        actual = trace[mismatch.candidate]
        places = {n: list(unmatched(w, actual.get(n, ABSENT), (n,))) for n, w in fields.items()}
        lines.append(f"closest actual {event_type}: #{mismatch.candidate}")
        lines.extend(_side_by_side(fields, actual, places))
        found = [u for us in places.values() for u in us]
        lines.extend(_subset_hints(fields, found))
        lines.extend(_default_hints(found, actual, schemas or {}))
    return "\n".join(lines)


def _window(
    mismatch: EventMismatch, trace: list[dict[str, Any]], event_type: str, context: int
) -> list[str]:
    """The trace around the closest actual event (or, with none, around where the expected
    one should have been), and the previous expectation's match when it falls outside."""
    closest, previous = mismatch.candidate, mismatch.previous
    if closest is None or closest == mismatch.position:
        focus = mismatch.position
        head = f"trace around where it should have been (at #{focus}):"
    else:
        focus = closest
        head = f"trace around the closest actual {event_type}"
        if previous is not None:
            head += f" (expected after #{previous})"
        head += ":"
    lo, hi = max(0, focus - context), min(len(trace), focus + context + 1)
    lines = [head]
    if closest is not None and previous is not None and previous < lo:
        lines.append(f"    #{previous:<3} {render_entry(trace[previous])}")
        if previous < lo - 1:
            lines.append("    ...")
    for i in range(lo, hi):
        marker = ">" if i == focus else " "
        lines.append(f"  {marker} #{i:<3} {render_entry(trace[i])}")
    if not trace[lo:hi]:
        lines.append("    (no events there: the trace has ended)")
    if (
        closest is None
        and not event_type.startswith("(")
        and all(e["type"] != event_type for e in trace)
    ):
        lines.append(f"    (the trace has no {event_type} at all)")
    return lines


def _label(path: Sequence[str | int]) -> str:
    """``("args", "body")`` as ``args.body``; ``("tool_calls", 2)`` as ``tool_calls[2]``."""
    text = path_text(path)
    return text[2:] if text.startswith("$.") else text[1:]


def _pair(place: Unmatched, width: int) -> tuple[str, str, str]:
    """Expected and actual as shown in ``width`` characters, and, when one had to be cut,
    their sizes (`` (12 items expected, 14 actual)``)."""
    expected, actual = describe_pair(place.expected, place.actual, width)
    cut = "…" in expected + actual and (expected, actual) != describe_pair(
        place.expected, place.actual, 10**9
    )
    for kind, unit in ((list, "items"), (str, "characters")):
        if cut and isinstance(place.expected, kind) and isinstance(place.actual, kind):
            note = f" ({len(place.expected)} {unit} expected, {len(place.actual)} actual)"
            return expected, actual, note
    return expected, actual, ""


def _side_by_side(
    fields: Mapping[str, Any], actual: Mapping[str, Any], places: Mapping[str, list[Unmatched]]
) -> list[str]:
    rows = [("field", "expected", "actual", "")]
    for name, want in fields.items():
        if not places[name]:
            shown = describe_pair(want, actual[name], CELL)
            rows.append((name, *shown, ""))
            continue
        for place in places[name][:PLACES]:
            expected, have, note = _pair(place, CELL)
            rows.append((_label(place.path), expected, have, "<- differs" + note))
        if len(places[name]) > PLACES:
            more = len(places[name]) - PLACES
            rows.append(("...", "", "", f"and {more} more differing place(s) under {name}"))
    widths = [max(len(r[c]) for r in rows) for c in range(3)]
    return [
        ("  " + "  ".join(r[c].ljust(widths[c]) for c in range(3)) + "  " + r[3]).rstrip()
        for r in rows
    ]


def diff_lines(name: str, expected: Any, actual: Any) -> list[str]:
    """Where ``actual`` fails ``expected``, one line per differing place below ``name``
    (``messages[2].text: expected "a", actual "b"``), then the hints that apply."""
    found = list(unmatched(expected, actual, (name,)))
    lines = []
    for place in found[:PLACES]:
        want, have, note = _pair(place, LINE_WIDTH)
        lines.append(f"{_label(place.path)}: expected {want}, actual {have}{note}")
    if len(found) > PLACES:
        lines.append(f"... and {len(found) - PLACES} more differing place(s) under {name}")
    return lines + _subset_hints({name: expected}, found)


def _subset_hints(fields: Mapping[str, Any], found: Sequence[Unmatched]) -> list[str]:
    """For each expected mapping whose actual has keys it does not name: ``$subset``."""
    extra: dict[tuple[str | int, ...], list[str]] = {}
    for place in found:
        if place.expected is ABSENT:
            extra.setdefault(place.path[:-1], []).append(str(place.path[-1]))
    lines = []
    for parent, keys in extra.items():
        alone = all(p.expected is ABSENT for p in found if p.path[: len(parent)] == parent)
        then = "with $subset it matches" if alone else "to match only the keys it gives, write"
        field = str(parent[0])
        lines += [
            f"hint: the actual {_label(parent)} also has {_and(keys)}, which the expected "
            "mapping does not name (a mapping",
            f"  must name every key); {then}:",
            f"  {field}: {show(_with_subset(fields[field], parent[1:]))}",
        ]
    return lines


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _with_subset(value: Any, path: Sequence[str | int]) -> Any:
    """``value`` with the mapping at ``path`` wrapped in ``{$subset: ...}``."""
    if isinstance(value, Mapping) and list(value) == ["$subset"]:
        return {"$subset": _with_subset(value["$subset"], path)}
    if not path:
        return {"$subset": value}
    head, rest = path[0], path[1:]
    if isinstance(value, list) and isinstance(head, int):
        items = list(value)
        items[head] = _with_subset(items[head], rest)
        return items
    return {k: _with_subset(v, rest) if str(k) == head else v for k, v in value.items()}


def _default_hints(
    found: Sequence[Unmatched],
    actual: Mapping[str, Any],
    schemas: Mapping[str, Mapping[str, Any]],
) -> list[str]:
    """For an expected argument the call lacks and the tool's schema has a default for."""
    tool = actual.get("tool_name")
    schema = schemas.get(tool) if isinstance(tool, str) else None
    if schema is None:
        return []
    lines = []
    for place in found:
        if place.actual is not ABSENT or place.expected is ABSENT or place.path[0] != "args":
            continue
        default = _schema_default(schema, place.path[1:])
        if default is not ABSENT:
            lines += [
                f"hint: the call has no {_label(place.path)} ({tool}'s schema defaults it to "
                f"{show(default)}): events carry",
                "  the arguments the model sent, not the schema's defaults; leave it out of the "
                "expected args",
            ]
    return lines


def _schema_default(schema: Mapping[str, Any], path: Sequence[str | int]) -> Any:
    """The default the JSON Schema gives the value at ``path``, or ``ABSENT``."""
    node: Any = schema
    for part in path:
        node = node.get("items") if isinstance(part, int) else node.get("properties", {}).get(part)
        if not isinstance(node, Mapping):
            return ABSENT
    return node.get("default", ABSENT) if path else ABSENT
