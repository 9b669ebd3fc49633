"""Checking a history passed to ``exec(history=...)``/``aexec``: messages only, and paired
as the provider APIs require, with errors that name the index and the fix.

One pass over the history does it all (the type of each message, its calls and results),
and hands back the tool-call ids it saw, so the run does not scan the history for them
again when it makes a reply's ids unique: an exec continuing a long conversation pays for
its history once, at C-ish speed per message."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openprogram.errors import ArgumentTypeError, InvalidArgumentError
from openprogram.types import AnyMessage, AssistantMessage, ToolCall, ToolResultMessage, UserMessage

__all__ = ["CheckedHistory", "check_history"]

_MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage)
_USER_CLS, _ASSISTANT_CLS, _RESULT_CLS = _MESSAGE_TYPES
_WAITING, _ANSWERED, _NEEDS_NONE = 0, 1, 2
"""A call's state: it needs a result and has none yet, it has its result, or it needs none
(its reply ended ``error``/``aborted``)."""
_UNFINISHED = ("error", "aborted")


class CheckedHistory:
    """A history that passed :func:`check_history`: its messages and every tool-call id in
    them (the set is the caller's to keep and grow)."""

    __slots__ = ("call_ids", "messages")

    def __init__(self, messages: Sequence[AnyMessage], call_ids: set[str]) -> None:
        self.messages = messages
        self.call_ids = call_ids


_EMPTY: tuple[AnyMessage, ...] = ()


def check_history(history: Sequence[AnyMessage]) -> CheckedHistory:
    """``history`` once checked: messages only, and paired as the APIs require. Each tool
    call of a finished reply has exactly one result after it (a reply that ended
    ``error``/``aborted`` is never answered, and needs none), each result answers a call
    before it, and no call id is used twice. The sequence is not copied (the caller copies
    it into the run)."""
    if type(history) is tuple and not history:
        return CheckedHistory(_EMPTY, set())  # the default: no history
    _check_sequence(history)
    ids = _fast_pass(history)
    if ids is None:  # something is off, or unusual: the slow pass says what, if anything
        _explain(history)
        ids = {c.id for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls}
    return CheckedHistory(history, ids)


def _fast_pass(history: Sequence[AnyMessage]) -> set[str] | None:
    """Every tool-call id of a well-formed history made of the three message classes
    themselves; ``None`` for any other (bad, or holding a subclass): no positions are
    kept here, :func:`_explain` finds them."""
    state: dict[str, int] = {}  # call id -> _WAITING, _ANSWERED or _NEEDS_NONE
    waiting = 0  # calls that need a result and have none yet
    for message in history:
        cls = type(message)
        if cls is _RESULT_CLS:
            call_id = message.tool_call_id  # type: ignore[union-attr]
            seen = state.get(call_id)
            if seen is None or seen == _ANSWERED:
                return None
            waiting -= seen == _WAITING
            state[call_id] = _ANSWERED
        elif cls is _ASSISTANT_CLS:
            mark = _NEEDS_NONE if message.stop_reason in _UNFINISHED else _WAITING  # type: ignore[union-attr]
            for block in message.content:
                if isinstance(block, ToolCall):
                    if block.id in state:
                        return None
                    state[block.id] = mark
                    waiting += mark == _WAITING
        elif cls is not _USER_CLS:
            return None
    return None if waiting else set(state)


def _check_sequence(history: object) -> None:
    # callers pass anything; the annotation says what is allowed
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise ArgumentTypeError(
            f"history= must be a sequence of messages (UserMessage, AssistantMessage, "
            f"ToolResultMessage), got {type(history).__name__}: {history!r}"
        )


def _explain(history: Sequence[AnyMessage]) -> None:
    """The slow pass, with positions: raise the error the history deserves (the first item
    that is not a message, else the first pairing error); return when it has none (the
    fast pass met a subclass of a message class)."""
    for index, message in enumerate(history):
        if not isinstance(message, _MESSAGE_TYPES):
            raise ArgumentTypeError(
                f"history[{index}] is a {type(message).__name__}, not a message (UserMessage, "
                "AssistantMessage or ToolResultMessage); load dicts with "
                "openprogram.types.message_from_dict"
            )
    calls: dict[str, tuple[int, str, bool]] = {}  # id -> (index, tool name, needs a result)
    answered: set[str] = set()
    for index, message in enumerate(history):
        if isinstance(message, AssistantMessage):
            needs_result = message.stop_reason not in _UNFINISHED
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
