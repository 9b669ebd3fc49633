"""OpenTelemetry GenAI spans read back as traces: OTLP JSON in, trace entries out, so the
rules a suite's scenarios use check a production run too. Standard library only: reading
spans needs no OpenTelemetry package.

The file is OTLP JSON (``{"resourceSpans": [...]}``, what the OpenTelemetry SDK's OTLP
encoding and the collector's file exporter write; one such object a line is read too).
Spans are told apart by ``gen_ai.operation.name`` (or, without it, by the first word of
the span's name, as the semantic conventions name spans ``"{operation} {target}"``):

``invoke_agent``  an exec: ``agent_start`` ... ``agent_end``; one inside a tool call is a
                  nested exec (depth + 1)
``chat``          a model call: one round (``generate_content`` and ``text_completion``
                  too), its ``gen_ai.response.finish_reasons`` the reply's ``stop_reason``
``execute_tool``  a tool call: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
                  ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``; an error
                  status or ``error.type`` makes it ``is_error``

Other spans (HTTP clients, a framework's own) are looked through: their GenAI children
count as the children of their nearest GenAI ancestor. A tool span sits under its round's
chat span (as this project writes them) or beside the chat spans under the agent (as most
instrumentations do): then its round is the chat span whose ``gen_ai.output.messages``
hold its call id, or else the last chat span that started before it. Model and tool spans
with no agent span above them make one exec per trace. Each trace id is one trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from openprogram_sim.errors import SimError

__all__ = ["OtlpError", "is_otlp", "otlp_traces"]

_AGENT = frozenset({"invoke_agent"})
_MODEL = frozenset({"chat", "generate_content", "text_completion"})
_TOOL = frozenset({"execute_tool"})
_KNOWN = _AGENT | _MODEL | _TOOL
_REASONS = ("stop", "error", "aborted", "cap")
_STATUS_ERROR = (2, "2", "STATUS_CODE_ERROR")
_FINISH = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_call": "toolUse",
    "tool_calls": "toolUse",
    "tool_use": "toolUse",
    "function_call": "toolUse",
    "length": "length",
    "max_tokens": "length",
    "error": "error",
    "aborted": "aborted",
    "cancelled": "aborted",
}
"""Finish reasons as providers and instrumentations spell them, to our ``stop_reason``."""


class OtlpError(SimError, ValueError):
    """An OTLP JSON file that cannot be read as GenAI spans; the message names the file
    and the span."""


def is_otlp(data: Any) -> bool:
    """Whether parsed JSON ``data`` is OTLP JSON (an object with ``resourceSpans``)."""
    return isinstance(data, Mapping) and ("resourceSpans" in data or "resource_spans" in data)


@dataclass(slots=True, eq=False, kw_only=True)
class _Span:
    trace: str
    id: str
    parent: str
    name: str
    op: str
    start: int
    end: int
    order: int
    attrs: dict[str, Any]
    error: bool
    where: str


@dataclass(slots=True, eq=False, kw_only=True)
class _Exec:
    agent: _Span | None
    host: _Span | None
    """The tool span whose body ran this exec (None for a run of its own)."""
    parent: _Exec | None
    start: int
    order: int
    chats: list[_Span] = field(default_factory=list)
    tools: list[_Span] = field(default_factory=list)
    execs: list[_Exec] = field(default_factory=list)

    @property
    def depth(self) -> int:
        return 0 if self.parent is None else self.parent.depth + 1


def _get(node: Mapping[str, Any], camel: str) -> Any:
    """A field by its OTLP JSON name, or by the proto name some writers keep."""
    if camel in node:
        return node[camel]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return node.get(snake)


def _list(node: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = _get(node, key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpError(f"{where}.{key} is a list (got {type(value).__name__})")
    return value


def _any_value(value: Any, where: str) -> Any:
    """An OTLP ``AnyValue`` as a plain value."""
    if not isinstance(value, Mapping):
        raise OtlpError(f'{where} is an AnyValue mapping such as {{"stringValue": ...}}')
    for key in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        if _get(value, key) is not None:
            return _get(value, key)
    if _get(value, "intValue") is not None:
        try:
            return int(_get(value, "intValue"))
        except (TypeError, ValueError):
            raise OtlpError(f"{where}.intValue is an integer") from None
    array = _get(value, "arrayValue")
    if array is not None:
        values = (
            _list(array, "values", f"{where}.arrayValue") if isinstance(array, Mapping) else None
        )
        if values is None:
            raise OtlpError(f"{where}.arrayValue is a mapping with values: [...]")
        return [_any_value(v, f"{where}.arrayValue.values[{i}]") for i, v in enumerate(values)]
    kvlist = _get(value, "kvlistValue")
    if kvlist is not None:
        if not isinstance(kvlist, Mapping):
            raise OtlpError(f"{where}.kvlistValue is a mapping with values: [...]")
        return _attributes(_list(kvlist, "values", f"{where}.kvlistValue"), f"{where}.kvlistValue")
    return None


def _attributes(items: list[Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise OtlpError(f"{where}.attributes[{i}] is a mapping with key and value")
        out[item["key"]] = _any_value(item.get("value", {}), f"{where}.attributes[{i}].value")
    return out


def _nanos(span: Mapping[str, Any], key: str, where: str) -> int | None:
    value = _get(span, key)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise OtlpError(f"{where}: {key} is nanoseconds since the epoch (got {value!r})") from None


def _spans(data: Mapping[str, Any], source: str, first: int) -> Iterator[_Span]:
    for r, resource in enumerate(_list(data, "resourceSpans", source)):
        if not isinstance(resource, Mapping):
            raise OtlpError(f"{source}: resourceSpans[{r}] is a mapping with scopeSpans")
        for s, scope in enumerate(_list(resource, "scopeSpans", f"{source}: resourceSpans[{r}]")):
            place = f"resourceSpans[{r}].scopeSpans[{s}]"
            if not isinstance(scope, Mapping):
                raise OtlpError(f"{source}: {place} is a mapping with spans")
            for i, raw in enumerate(_list(scope, "spans", f"{source}: {place}")):
                yield _span(raw, f"{place}.spans[{i}]", source, first)
                first += 1


def _span(raw: Any, place: str, source: str, order: int) -> _Span:
    if not isinstance(raw, Mapping):
        raise OtlpError(f"{source}: {place} is not a span (a mapping with spanId, traceId)")
    name = _get(raw, "name")
    span_id, trace_id = _get(raw, "spanId"), _get(raw, "traceId")
    where = f"{source}: {place} (span {span_id or '?'} {name!r})"
    if not isinstance(span_id, str) or not span_id or not isinstance(trace_id, str):
        raise OtlpError(f"{where}: a span has a spanId and a traceId (strings)")
    attrs = _attributes(_list(raw, "attributes", where), where)
    op = attrs.get("gen_ai.operation.name")
    if not isinstance(op, str):
        op = str(name).split(" ", 1)[0] if isinstance(name, str) else ""
    status = _get(raw, "status")
    code = _get(status, "code") if isinstance(status, Mapping) else None
    start = _nanos(raw, "startTimeUnixNano", where)
    end = _nanos(raw, "endTimeUnixNano", where)
    return _Span(
        trace=trace_id,
        id=span_id,
        parent=str(_get(raw, "parentSpanId") or ""),
        name=str(name or ""),
        op=op,
        start=start if start is not None else 0,
        end=end if end is not None else (start or 0),
        order=order,
        attrs=attrs,
        error=code in _STATUS_ERROR or attrs.get("error.type") not in (None, ""),
        where=where,
    )


def _documents(text: str, source: str) -> list[Mapping[str, Any]]:
    """The OTLP objects of ``text``: one JSON object, or one a line (JSON Lines)."""
    try:
        data = json.loads(text)
        return [data]
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise OtlpError(f"{source}:{exc.lineno}: not JSON: {exc.msg}") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise OtlpError(f"{source}:{n}: not JSON: {exc.msg}") from None
            if not is_otlp(data):
                raise OtlpError(f"{source}:{n}: not OTLP JSON (an object with resourceSpans)")
            out.append(data)
    return out


def otlp_traces(data: Any, source: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """Each trace (one per trace id) in OTLP JSON ``data`` (parsed, or the file's text),
    rebuilt as trace entries, with the name it is reported by (``source``, with the trace
    id when the file holds several). Raises :class:`OtlpError` naming the file and the
    span when the data is not OTLP JSON or holds no GenAI span."""
    documents = _documents(data, source) if isinstance(data, str) else [data]
    spans: list[_Span] = []
    seen: set[tuple[str, str]] = set()
    for document in documents:
        if not is_otlp(document):
            raise OtlpError(f"{source}: not OTLP JSON (an object with resourceSpans)")
        for span in _spans(document, source, len(spans)):
            if (span.trace, span.id) not in seen:  # a span exported twice is read once
                seen.add((span.trace, span.id))
                spans.append(span)
    if not any(s.op in _KNOWN for s in spans):
        raise OtlpError(
            f"{source}: no GenAI span among its {len(spans)} span(s) (gen_ai.operation.name "
            "invoke_agent, chat or execute_tool); nothing to check"
        )
    by_trace: dict[str, list[_Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace, []).append(span)
    out = []
    for trace_id, members in by_trace.items():
        if not any(s.op in _KNOWN for s in members):
            continue
        roots = _build(members)
        name = source
        if len(by_trace) > 1:
            first = min(roots, key=lambda e: (e.start, e.order))
            label = first.agent.name if first.agent is not None else "spans"
            name = f"{source}: trace {trace_id} ({label})"
        entries: list[dict[str, Any]] = []
        for root in sorted(roots, key=lambda e: (e.start, e.order)):
            _emit(root, entries)
        out.append((name, entries))
    return out


def _build(spans: list[_Span]) -> list[_Exec]:
    """The execs of one trace's spans, each with its rounds, tool calls and nested execs."""
    tree = _Tree(spans)
    for span in sorted(spans, key=lambda s: (s.start, s.order)):
        if span.op in _AGENT:
            tree.exec_for(span)
        elif span.op in _MODEL:
            tree.exec_for(tree.known_parent(span)).chats.append(span)
        elif span.op in _TOOL:
            tree.exec_for(tree.known_parent(span)).tools.append(span)
    for found in tree.execs.values():
        if found.agent is None and found.host is None:
            found.start = min((s.start for s in (*found.chats, *found.tools)), default=0)
    return tree.roots


class _Tree:
    """One trace's spans by id, and the execs found among them so far."""

    def __init__(self, spans: list[_Span]) -> None:
        self.by_id = {s.id: s for s in spans}
        self.execs: dict[str, _Exec] = {}
        self.roots: list[_Exec] = []
        self.building: set[str] = set()

    def known_parent(self, span: _Span) -> _Span | None:
        """The nearest GenAI span above ``span`` (other spans looked through)."""
        seen = {span.id}
        parent = self.by_id.get(span.parent)
        while parent is not None:
            if parent.id in seen:
                raise OtlpError(f"{span.where}: its parents form a loop at span {parent.id}")
            if parent.op in _KNOWN:
                return parent
            seen.add(parent.id)
            parent = self.by_id.get(parent.parent)
        return None

    def exec_for(self, span: _Span | None) -> _Exec:
        """The exec that ``span`` (a GenAI span, or None for the trace) is part of or is."""
        if span is not None and span.op in _MODEL:
            return self.exec_for(self.known_parent(span))
        key = "" if span is None else span.id
        if key in self.execs:
            return self.execs[key]
        if span is None:  # model and tool calls with no agent above them
            found = _Exec(agent=None, host=None, parent=None, start=0, order=-1)
        else:
            if key in self.building:
                raise OtlpError(f"{span.where}: its parents form a loop")
            self.building.add(key)
            found = self._new(span)
        (self.roots if found.parent is None else found.parent.execs).append(found)
        self.execs[key] = found
        return found

    def _new(self, span: _Span) -> _Exec:
        above = self.known_parent(span)
        if span.op in _TOOL:  # model calls inside a tool's body: a nested run
            return self._exec(span, host=span, parent=self.exec_for(above))
        if above is None:  # an agent of its own
            return self._exec(span, agent=span)
        if above.op in _TOOL:  # an agent a tool's body invoked
            parent = self.exec_for(self.known_parent(above))
            return self._exec(span, agent=span, host=above, parent=parent)
        return self._exec(span, agent=span, parent=self.exec_for(above))

    @staticmethod
    def _exec(
        span: _Span,
        *,
        agent: _Span | None = None,
        host: _Span | None = None,
        parent: _Exec | None = None,
    ) -> _Exec:
        return _Exec(agent=agent, host=host, parent=parent, start=span.start, order=span.order)


def _round_of(tool: _Span, chats: list[_Span], by_call: dict[str, int]) -> int:
    """The round (1-based index into ``chats``) a tool call was made in; 0 before any."""
    for i, chat in enumerate(chats):
        if tool.parent == chat.id:
            return i + 1
    call_id = tool.attrs.get("gen_ai.tool.call.id")
    if isinstance(call_id, str) and call_id in by_call:
        return by_call[call_id]
    started = [i + 1 for i, c in enumerate(chats) if (c.start, c.order) <= (tool.start, tool.order)]
    return started[-1] if started else 0


def _parts(chat: _Span, kind: str) -> Iterator[Mapping[str, Any]]:
    """The parts of type ``kind`` in a chat span's ``gen_ai.output.messages`` (none when
    absent or not in the conventions' shape)."""
    raw = chat.attrs.get("gen_ai.output.messages")
    try:
        messages = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return
    for message in messages if isinstance(messages, list) else []:
        parts = message.get("parts") if isinstance(message, Mapping) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, Mapping) and part.get("type") == kind:
                yield part


