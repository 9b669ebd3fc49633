"""``exec(choices=[...])``: end the model's reply with one pick among functions and values.

The menu and the finishing instruction are appended to the prompt; the reply's last JSON
object is the pick: ``{"call": "name", "args": {...}}`` for a function (``action``,
``function`` and ``tool`` are accepted for ``call``; ``arguments`` for ``args``) or
``{"value": ...}`` for a value. A picked function runs and its return value is the result;
a picked value is returned as is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from openprogram.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    OpenProgramError,
    ToolEntryError,
)
from openprogram.tools._decorators import tool_from_callable
from openprogram.tools._tool import Tool, as_tool
from openprogram.tools._validation import ArgumentsError

__all__ = ["Menu", "Pick", "PickError"]

_CALL_KEYS = ("call", "action", "function", "tool")
_ARGS_KEYS = ("args", "arguments")
_SCALARS = (str, int, float, bool, type(None))


class PickError(OpenProgramError, ValueError):
    """The reply holds no valid pick; ``str(e)`` says why (quoted back to the model)."""


@dataclass(frozen=True, slots=True)
class Pick:
    tool: Tool | None
    """The picked function (None when a value was picked)."""
    args: dict[str, Any]
    value: Any = None


class Menu:
    """The options of one ``exec(choices=...)`` call, checked when built."""

    def __init__(self, choices: Sequence[Any]) -> None:
        if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence):
            raise ArgumentTypeError(
                f"choices={choices!r} must be a list of options (functions and/or values)"
            )
        if not choices:
            raise InvalidArgumentError(
                "choices=[] offers nothing to pick; give at least one option"
            )
        self.functions: dict[str, Tool] = {}
        self.values: list[Any] = []
        for entry in choices:
            self._add(entry)

    def _add(self, entry: Any) -> None:
        if isinstance(entry, _SCALARS):
            if any(_same(entry, v) for v in self.values):
                raise InvalidArgumentError(f"choices: the value {entry!r} is listed twice")
            self.values.append(entry)
            return
        tool = _as_choice_tool(entry)
        if tool.name in self.functions:
            raise InvalidArgumentError(f"choices: two functions are named {tool.name!r}")
        self.functions[tool.name] = tool

    def instruction(self) -> str:
        """The text appended to the prompt."""
        lines = [
            "",
            "Options. Do the work first; then finish your reply with exactly one pick, as a "
            "single JSON object on the last line:",
        ]
        for name, tool in self.functions.items():
            params = json.dumps(tool.spec.parameters.get("properties", {}), sort_keys=True)
            about = f" -- {tool.spec.description}" if tool.spec.description else ""
            lines.append(f'- {{"call": "{name}", "args": {{...}}}}{about} (args: {params})')
        for value in self.values:
            lines.append(f'- {{"value": {json.dumps(value)}}}')
        return "\n".join(lines)

    def reask(self, reason: str) -> str:
        """The re-ask message after a malformed pick."""
        picks = [f'{{"call": "{n}", "args": {{...}}}}' for n in self.functions]
        picks += [f'{{"value": {json.dumps(v)}}}' for v in self.values]
        return (
            f"Your reply did not end with a valid pick: {reason}. Reply with only the JSON "
            f"object of your pick, one of: {', '.join(picks)}"
        )

    def parse(self, reply: str) -> Pick:
        """The pick in ``reply``; raises :class:`PickError` saying what is wrong."""
        obj = _last_json_object(reply)
        if obj is None:
            raise PickError("it has no JSON object")
        name = next((obj[k] for k in _CALL_KEYS if k in obj), None)
        if name is not None:
            return self._function_pick(name, obj)
        if "value" in obj:
            value = obj["value"]
            if not any(_same(value, v) for v in self.values):
                allowed = ", ".join(json.dumps(v) for v in self.values) or "none"
                raise PickError(
                    f"the value {json.dumps(value)} is not an option (values: {allowed})"
                )
            return Pick(None, {}, value)
        raise PickError(f'the JSON object {json.dumps(obj)} has neither a "call" nor a "value" key')

    def _function_pick(self, name: Any, obj: dict[str, Any]) -> Pick:
        tool = self.functions.get(name) if isinstance(name, str) else None
        if tool is None:
            known = ", ".join(self.functions) or "none"
            raise PickError(f"{json.dumps(name)} is not one of the functions ({known})")
        raw: Any = next((obj[k] for k in _ARGS_KEYS if k in obj), {})
        try:
            args = tool.validator.validate(tool.name, raw)
        except ArgumentsError as exc:
            raise PickError(str(exc).replace("\n", " ")) from None
        return Pick(tool, args)


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON kind (so ``1`` does not pick ``True``)."""
    return type(a) is type(b) and a == b


def _as_choice_tool(entry: Any) -> Tool:
    try:
        return as_tool(entry)
    except ToolEntryError:
        if not callable(entry):
            raise ToolEntryError(
                f"choices entry {entry!r} is neither a value (str, int, float, bool, None) "
                "nor a function (a plain function, @function/@agentic_function, or a tool)"
            ) from None
    return tool_from_callable(entry)


def _last_json_object(text: str) -> dict[str, Any] | None:
    """The last top-level JSON object in ``text`` (code fences and prose around it are
    fine)."""
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    index = text.find("{")
    while index != -1:
        try:
            obj, end = decoder.raw_decode(text, index)
        except ValueError:
            index = text.find("{", index + 1)
            continue
        if isinstance(obj, dict):
            found = obj
        index = text.find("{", end)
    return found
