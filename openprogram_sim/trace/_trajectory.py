"""Trajectories: the tool calls a run made, checked against the calls expected, with a
graded score.

The calls are read from a trace's ``tool_execution_start`` events (``#N`` is that event's
number), each with the round it was made in (calls of one assistant reply share a round).
Expected calls are a list: a tool name, ``{name: {arg: matcher}}`` (with ``args_mode:``
beside it to override the trajectory's ``args``), or a list of those, calls made in one
round in any order within it. Modes:

``exact``      the same calls, in the same rounds, in the same order
``in_order``   these calls in this order; other calls may come between
``any_order``  the same calls (as a multiset), in any order and rounds
``subset``     every call made is one of these (an allow-list, each entry covering one call)
``superset``   every one of these is made (must-include); other calls may be made too

A round group (a list) holds in the modes that keep order (``exact``, ``in_order``): its
calls must share one round. Every check computes precision (matched / calls made), recall
(matched / calls expected) and F1 over calls, with ``matched`` from an alignment that keeps
order (a longest common subsequence of rounds or calls) in the ordered modes and from a
best one-to-one matching in the others. Each mode's score is the measure that says it
holds: F1 for ``exact`` and ``any_order``, recall for ``in_order`` and ``superset``,
precision for ``subset``; the trajectory passes when its score reaches ``min_score``.
"""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from openprogram_sim.trace._explain import CELL
from openprogram_sim.trace._matchers import (
    check_matcher,
    describe,
    describe_pair,
    matches,
    show,
    unmatched,
)
from openprogram_sim.trace._paths import ABSENT, path_text

__all__ = [
    "ARGS_MODES",
    "MODES",
    "Trajectory",
    "TrajectoryResult",
    "TraceCall",
    "assert_trajectory",
    "match_trajectory",
    "trace_calls",
]

MODES = ("exact", "in_order", "any_order", "subset", "superset")
"""How expected calls relate to the calls made (see the module's docstring)."""
ARGS_MODES = ("exact", "subset", "ignore")
"""How an expected call's arguments are compared: ``exact`` (every argument named),
``subset`` (the ones given must match, others may be present), ``ignore``."""

_SCORED_BY = {
    "exact": "f1",
    "in_order": "recall",
    "any_order": "f1",
    "subset": "precision",
    "superset": "recall",
}
_ORDERED = ("exact", "in_order")


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceCall:
    """One tool call a run made, as its trace holds it."""

    index: int
    """The number (``#N``) of its ``tool_execution_start`` event."""
    end: int | None
    """The number of its ``tool_execution_end`` event (None when the trace has none)."""
    name: str
    args: Any
    result: Any
    """Its result text (None without an end event)."""
    is_error: bool | None
    depth: int
    round: int
    exec: int
    """Which exec it was made in (execs counted by their ``agent_start``, from 1; 0 when
    the trace has none): two nested execs at the same depth have the same rounds."""

    @property
    def round_key(self) -> tuple[int, int, int]:
        """What calls made in one round share."""
        return (self.exec, self.depth, self.round)

    def render(self) -> str:
        """``#6 search({"q": "a"}) d0 r1``."""
        args = show(self.args)
        args = args if len(args) <= 60 else args[:57] + "..."
        return f"#{self.index} {self.name}({args}) d{self.depth} r{self.round}"


def trace_calls(trace: Sequence[Mapping[str, Any]]) -> list[TraceCall]:
    """Every tool call in ``trace``, in the order the calls started."""
    calls: list[dict[str, Any]] = []
    open_calls: dict[tuple[Any, Any], dict[str, Any]] = {}
    execs: dict[int, int] = {}
    count = 0
    for i, e in enumerate(trace):
        kind, depth = e.get("type"), int(e.get("depth", 0) or 0)
        if kind == "agent_start":
            count += 1
            execs[depth] = count
        elif kind == "tool_execution_start":
            call = {
                "index": i,
                "end": None,
                "name": str(e.get("tool_name")),
                "args": e.get("args"),
                "result": None,
                "is_error": None,
                "depth": depth,
                "round": int(e.get("round", 0) or 0),
                "exec": execs.get(depth, 0),
            }
            calls.append(call)
            open_calls[(depth, e.get("tool_call_id"))] = call
        elif kind == "tool_execution_end":
            started = open_calls.pop((depth, e.get("tool_call_id")), None)
            if started is not None:
                started.update(end=i, result=e.get("result"), is_error=e.get("is_error"))
    return [TraceCall(**c) for c in calls]