def _called_ids(chat: _Span) -> list[str]:
    return [p["id"] for p in _parts(chat, "tool_call") if isinstance(p.get("id"), str)]


def _output_text(chat: _Span) -> str:
    return "".join(str(p.get("content", "")) for p in _parts(chat, "text"))


def _stop_reason(chat: _Span, calls: int) -> str:
    reasons = chat.attrs.get("gen_ai.response.finish_reasons")
    if isinstance(reasons, str):
        reasons = [reasons]
    if isinstance(reasons, list) and reasons:
        found = _FINISH.get(str(reasons[0]).lower())
        if found is not None:
            return found
    if chat.error:
        return "error"
    return "toolUse" if calls else "stop"


def _end_reason(run: _Exec, stops: list[str]) -> str:
    given = run.agent.attrs.get("openprogram.end_reason") if run.agent is not None else None
    if given in _REASONS:
        return str(given)
    if run.agent is not None and run.agent.error:
        return "aborted" if run.agent.attrs.get("error.type") == "aborted" else "error"
    if stops and stops[-1] in ("error", "aborted"):
        return stops[-1]
    return "stop"


def _args(tool: _Span) -> Any:
    raw = tool.attrs.get("gen_ai.tool.call.arguments")
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return {} if raw is None else raw


def _result(tool: _Span) -> str:
    raw = tool.attrs.get("gen_ai.tool.call.result")
    if raw is None:
        return ""
    return raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)


