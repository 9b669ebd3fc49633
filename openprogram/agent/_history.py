"""Checking a history passed to ``exec(history=...)``/``aexec``: messages only, and paired
as the provider APIs require, with errors that name the index and the fix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openprogram.errors import ArgumentTypeError, InvalidArgumentError
from openprogram.types import AnyMessage, AssistantMessage, ToolResultMessage, UserMessage

__all__ = ["check_history"]

_MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage)


def check_history(history: Sequence[AnyMessage]) -> list[AnyMessage]:
    """``history`` as a new list, once checked: messages only, paired as the APIs require
    (see :func:`_check_pairing`)."""
    if type(history) is tuple and not history:
        return []  # the default: no history
    given: object = history  # callers pass anything; the annotation says what is allowed
    if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
        raise ArgumentTypeError(
            f"history= must be a sequence of messages (UserMessage, AssistantMessage, "
            f"ToolResultMessage), got {type(history).__name__}: {history!r}"
        )
    for index, message in enumerate(history):
        if not isinstance(message, _MESSAGE_TYPES):
            raise ArgumentTypeError(
                f"history[{index}] is a {type(message).__name__}, not a message (UserMessage, "
                "AssistantMessage or ToolResultMessage); load dicts with "
                "openprogram.types.message_from_dict"
            )
    _check_pairing(history)
    return list(history)


def _check_pairing(history: Sequence[AnyMessage]) -> None:
    """Each tool call of a finished reply has exactly one result after it (a reply that
    ended ``error``/``aborted`` is never answered, and needs none), each result answers a
    call before it, and no call id is used twice."""
    calls: dict[str, tuple[int, str, bool]] = {}  # id -> (index, tool name, needs a result)
    answered: set[str] = set()
    for index, message in enumerate(history):
        if isinstance(message, AssistantMessage):
            needs_result = message.stop_reason not in ("error", "aborted")
            for call in message.tool_calls:
                if call.id in calls:
                    raise InvalidArgumentError(
                        f"history[{index}]: tool call id {call.id!r} is used twice (first at "
                        f"history[{calls[call.id][0]}]); ids must be unique"
                    )
                calls[call.id] = (index, call.name, needs_result)
        elif isinstance(message, ToolResultMessage):
            _check_result(index, message.tool_call_id, calls, answered)
    for call_id, (index, name, needs_result) in calls.items():
        if needs_result and call_id not in answered:
            raise InvalidArgumentError(
                f"history[{index}]: tool call {call_id!r} ({name}) has no result in the "
                f"history; add a ToolResultMessage with tool_call_id={call_id!r} after it, or "
                "leave the call out"
            )


def _check_result(index: int, call_id: str, calls: dict[str, Any], answered: set[str]) -> None:
    if call_id not in calls:
        raise InvalidArgumentError(
            f"history[{index}]: tool result for {call_id!r} answers no tool call before it"
        )
    if call_id in answered:
        raise InvalidArgumentError(
            f"history[{index}]: a second result for tool call {call_id!r} (each call has "
            "exactly one)"
        )
    answered.add(call_id)