# -- the expected calls ------------------------------------------------------------------


def _problem(loc: tuple[Any, ...], message: str, value: Any) -> ValidationError:
    return ValidationError.from_exception_data(
        "trajectory",
        [
            InitErrorDetails(
                type=PydanticCustomError("value_error", "{message}", {"message": message}),
                loc=loc,
                input=value,
            )
        ],
    )


def _check_call(entry: Any, loc: tuple[Any, ...]) -> None:
    """Raise, naming where, when ``entry`` is not one expected call."""
    if isinstance(entry, str):
        return
    if not isinstance(entry, Mapping):
        raise _problem(
            loc,
            f"an expected call is a tool name or {{name: {{arg: value}}}}, got {show(entry)}",
            entry,
        )
    names = [k for k in entry if k != "args_mode"]
    if len(names) != 1 or not isinstance(names[0], str):
        raise _problem(
            loc,
            "an expected call names one tool: {search: {q: ...}} (calls made in one round are "
            f"a list: [get_weather, get_time]); got {show(entry)}",
            entry,
        )
    mode = entry.get("args_mode", ABSENT)
    if mode is not ABSENT and mode not in ARGS_MODES:
        raise _problem(
            (*loc, "args_mode"),
            f"args_mode is one of {', '.join(ARGS_MODES)}; got {show(mode)}",
            mode,
        )
    args = entry[names[0]]
    if args is not None and not isinstance(args, Mapping):
        raise _problem(
            (*loc, names[0]),
            f"the arguments of {names[0]} are a mapping ({{q: value}}) or a matcher; "
            f"got {show(args)}",
            args,
        )
    problem = check_matcher(args)
    if problem:
        raise _problem((*loc, names[0]), problem, args)


def _is_operator(value: Any) -> bool:
    return isinstance(value, Mapping) and len(value) == 1 and str(next(iter(value))).startswith("$")


_ONE_CALL: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "description": "A tool's name: any arguments."},
        {
            "type": "object",
            "description": "{name: {arg: value or matcher}}; args_mode: beside it overrides "
            "the trajectory's args for this call.",
            "minProperties": 1,
            "maxProperties": 2,
            "properties": {"args_mode": {"enum": list(ARGS_MODES)}},
            "additionalProperties": {"anyOf": [{"type": "object"}, {"type": "null"}]},
        },
    ]
}
_CALLS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "anyOf": [
            _ONE_CALL,
            {
                "type": "array",
                "minItems": 1,
                "items": _ONE_CALL,
                "description": "Calls made in one round, in any order within it.",
            },
        ]
    },
}