def _tool_name(tool: _Span) -> str:
    name = tool.attrs.get("gen_ai.tool.name")
    if isinstance(name, str) and name:
        return name
    words = tool.name.split(" ", 1)
    if len(words) == 2 and words[0] == "execute_tool" and words[1].strip():
        return words[1].strip()
    raise OtlpError(
        f"{tool.where}: an execute_tool span names its tool (gen_ai.tool.name, or a span "
        "name 'execute_tool NAME')"
    )


def _emit(run: _Exec, out: list[dict[str, Any]]) -> None:
    """Append ``run``'s events (and its nested runs' at their tool calls) to ``out``."""
    depth = run.depth
    chats = sorted(run.chats, key=lambda s: (s.start, s.order))
    by_call = {cid: i + 1 for i, c in enumerate(chats) for cid in _called_ids(c)}
    rounds: dict[int, list[_Span]] = {}
    for tool in sorted(run.tools, key=lambda s: (s.start, s.order)):
        rounds.setdefault(_round_of(tool, chats, by_call), []).append(tool)
    hosted: dict[str, list[_Exec]] = {}
    loose: dict[int, list[_Exec]] = {}
    for nested in sorted(run.execs, key=lambda e: (e.start, e.order)):
        if nested.host is not None:
            hosted.setdefault(nested.host.id, []).append(nested)
        else:
            at = [
                i + 1
                for i, c in enumerate(chats)
                if (c.start, c.order) <= (nested.start, nested.order)
            ]
            loose.setdefault(at[-1] if at else 0, []).append(nested)
    start: dict[str, Any] = {"type": "agent_start", "depth": depth, "round": 0}
    if run.agent is not None:
        start["span_id"] = run.agent.id
    out.append(start)
    stops: list[str] = []
    for r in range(len(chats) + 1):
        tools = rounds.get(r, [])
        if r:
            chat = chats[r - 1]
            stop = _stop_reason(chat, len(tools))
            stops.append(stop)
            out.append({"type": "turn_start", "depth": depth, "round": r})
            out.append({
                "type": "message_end", "depth": depth, "round": r, "role": "assistant",
                "text": _output_text(chat), "tool_calls": [_tool_name(t) for t in tools],
                "stop_reason": stop, "span_id": chat.id,
            })  # fmt: skip
        for tool in tools:
            _emit_tool(tool, depth, r, hosted.get(tool.id, []), out)
        for nested in loose.get(r, []):
            _emit(nested, out)
        if r:
            out.append({
                "type": "turn_end", "depth": depth, "round": r,
                "tool_calls": [_tool_name(t) for t in tools], "stop_reason": stops[-1],
                "tool_results": len(tools),
            })  # fmt: skip
    reason = _end_reason(run, stops)
    out.append({"type": "agent_end", "depth": depth, "round": len(chats), "reason": reason})


def _emit_tool(
    tool: _Span, depth: int, round: int, nested: list[_Exec], out: list[dict[str, Any]]
) -> None:
    call_id = tool.attrs.get("gen_ai.tool.call.id")
    call_id = call_id if isinstance(call_id, str) and call_id else f"span:{tool.id}"
    common = {
        "depth": depth,
        "round": round,
        "tool_call_id": call_id,
        "tool_name": _tool_name(tool),
        "args": _args(tool),
    }
    out.append({"type": "tool_execution_start", **common, "span_id": tool.id})
    for run in nested:
        _emit(run, out)
    end = {"type": "tool_execution_end", **common, "result": _result(tool)}
    end.update(is_error=tool.error, skipped=tool.attrs.get("openprogram.tool.skipped") is True)
    out.append({**end, "span_id": tool.id})
