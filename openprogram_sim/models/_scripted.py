"""A provider with no network: plays scripted assistant turns as real stream events.

Example::

    model = ScriptedModel([
        {"tool_calls": [{"search": {"q": "a"}}]},
        {"text": "found it"},
    ])
    runtime = Runtime(provider=model)

Each turn is streamed the way a real provider streams: ``start``; text and thinking in
chunks; each tool call's arguments as partial JSON text; then ``done`` (or ``error`` for an
``error``/``aborted`` stop). Every request is recorded in :attr:`ScriptedModel.requests`.
A call beyond the script raises :class:`~openprogram_sim.errors.ScriptExhaustedError`
naming the request.

A ``one_of`` turn (a weighted choice) is drawn when it is played, from a
``random.Random(seed)``: the same seed and the same calls play the same replies. Without a
seed the model picks one (the scenario's ``seed:``, else a fresh one) and keeps it in
:attr:`ScriptedModel.seed`, so a run can be repeated; :attr:`ScriptedModel.draws` lists
what was drawn.
"""

from __future__ import annotations

import random
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Any

from openprogram import ToolSpec
from openprogram.events import ProviderEvent
from openprogram.providers import Context, MessageBuilder, StreamOptions, ToolChoice
from openprogram.providers.base import ReadyStream
from openprogram.providers.builder import parse_arguments
from openprogram.types import AnyMessage
from openprogram_sim.errors import ScriptedFault, ScriptExhaustedError
from openprogram_sim.models._clock import VirtualClock
from openprogram_sim.models._turns import Turn, script_seed, session_seed

__all__ = ["Draw", "ScriptedModel", "ScriptedRequest"]


@dataclass(frozen=True, slots=True)
class Draw:
    """One ``one_of`` turn as it was played: model call ``call`` (from 1) drew option
    ``option`` (from 0) of ``options``."""

    call: int
    option: int
    options: int

    def __str__(self) -> str:
        return f"call #{self.call}: option {self.option + 1} of {self.options}"


class ScriptedRequest:
    """What the model was sent on one call.

    ``messages`` is the history as it stood at the call. The scripted model records it
    without copying it on every call (that made a round cost grow with the history): it
    keeps one copy of the run's history, extended by what each call adds, and a request
    takes the first ``n`` messages of it when ``messages`` is first read."""

    __slots__ = (
        "_count",
        "_messages",
        "_source",
        "depth",
        "index",
        "parallel_tool_calls",
        "round",
        "system_prompt",
        "tool_choice",
        "tool_specs",
        "tools",
    )

    def __init__(
        self,
        index: int,
        depth: int,
        round: int,
        messages: list[AnyMessage],
        tools: list[str],
        tool_specs: list[ToolSpec],
        tool_choice: ToolChoice,
        parallel_tool_calls: bool | None,
        system_prompt: str,
    ) -> None:
        self.index = index
        """Call number across the whole script, from 1."""
        self.depth = depth
        self.round = round
        self._messages: list[AnyMessage] | None = messages
        self._source: list[AnyMessage] | None = None
        self._count = len(messages)
        self.tools = tools
        self.tool_specs = tool_specs
        self.tool_choice = tool_choice
        self.parallel_tool_calls = parallel_tool_calls
        self.system_prompt = system_prompt

    @property
    def messages(self) -> list[AnyMessage]:
        """The messages the model was sent on this call, in order."""
        messages = self._messages
        if messages is None:
            source, self._source = self._source, None
            assert source is not None
            messages = self._messages = source[: self._count]
        return messages

    @messages.setter
    def messages(self, value: list[AnyMessage]) -> None:
        self._messages, self._source, self._count = value, None, len(value)

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.index,
            self.depth,
            self.round,
            self.messages,
            self.tools,
            self.tool_specs,
            self.tool_choice,
            self.parallel_tool_calls,
            self.system_prompt,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScriptedRequest):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        names = ("index", "depth", "round", "messages", "tools", "tool_specs", "tool_choice",
                 "parallel_tool_calls", "system_prompt")  # fmt: skip
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(names, self._fields(), strict=True))
        return f"ScriptedRequest({shown})"

    @classmethod
    def of(cls, index: int, context: Context, options: StreamOptions) -> ScriptedRequest:
        """Call ``index``'s request, copied from what the loop handed the provider."""
        return cls(
            index,
            options.depth,
            options.round,
            list(context.messages),
            [t.name for t in context.tools],
            list(context.tools),
            options.tool_choice,
            options.parallel_tool_calls,
            context.system_prompt,
        )

    @classmethod
    def _over(
        cls, index: int, context: Context, options: StreamOptions, kept: list[AnyMessage]
    ) -> ScriptedRequest:
        """Like :meth:`of`, its messages the first ``len(context.messages)`` of ``kept``, a
        list its owner only ever extends (see :class:`_KeptHistory`)."""
        request = object.__new__(cls)  # what __init__ sets, but the messages: taken later
        request.index = index
        request.depth = options.depth
        request.round = options.round
        request._messages = None
        request._source = kept
        request._count = len(context.messages)
        tools = context.tools
        request.tools = [t.name for t in tools]
        request.tool_specs = list(tools)
        request.tool_choice = options.tool_choice
        request.parallel_tool_calls = options.parallel_tool_calls
        request.system_prompt = context.system_prompt
        return request