class Trajectory(BaseModel):
    """``expect.trajectory``: the tool calls expected, how they are compared, and the score
    that must be reached."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["exact", "in_order", "any_order", "subset", "superset"] = Field(
        "in_order",
        description="exact: the same calls, rounds and order; in_order: these calls in this "
        "order, others may come between; any_order: the same calls in any order; subset: "
        "every call made is one of these (an allow-list); superset: all of these are made "
        "(must-include).",
    )
    args: Literal["exact", "subset", "ignore"] = Field(
        "subset",
        description="How arguments compare: exact (every argument named), subset (the ones "
        "given match, others may be present) or ignore. A call's args_mode: overrides it.",
    )
    depth: int | Literal["all"] = Field(
        0,
        description="Whose calls: the exec at this depth (0: the outer exec; 1: the execs "
        "nested in its tools), or 'all' for every depth.",
    )
    calls: Annotated[list[Any], WithJsonSchema(_CALLS_SCHEMA)] = Field(
        description="The expected calls, in order: a tool name, {name: {arg: value or "
        "matcher}} (args_mode: beside it overrides args), or a list of those: calls made in "
        "one round, in any order within it (held by exact and in_order)."
    )
    min_score: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="The score the trajectory must reach (the mode's measure: F1 for exact "
        "and any_order, recall for in_order and superset, precision for subset); 1.0: it "
        "must hold.",
    )

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for key in data:
                if key not in cls.model_fields:
                    close = difflib.get_close_matches(str(key), list(cls.model_fields), n=1)
                    hint = (
                        f"did you mean {close[0]!r}?"
                        if close
                        else f"allowed keys: {', '.join(cls.model_fields)}"
                    )
                    raise _problem((key,), f"unknown key {key!r}; {hint}", data[key])
        return data

    @field_validator("depth")
    @classmethod
    def _depth(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 0:
            raise ValueError(f"depth is 0 or more, or 'all'; got {value}")
        return value

    @field_validator("calls")
    @classmethod
    def _calls(cls, value: list[Any]) -> list[Any]:
        for i, entry in enumerate(value):
            if isinstance(entry, list):
                if not entry:
                    raise _problem(
                        (i,), "a round group lists one call or more: [get_weather, get_time]", entry
                    )
                for j, member in enumerate(entry):
                    if isinstance(member, list):
                        raise _problem(
                            (i, j), "a round group holds calls, not another list", member
                        )
                    _check_call(member, (i, j))
            else:
                _check_call(entry, (i,))
        return value


@dataclass(frozen=True, slots=True)
class _Spec:
    """One expected call, compiled."""

    number: int
    """1-based among the expected calls (groups' members counted one by one)."""
    item: int
    """Index of its entry in ``calls``."""
    member: int | None
    """Its index within a round group (None: the entry is one call)."""
    name: str
    args: Any
    """The expected arguments (None: any)."""
    mode: str

    def wanted(self) -> Any:
        """The matcher the call's arguments must satisfy (ABSENT: anything)."""
        if self.args is None or self.mode == "ignore":
            return ABSENT
        if self.mode == "subset" and isinstance(self.args, Mapping) and not _is_operator(self.args):
            return {"$subset": dict(self.args)}
        return self.args

    def fits(self, call: TraceCall) -> bool:
        if call.name != self.name:
            return False
        want = self.wanted()
        return want is ABSENT or matches(want, call.args)

    def describe(self) -> str:
        """``search {q: contains "weather"}`` (``(exact args)`` when every one is named)."""
        if self.args is None or self.mode == "ignore":
            return self.name
        if _is_operator(self.args):
            return f"{self.name} {describe(self.args)}"
        shown = ", ".join(f"{k}: {describe(v)}" for k, v in self.args.items())
        return f"{self.name} {{{shown}}}" + (" (exact args)" if self.mode == "exact" else "")


def _compile(spec: Trajectory) -> list[list[_Spec]]:
    groups: list[list[_Spec]] = []
    number = 0
    for i, entry in enumerate(spec.calls):
        members = entry if isinstance(entry, list) else [entry]
        group = []
        for j, member in enumerate(members):
            number += 1
            if isinstance(member, str):
                name, args, mode = member, None, spec.args
            else:
                name = next(k for k in member if k != "args_mode")
                args, mode = member[name], member.get("args_mode", spec.args)
            group.append(_Spec(number, i, j if isinstance(entry, list) else None, name, args, mode))
        groups.append(group)
    return groups


# -- matching ----------------------------------------------------------------------------


def _matching(fits: Sequence[Sequence[int]]) -> dict[int, int]:
    """A largest one-to-one matching (augmenting paths): ``fits[s]`` lists the calls spec
    ``s`` may take; the result maps spec -> call."""
    owner: dict[int, int] = {}

    def augment(s: int, seen: set[int]) -> bool:
        for c in fits[s]:
            if c in seen:
                continue
            seen.add(c)
            if c not in owner or augment(owner[c], seen):
                owner[c] = s
                return True
        return False

    for s in range(len(fits)):
        augment(s, set())
    return {s: c for c, s in owner.items()}


def _max_matching(specs: Sequence[_Spec], calls: Sequence[TraceCall]) -> dict[int, int]:
    """A largest one-to-one matching of ``specs`` to ``calls``: spec position -> call
    position."""
    return _matching([[c for c, call in enumerate(calls) if s.fits(call)] for s in specs])


def _rounds(calls: Sequence[TraceCall]) -> list[list[int]]:
    """Call positions grouped by round, rounds in the order their first call came."""
    out: dict[tuple[int, int, int], list[int]] = {}
    for k, call in enumerate(calls):
        out.setdefault(call.round_key, []).append(k)
    return list(out.values())


def _align_exact(groups: list[list[_Spec]], calls: list[TraceCall]) -> dict[int, int]:
    """Expected entries against rounds, in order (a weighted longest common subsequence
    whose weight is how many of an entry's calls its round matches)."""
    rounds = _rounds(calls)
    n, m = len(groups), len(rounds)

    @cache
    def pair(k: int, r: int) -> dict[int, int]:
        found = _max_matching(groups[k], [calls[c] for c in rounds[r]])
        return {s: rounds[r][c] for s, c in found.items()}

    best = [[0] * (m + 1) for _ in range(n + 1)]
    for k in range(n - 1, -1, -1):
        for r in range(m - 1, -1, -1):
            best[k][r] = max(best[k + 1][r], best[k][r + 1], len(pair(k, r)) + best[k + 1][r + 1])
    out: dict[int, int] = {}
    k = r = 0
    while k < n and r < m:
        took = pair(k, r)
        if took and best[k][r] == len(took) + best[k + 1][r + 1]:
            out.update({groups[k][s].number: c for s, c in took.items()})
            k, r = k + 1, r + 1
        elif best[k][r] == best[k + 1][r]:
            k += 1
        else:
            r += 1
    return out


def _align_in_order(groups: list[list[_Spec]], calls: list[TraceCall]) -> dict[int, int]:
    """Expected entries in order against the calls made: each entry's calls in one round,
    after the previous entry's; as many expected calls matched as can be (a longest common
    subsequence, a round group counting its matched calls). Filled from the last entry
    back: ``best[k][p]`` is the most calls entries ``k..`` match from position ``p`` on."""
    n, total = len(groups), len(calls)
    members: dict[tuple[int, int, int], list[int]] = {}
    for c, call in enumerate(calls):
        members.setdefault(call.round_key, []).append(c)
    best = [[0] * (total + 2) for _ in range(n + 1)]
    picks: list[list[tuple[dict[int, int], int] | None]] = [[None] * (total + 1) for _ in range(n)]
    for k in range(n - 1, -1, -1):
        fits = [{c for c in range(total) if spec.fits(calls[c])} for spec in groups[k]]
        fitting = sorted(set().union(*fits))
        for p in range(total, -1, -1):
            score, pick = -1, None
            for found, after in _options(fits, fitting, members, calls, p):
                if len(found) + best[k + 1][after] > score:  # earlier first: a tie matches early
                    score, pick = len(found) + best[k + 1][after], (found, after)
            if best[k + 1][p] > score:
                score, pick = best[k + 1][p], None
            best[k][p], picks[k][p] = score, pick
    out: dict[int, int] = {}
    p = 0
    for k in range(n):
        pick = picks[k][p]
        if pick is not None:
            found, p = pick
            out.update({groups[k][s].number: c for s, c in found.items()})
    return out


def _options(
    fits: list[set[int]],
    fitting: list[int],
    members: Mapping[tuple[int, int, int], list[int]],
    calls: list[TraceCall],
    p: int,
) -> Iterator[tuple[dict[int, int], int]]:
    """The ways one entry (its specs' ``fits``) can match calls from position ``p`` on, each
    within one round: its matching (spec -> call) and the position after its last call. Of
    the ways that match the same number of calls in a round, only the one that ends first;
    one call alone, only at its first fit (a later one leaves less room)."""
    rounds_seen: set[tuple[int, int, int]] = set()
    given: list[tuple[int, int]] = []  # (calls matched, position after) of each way yielded
    for c in fitting[bisect_left(fitting, p) :]:
        if len(fits) == 1:
            yield {0: c}, c + 1
            return
        if any(n == len(fits) and after <= c for n, after in given):
            return  # every way from here on ends later and matches no more
        key = calls[c].round_key
        if key in rounds_seen:
            continue
        rounds_seen.add(key)
        window = [m for m in members[key] if m >= p]
        most = 0
        for end, m in enumerate(window):
            if not any(m in f for f in fits):
                continue
            prefix = set(window[: end + 1])
            found = _matching([sorted(f & prefix) for f in fits])
            if len(found) > most:
                most = len(found)
                if not any(n >= most and after <= m + 1 for n, after in given):
                    given.append((most, m + 1))
                    yield found, m + 1


def _align_any(groups: list[list[_Spec]], calls: list[TraceCall]) -> dict[int, int]:
    specs = [s for g in groups for s in g]
    return {specs[s].number: c for s, c in _max_matching(specs, calls).items()}


# -- the result --------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class TrajectoryResult:
    """A trajectory checked against a trace: what matched, the measures and the verdict."""

    spec: Trajectory
    calls: list[TraceCall]
    """The calls made at the trajectory's depth."""
    expected: list[list[Any]] = field(repr=False)
    matched: dict[int, int]
    """Expected call number (1-based) -> position in :attr:`calls` of the call it matched."""

    @property
    def expected_count(self) -> int:
        return sum(len(g) for g in self.expected)

    @property
    def precision(self) -> float:
        """Matched calls / calls made (1.0 when none was made)."""
        return len(self.matched) / len(self.calls) if self.calls else 1.0

    @property
    def recall(self) -> float:
        """Matched calls / calls expected (1.0 when none is expected)."""
        total = self.expected_count
        return len(self.matched) / total if total else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def score(self) -> float:
        """The mode's measure (see :data:`MODES`): F1, recall or precision."""
        return float(getattr(self, _SCORED_BY[self.spec.mode]))

    @property
    def passed(self) -> bool:
        return self.score >= self.spec.min_score - 1e-9

    def measures(self) -> str:
        """``score 0.67 (recall 2/3 = 0.67; precision 2/4 = 0.50; F1 0.57)``."""
        m, e, a = len(self.matched), self.expected_count, len(self.calls)
        return (
            f"score {self.score:.2f} ({_SCORED_BY[self.spec.mode].replace('f1', 'F1')}); "
            f"precision {m}/{a} = {self.precision:.2f}, recall {m}/{e} = {self.recall:.2f}, "
            f"F1 {self.f1:.2f}"
        )

    def title(self) -> str:
        verdict = "holds" if self.passed else "did not match"
        need = repr(float(self.spec.min_score))
        return f"trajectory ({self.spec.mode}) {verdict}: score {self.score:.2f}, min_score {need}"

    def explain(self, line: Callable[[int, int | None], int | None] | None = None) -> str:
        """Which expected calls had no match (with the closest actual call and the differing
        argument paths), which calls made were unexpected, and the calls made by round.
        ``line(entry, member)`` gives the line of an expected call in its file."""
        lines = [self.measures()]
        specs = [s for g in self.expected for s in g]
        used = set(self.matched.values())
        total = len(specs)
        for spec in specs:  # an allow-list (subset) need not be used up
            if spec.number not in self.matched and self.spec.mode != "subset":
                at = line(spec.item, spec.member) if line is not None else None
                lines.extend(self._missing(spec, total, used, at))
        if self.spec.mode in ("exact", "any_order", "subset"):
            for k, call in enumerate(self.calls):
                if k not in used:
                    lines.extend(self._unexpected(call))
        lines.extend(self._listing(used))
        return "\n".join(lines)

    def _missing(self, spec: _Spec, total: int, used: set[int], at: int | None) -> list[str]:
        group = self.expected[spec.item]
        where = ""
        if spec.member is not None:
            names = ", ".join(s.name for s in group)
            where = f" (round group {spec.item + 1}: [{names}])"
        head = f"expected call {spec.number} of {total}{where} had no match: {spec.describe()}"
        if at is not None:
            head += f" (line {at})"
        fitting = [k for k, c in enumerate(self.calls) if spec.fits(c)]
        if fitting:
            shown = ", ".join(f"#{self.calls[k].index}" for k in fitting[:5])
            if all(k in used for k in fitting):
                why = f"every call that matches it ({shown}) matched another expected call"
            elif self.spec.mode == "exact":
                why = (
                    f"calls that match it ({shown}) are not in the round the trajectory gives "
                    "it: in exact mode each entry is one round (calls made in one round are "
                    "a list: [a, b])"
                )
            elif spec.member is not None:
                why = f"calls that match it ({shown}) are not in one round with its group, in order"
            else:
                why = f"calls that match it ({shown}) are out of the order the trajectory gives"
            return [head, f"  {why}"]
        same = [k for k, c in enumerate(self.calls) if c.name == spec.name]
        if not same:
            return [head, f"  no call of {spec.name} was made"]
        want = spec.wanted()
        best = min(same, key=lambda k: (k in used, len(list(unmatched(want, self.calls[k].args)))))
        call = self.calls[best]
        return [head, f"  closest actual call: {call.render()}", *_table(want, call)]

    def _unexpected(self, call: TraceCall) -> list[str]:
        """An unexpected call; in an allow-list (subset), the closest entry of its tool and
        the argument paths that differ."""
        lines = [f"unexpected call: {call.render()}"]
        specs = [s for g in self.expected for s in g if s.name == call.name]
        if self.spec.mode != "subset" or not specs:
            return lines
        taken = [s for s in specs if s.fits(call)]
        if taken:
            numbers = ", ".join(str(s.number) for s in taken)
            return [
                *lines,
                f"  expected call(s) {numbers} allow it but matched other calls: an entry "
                "allows one call (list it again to allow another)",
            ]
        spec = min(specs, key=lambda s: len(list(unmatched(s.wanted(), call.args))))
        lines.append(f"  closest expected call {spec.number}: {spec.describe()}")
        return lines + _table(spec.wanted(), call)

    def _listing(self, used: set[int]) -> list[str]:
        depth = self.spec.depth
        where = "at every depth" if depth == "all" else f"at depth {depth}"
        if not self.calls:
            return [f"calls made {where}: none"]
        by_call = {c: n for n, c in self.matched.items()}
        lines = [f"calls made {where}, by round:"]
        for k, call in enumerate(self.calls[:30]):
            mark = f"  <- expected call {by_call[k]}" if k in by_call else ""
            lines.append(f"  {call.render()}{mark}")
        if len(self.calls) > 30:
            lines.append(f"  ... and {len(self.calls) - 30} more")
        return lines


def _table(want: Any, call: TraceCall) -> list[str]:
    """Expected and actual arguments side by side, at the paths where they differ."""
    rows = [("field", "expected", "actual", "")]
    for place in list(unmatched(want, call.args, ("args",)))[:10]:
        expected, actual = describe_pair(place.expected, place.actual, CELL)
        rows.append((path_text(place.path)[2:], expected, actual, "<- differs"))
    if len(rows) == 1:
        return []
    widths = [max(len(r[c]) for r in rows) for c in range(3)]
    return [
        ("    " + "  ".join(r[c].ljust(widths[c]) for c in range(3)) + "  " + r[3]).rstrip()
        for r in rows
    ]


def match_trajectory(
    trace: Any,
    calls: Sequence[Any] | Trajectory,
    *,
    mode: str = "in_order",
    args: str = "subset",
    depth: int | str = 0,
    min_score: float = 1.0,
) -> TrajectoryResult:
    """Check the tool calls of ``trace`` (its entries, or anything with a ``.trace``)
    against ``calls`` (or a whole :class:`Trajectory`); the result has the measures, the
    score and the verdict (``result.passed``), and explains a miss (``result.explain()``).
    Bad arguments raise ``ValueError`` naming the value and what is allowed."""
    spec = calls if isinstance(calls, Trajectory) else _spec(calls, mode, args, depth, min_score)
    entries = getattr(trace, "trace", trace)
    made = [c for c in trace_calls(entries) if spec.depth == "all" or c.depth == spec.depth]
    groups = _compile(spec)
    if spec.mode == "exact":
        matched = _align_exact(groups, made)
    elif spec.mode == "in_order":
        matched = _align_in_order(groups, made)
    else:
        matched = _align_any(groups, made)
    return TrajectoryResult(spec=spec, calls=made, expected=groups, matched=matched)


def _spec(calls: Any, mode: str, args: str, depth: Any, min_score: float) -> Trajectory:
    raw = {"mode": mode, "args": args, "depth": depth, "calls": calls, "min_score": min_score}
    try:
        return Trajectory.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'trajectory'}: "
            f"{e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ValueError(f"bad trajectory: {problems}") from None


def assert_trajectory(
    trace: Any,
    calls: Sequence[Any] | Trajectory,
    *,
    mode: str = "in_order",
    args: str = "subset",
    depth: int | str = 0,
    min_score: float = 1.0,
) -> TrajectoryResult:
    """Assert that the tool calls of ``trace`` match ``calls`` (see
    :func:`match_trajectory`); raises ``AssertionError`` with the message a scenario's
    ``expect.trajectory`` prints, and returns the result (its score) when it holds::

        assert_trajectory(rec.trace, ["search", ["get_weather", "get_time"]], mode="exact")
    """
    __tracebackhide__ = True
    result = match_trajectory(trace, calls, mode=mode, args=args, depth=depth, min_score=min_score)
    if not result.passed:
        indented = "\n".join(f"  {line}" for line in result.explain().splitlines())
        raise AssertionError(f"{result.title()}\n{indented}")
    return result
