"""Gating: which tools a call may offer, decided by layers applied in a fixed order.

The layers, in order (each one only removes; none can bring back what an earlier one
removed):

1. ``available_if`` -- evaluated once when the decorator is applied; a tool whose
   condition failed is never registered and is dropped from any ``tools=`` list.
2. ``expose`` -- ``expose=False`` hides a tool from every tools array.
3. ``toolset`` -- the call's toolset (``"full"``: all; ``"none"``: nothing; a named set).
4. ``tools_source`` -- tools marked ``unsafe_in`` that source are dropped.
5. availability -- the tool's ``check`` function and ``requires_env`` variables.
6. ``tools_allow`` -- a ceiling: only these names may stay.
7. ``tools_deny`` -- these names are removed.
8. ``defer`` -- survivors marked ``defer=True`` stay callable but their schemas are not
   sent to the provider until ``tool_search`` loads them.

Availability comes after the cheap name-based layers so a check function never runs for
a tool the call would not offer anyway.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, NamedTuple

from openprogram.errors import ArgumentTypeError

if TYPE_CHECKING:
    from openprogram.tools._tool import Tool

__all__ = ["LAYERS", "Dropped", "Selection", "ToolGates", "ToolPolicy", "select_tools"]

LAYERS = (
    "available_if",
    "expose",
    "toolset",
    "tools_source",
    "availability",
    "tools_allow",
    "tools_deny",
)
"""The removing layers, in the order they apply (``defer`` follows; it removes nothing)."""


@dataclass(frozen=True, slots=True)
class ToolGates:
    """A tool's own gating flags (set by the decorators, or keys of a tool dict)."""

    available: bool = True
    """The ``available_if`` verdict, taken when the tool was defined."""
    expose: bool = True
    toolsets: frozenset[str] = frozenset()
    """Toolsets this tool declares membership of."""
    unsafe_in: frozenset[str] = frozenset()
    """Sources (``tools_source=``) where this tool must not be offered."""
    check: Callable[[], bool] | None = None
    """Called at resolution time; False or an exception makes the tool unavailable."""
    requires_env: tuple[str, ...] = ()
    """Environment variables that must be set (non-empty)."""
    defer: bool = False


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """The call-level policy: ``exec``'s ``toolset``/``tools_source``/``tools_allow``/
    ``tools_deny``. ``None`` means "not set" (so a nested exec inherits the outer value)."""

    toolset: str | None = None
    source: str | None = None
    allow: frozenset[str] | None = None
    deny: frozenset[str] | None = None

    @classmethod
    def of(
        cls,
        toolset: str | None = None,
        source: str | None = None,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] | None = None,
    ) -> ToolPolicy:
        """Build a policy, checking the types (a bare string is not a list of names)."""
        unset = toolset is None and source is None and allow is None and deny is None
        if unset and cls is ToolPolicy:  # frozen: the unset policy is one object (every exec)
            return _NO_KEYS
        for label, value in (("tools_allow", allow), ("tools_deny", deny)):
            if isinstance(value, (str, bytes)):
                raise ArgumentTypeError(
                    f"{label}={value!r} must be a list of tool names, not a string; "
                    f"write {label}=[{value!r}]"
                )
        for label, text in (("toolset", toolset), ("tools_source", source)):
            if text is not None and not isinstance(text, str):
                raise ArgumentTypeError(f"{label}= must be a string, got {type(text).__name__}")
        return cls(
            toolset,
            source,
            None if allow is None else frozenset(allow),
            None if deny is None else frozenset(deny),
        )

    @property
    def unset(self) -> bool:
        """Whether no key is set."""
        return (
            self.toolset is None
            and self.source is None
            and self.allow is None
            and self.deny is None
        )

    def merged_over(self, outer: ToolPolicy) -> ToolPolicy:
        """This policy with the keys it leaves unset taken from ``outer`` (inner wins)."""
        if self.unset or outer.unset:  # nothing to merge (asked by every exec)
            return outer if self.unset else self
        return replace(
            outer,
            **{
                name: value
                for name in ("toolset", "source", "allow", "deny")
                if (value := getattr(self, name)) is not None
            },
        )


_NO_KEYS = ToolPolicy()


class Dropped(NamedTuple):
    """Why one tool was not offered."""

    layer: str
    reason: str


@dataclass(slots=True)
class Selection:
    """The outcome of gating: what is offered, what was dropped (by which layer)."""

    tools: list[Tool]
    """Every tool that passed, deferred ones included (all are callable by name)."""
    dropped: dict[str, Dropped] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    @property
    def deferred(self) -> list[str]:
        """Names of the surviving tools whose schemas are held back (layer 8)."""
        return [t.name for t in self.tools if t.gates.defer]


Membership = Callable[[str, Sequence["Tool"]], frozenset[str]]
"""Returns the names in a toolset (raising for an unknown one)."""


def select_tools(
    tools: Sequence[Tool],
    policy: ToolPolicy,
    toolset_members: Membership,
    environ: Mapping[str, str] | None = None,
) -> Selection:
    """Apply the layers to ``tools`` in order; see the module docstring."""
    env = os.environ if environ is None else environ
    members = _members(policy.toolset, tools, toolset_members)
    selection = Selection([])
    for tool in tools:
        verdict = _first_failing_layer(tool, policy, members, env)
        if verdict is None:
            selection.tools.append(tool)
        else:
            selection.dropped[tool.name] = verdict
    return selection


def _members(
    toolset: str | None, tools: Sequence[Tool], toolset_members: Membership
) -> frozenset[str] | None:
    """The toolset's names; None when the toolset does not filter ("full" or unset)."""
    if toolset is None or toolset == "full":
        return None
    if toolset == "none":
        return frozenset()
    return toolset_members(toolset, tools)


def _first_failing_layer(
    tool: Tool,
    policy: ToolPolicy,
    members: frozenset[str] | None,
    env: Mapping[str, str],
) -> Dropped | None:
    gates = tool.gates
    if not gates.available:
        return Dropped("available_if", "its available_if condition was false")
    if not gates.expose:
        return Dropped("expose", "expose=False")
    if members is not None and tool.name not in members:
        return Dropped("toolset", f"not in toolset {policy.toolset!r}")
    if policy.source is not None and policy.source in gates.unsafe_in:
        return Dropped("tools_source", f"unsafe in source {policy.source!r}")
    unavailable = _unavailable(gates, env)
    if unavailable is not None:
        return Dropped("availability", unavailable)
    if policy.allow is not None and tool.name not in policy.allow:
        return Dropped("tools_allow", "not in tools_allow")
    if policy.deny is not None and tool.name in policy.deny:
        return Dropped("tools_deny", "in tools_deny")
    return None


def _unavailable(gates: ToolGates, env: Mapping[str, str]) -> str | None:
    missing = [name for name in gates.requires_env if not env.get(name)]
    if missing:
        return f"environment variable(s) not set: {', '.join(missing)}"
    if gates.check is None:
        return None
    try:
        ok = gates.check()
    except Exception as exc:  # a failing check means "not available", never a crash
        return f"check raised {type(exc).__name__}: {exc}"
    return None if ok else "check returned False"