class _KeptHistory:
    """One copy of the history a run sends, extended by what each call adds.

    The live history (``Context.messages``) only grows during a run, so each call copies
    only its new messages. When the list is another one (a new run), or it no longer starts
    and continues as the copy does (its first message, or the one at the copy's end, is
    another object: it was cut or rebuilt), a new copy is made; the old one is kept by the
    requests that read it and is never changed again."""

    __slots__ = ("_kept", "_live")

    def __init__(self) -> None:
        self._live: list[AnyMessage] | None = None
        self._kept: list[AnyMessage] = []

    def keep(self, live: list[AnyMessage]) -> list[AnyMessage]:
        kept = self._kept
        have, now = len(kept), len(live)
        if (
            live is self._live
            and have <= now
            and (not have or (live[have - 1] is kept[-1] and live[0] is kept[0]))
        ):
            if have < now:
                kept.extend(live[have:])
            return kept
        self._live = live
        self._kept = kept = list(live)
        return kept


def _chunks(text: str, size: int) -> Sequence[str]:
    if size <= 0 or len(text) <= size:
        return (text,)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _never() -> bool:
    return False


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _parsed_copy(arguments: Any) -> Any:
    """What ``json.loads(json.dumps(arguments))`` gives for a flat object of JSON scalars
    (a copy: the turn's own dict is never handed out), else ``None`` (the builder parses the
    streamed text: nested values, a non-dict, text sent verbatim)."""
    if type(arguments) is not dict:
        return None
    for key, value in arguments.items():
        if type(key) is not str or type(value) not in _SCALARS:
            return None
    return dict(arguments)


