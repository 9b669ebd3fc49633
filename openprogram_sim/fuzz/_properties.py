"""Your own properties as fuzz invariants (``openprogram-sim fuzz --properties FILE``).

A :class:`UserProperties` holds rules of the ``expect.properties`` vocabulary
(:data:`openprogram_sim.trace.RULES`) and, optionally, an ``expect.trajectory``, each with
where it was written (``file:line``). Both campaigns check it on every generated run beside
the built-in invariants: a broken rule is one violation line, shrunk like the others, and
the regression file written for it carries the rules the shrunk run broke under
``expect.properties`` (and the trajectory under ``expect.trajectory`` when it missed), so
``openprogram-sim run`` on it fails while the bug is there and passes once it is fixed.

It is plain data (picklable): the campaign over your tools sends it to its sandbox process,
where the invariants are checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from openprogram_sim.trace import (
    Trajectory,
    check_properties,
    check_rule,
    describe_rule,
    match_trajectory,
)

__all__ = ["UserProperties", "as_properties"]


@dataclass(frozen=True, slots=True, kw_only=True)
class UserProperties:
    """Rules (``{name: parameters}`` each) and an optional trajectory (the mapping of
    ``expect.trajectory``) checked on every generated run; ``where`` names each rule
    (``props.yaml:3``; default ``property N``), ``trajectory_where`` the trajectory.
    Build one with :meth:`of`, which checks them."""

    rules: tuple[dict[str, Any], ...] = ()
    where: tuple[str, ...] = ()
    trajectory: dict[str, Any] | None = None
    trajectory_where: str = "the trajectory"

    @classmethod
    def of(
        cls,
        rules: Sequence[Mapping[str, Any]] = (),
        *,
        where: Sequence[str] | None = None,
        trajectory: Mapping[str, Any] | None = None,
        trajectory_where: str = "the trajectory",
    ) -> UserProperties:
        """Checked properties; raises ``ValueError`` naming the rule (or the trajectory)
        that is wrong and why."""
        labels = tuple(where) if where is not None else ()
        if where is not None and len(labels) != len(rules):
            raise ValueError(f"{len(rules)} rules but {len(labels)} places in where=")
        labels = labels or tuple(f"property {i + 1}" for i in range(len(rules)))
        for label, rule in zip(labels, rules, strict=True):
            try:
                check_rule(rule)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
                )
                raise ValueError(f"{label}: {problems}") from None
        if trajectory is not None:
            try:
                Trajectory.model_validate(dict(trajectory))
            except ValidationError as exc:
                raise ValueError(f"{trajectory_where}: {exc}") from None
        return cls(
            rules=tuple(dict(r) for r in rules),
            where=labels,
            trajectory=dict(trajectory) if trajectory is not None else None,
            trajectory_where=trajectory_where,
        )

    def __bool__(self) -> bool:
        return bool(self.rules) or self.trajectory is not None

    def violations(self, trace: Sequence[Mapping[str, Any]]) -> list[str]:
        """One line per way ``trace`` breaks a rule (the events ``#N`` first, as the
        built-in invariants write them, then the rule, where it was written and why), and
        one for a trajectory it misses."""
        out = []
        for v in check_properties(list(trace), self.rules):
            events = " ".join(f"#{n}" for n in sorted(set(v.events))[:3])
            out.append(
                f"{events + ' ' if events else ''}property {describe_rule(self.rules[v.rule])} "
                f"({self.where[v.rule]}) does not hold: {v.message}"
            )
        missed = self._missed(trace)
        if missed is not None:
            out.append(missed)
        return out

    def _missed(self, trace: Sequence[Mapping[str, Any]]) -> str | None:
        """The trajectory's miss in one line (its score, and the first reason), or None."""
        if self.trajectory is None:
            return None
        spec = Trajectory.model_validate(self.trajectory)
        result = match_trajectory(list(trace), spec)
        if result.passed:
            return None
        reasons = result.explain().splitlines()[1:2]
        return (
            f"the trajectory ({spec.mode}, {self.trajectory_where}) did not match: score "
            f"{result.score:.2f}, min_score {spec.min_score:g}" + "".join(f"; {r}" for r in reasons)
        )

    def broken(self, trace: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """What a regression file expects of the run of ``trace``: the rules it breaks
        (``properties:``) and the trajectory when it misses it (``trajectory:``); empty
        when it keeps them all."""
        out: dict[str, Any] = {}
        if self.rules:
            hit = sorted({v.rule for v in check_properties(list(trace), self.rules)})
            if hit:
                out["properties"] = [self.rules[i] for i in hit]
        if self._missed(trace) is not None:
            out["trajectory"] = self.trajectory
        return out


def as_properties(value: UserProperties | Sequence[Mapping[str, Any]] | None) -> UserProperties:
    """``properties=`` of a campaign: a :class:`UserProperties`, a list of rules, or None."""
    if value is None:
        return UserProperties()
    if isinstance(value, UserProperties):
        return value
    if isinstance(value, Mapping | str | bytes):
        raise ValueError(
            "properties= takes a list of rules ([{'at_most': {'tool': 'search', 'times': 3}}]) "
            f"or a UserProperties; got {type(value).__name__}"
        )
    return UserProperties.of(list(value))