class ScriptedModel:
    """A :class:`~openprogram.providers.Provider` that plays ``turns`` in call order,
    across nesting levels."""

    api = "scripted"

    def __init__(
        self,
        turns: Iterable[Turn | Mapping[str, Any] | str] = (),
        *,
        chunk_size: int = 24,
        model: str = "scripted",
        clock: VirtualClock | None = None,
        seed: int | None = None,
    ) -> None:
        self.turns: list[Turn] = [Turn.coerce(t) for t in turns]
        self._seed = seed if seed is not None else script_seed(self.turns)
        self.draws: list[Draw] = []
        """Each ``one_of`` turn played, in call order."""
        self._rng: random.Random | None = None
        """Made when a ``one_of`` turn is first drawn (seeding one costs more than a short
        run of a script with none)."""
        self.chunk_size = chunk_size
        self.model = model
        self.requests: list[ScriptedRequest] = []
        self.clock = clock if clock is not None else VirtualClock()
        self._next_id = 0
        self._history = _KeptHistory()

    @property
    def seed(self) -> int:
        """The seed ``one_of`` turns are drawn from: given, the turns', or picked (once, when
        first needed: read, or a ``one_of`` turn drawn)."""
        if self._seed is None:
            self._seed = session_seed(None, None)
        return self._seed

    @property
    def calls(self) -> int:
        return len(self.requests)

    @property
    def unconsumed(self) -> list[Turn]:
        """Turns never played."""
        return self.turns[len(self.requests) :]

    def assert_consumed(self) -> None:
        if self.unconsumed:
            raise AssertionError(
                f"ScriptedModel: {len(self.unconsumed)} of {len(self.turns)} scripted turns "
                f"were never requested (the model was called {self.calls} times)"
            )

    def _record(self, context: Context, options: StreamOptions) -> ScriptedRequest:
        kept = self._history.keep(context.messages)
        request = ScriptedRequest._over(len(self.requests) + 1, context, options, kept)
        self.requests.append(request)
        return request

    @property
    def stochastic(self) -> bool:
        """Whether the script holds a ``one_of`` turn."""
        return any(t.one_of for t in self.turns)

    def _call_id(self) -> str:
        self._next_id += 1
        return f"call_{self._next_id}"

    def _next_turn(self, request: ScriptedRequest) -> Turn | Awaitable[Turn]:
        """The turn for ``request``: the script's next (subclasses may return an
        awaitable)."""
        if request.index > len(self.turns):
            last = request.messages[-1] if request.messages else None
            raise ScriptExhaustedError(
                f"ScriptedModel: model call #{request.index} (depth {request.depth}, round "
                f"{request.round}) has no scripted turn; the script has {len(self.turns)}. "
                f"Last message sent: {_describe(last)}. Add a turn to the script, or lower "
                "max_iterations."
            )
        turn = self.turns[request.index - 1]
        if not turn.one_of:
            return turn
        if self._rng is None:
            self._rng = random.Random(self.seed)
        turn, option = turn.draw(self._rng)
        if option is not None:
            options = len(self.turns[request.index - 1].one_of)
            self.draws.append(Draw(request.index, option, options))
        return turn

    def stream(self, context: Context, options: StreamOptions) -> _TurnStream:
        """Play the next turn as one model call's events (an async iterator, as every
        provider's stream; the loop reads a turn that needs no waiting without an await per
        event, see :class:`~openprogram.providers.base.ReadyStream`)."""
        return _TurnStream(self, context, options)

    def _ready(self, context: Context, options: StreamOptions, pieces: bool) -> _Played:
        """Record the call and take its turn: the events as a plain iterator when the turn
        needs no waiting (its pieces left out unless ``pieces``), else the request and the
        turn (or its awaitable) to play async."""
        request = self._record(context, options)
        turn = self._next_turn(request)
        if type(turn) is Turn and not turn.latency and turn.fault != "hang":
            if pieces:
                return self._play_ready(turn, options.cancel)
            return self._play_whole(turn, options.cancel)
        return request, turn

    def _play_whole(self, turn: Turn, cancel: Any) -> Iterator[ProviderEvent]:
        """:meth:`_play_ready` for a caller that reads no pieces: the start, each block
        added whole (the abort checked after each), then the final event. An abort already
        set when the reply starts (a listener of ``message_start``) ends it as the streamed
        body does, after its first piece."""
        b = MessageBuilder(api=self.api, model=self.model)
        yield b.start()
        if cancel is not None and cancel.is_set():
            for _ in self._body(b, turn):
                yield b.error("Request was aborted", aborted=True)
                return
        elif self._whole_body(b, turn, cancel.is_set if cancel is not None else _never):
            yield b.error("Request was aborted", aborted=True)
            return
        if turn.fault is not None:
            if turn.fault == "raise":
                raise ScriptedFault(turn.error or "scripted provider crashed")
            return
        yield self._final(b, turn)

    def _whole_body(self, b: MessageBuilder, turn: Turn, stopped: Callable[[], bool]) -> bool:
        """Add the turn's blocks whole, as :meth:`_body` streams them; True when the run was
        aborted after one of them (the rest not added)."""
        if turn.thinking:
            b.add_thinking(turn.thinking)
            if stopped():
                return True
        if turn.text:
            b.add_text(turn.text)
            if stopped():
                return True
        for call in turn.tool_calls:
            arguments = _parsed_copy(call.arguments)
            if arguments is None:
                arguments = parse_arguments(call.json_text)
            b.add_toolcall(call.id or self._call_id(), call.name, arguments)
            if stopped():
                return True
        return False

    def _play_ready(self, turn: Turn, cancel: Any) -> Iterator[ProviderEvent]:
        """:meth:`_play` for a turn that needs no waiting (no latency, no hang): the same
        events, checks and faults, from a plain generator."""
        b = MessageBuilder(api=self.api, model=self.model)
        yield b.start()
        stopped = cancel.is_set if cancel is not None else _never
        for event in self._body(b, turn):
            if stopped():
                yield b.error("Request was aborted", aborted=True)
                return
            yield event
        if turn.fault is not None:
            if turn.fault == "raise":
                raise ScriptedFault(turn.error or "scripted provider crashed")
            return
        yield self._final(b, turn)

    async def _play(
        self,
        context: Context,
        options: StreamOptions,
        request: ScriptedRequest | None = None,
        next_turn: Turn | Awaitable[Turn] | None = None,
    ) -> AsyncIterator[ProviderEvent]:
        """The call's events, awaiting what the turn waits for; ``request`` and
        ``next_turn``: the call was recorded and its turn taken already."""
        if request is None:
            request = self._record(context, options)
            next_turn = self._next_turn(request)
        turn = next_turn if isinstance(next_turn, Turn) else await next_turn  # type: ignore[misc]
        b = MessageBuilder(api=self.api, model=self.model)
        cancel = options.cancel
        if turn.latency:
            await self.clock.sleep(turn.latency)
        yield b.start()
        stopped = cancel.is_set if cancel is not None else _never
        for event in self._body(b, turn):
            if stopped():
                yield b.error("Request was aborted", aborted=True)
                return
            yield event
        if turn.fault is not None:
            if turn.fault == "raise":
                raise ScriptedFault(turn.error or "scripted provider crashed")
            if turn.fault == "hang" and cancel is not None:
                await cancel.wait()
                yield b.error("Request was aborted", aborted=True)
            return
        yield self._final(b, turn)

    @staticmethod
    def _final(b: MessageBuilder, turn: Turn) -> ProviderEvent:
        """The last event of a turn played whole: its error stop, else ``done``."""
        if turn.stop_reason in ("error", "aborted"):
            return b.error(
                turn.error or f"scripted {turn.stop_reason}",
                aborted=turn.stop_reason == "aborted",
                usage=turn.usage,
                details=turn.error_details(),
            )
        reason = turn.stop_reason if turn.stop_reason in ("stop", "length", "toolUse") else None
        return b.done(reason, usage=turn.usage)  # None: the message keeps its fresh Usage()

    def _text(self, b: MessageBuilder, text: str) -> Iterable[ProviderEvent]:
        yield b.text_start()
        for piece in _chunks(text, self.chunk_size):
            yield b.text_delta(piece)
        yield b.text_end()

    def _body(self, b: MessageBuilder, turn: Turn) -> Iterable[ProviderEvent]:
        size = self.chunk_size
        if turn.thinking:
            yield b.thinking_start()
            for piece in _chunks(turn.thinking, size):
                yield b.thinking_delta(piece)
            yield b.thinking_end()
        if turn.text:
            yield from self._text(b, turn.text)
        for call in turn.tool_calls:
            yield b.toolcall_start(call.id or self._call_id(), call.name)
            for piece in _chunks(call.json_text, size):
                yield b.toolcall_delta(piece)
            # the arguments the streamed text parses to, without parsing text made here
            yield b.toolcall_end(arguments=_parsed_copy(call.arguments))


_Played = Iterator[ProviderEvent] | tuple[ScriptedRequest, Turn | Awaitable[Turn]]


class _TurnStream(ReadyStream):
    """One call of a scripted model: its events, ready when the turn needs no waiting.

    The call is recorded and its turn taken when the stream is first read, as an async
    generator's body would run then: by :meth:`ready` (the loop asks it first), or by the
    first ``__anext__`` of any other consumer."""

    __slots__ = ("_context", "_events", "_model", "_options", "_taken")

    def __init__(self, model: ScriptedModel, context: Context, options: StreamOptions) -> None:
        self._model = model
        self._context = context
        self._options = options
        self._taken: tuple[ScriptedRequest, Turn | Awaitable[Turn]] | None = None
        self._events: AsyncIterator[ProviderEvent] | None = None

    def ready(self, pieces: bool = True) -> Iterator[ProviderEvent] | None:
        played = self._model._ready(self._context, self._options, pieces)
        if type(played) is tuple:
            self._taken = played
            return None
        return played  # type: ignore[return-value]

    def __aiter__(self) -> AsyncIterator[ProviderEvent]:
        events = self._events
        if events is None:
            taken = self._taken
            request, turn = taken if taken is not None else (None, None)
            events = self._events = self._model._play(self._context, self._options, request, turn)
        return events

    def __anext__(self) -> Awaitable[ProviderEvent]:
        return self.__aiter__().__anext__()

    async def aclose(self) -> None:
        """Close the events being iterated (as an async generator's ``aclose``)."""
        if self._events is not None:
            await self._events.aclose()  # type: ignore[attr-defined]


def _describe(message: AnyMessage | None) -> str:
    if message is None:
        return "nothing"
    text = getattr(message, "text", "")
    text = text if len(text) <= 80 else text[:77] + "..."
    return f"{message.role} {text!r}"
