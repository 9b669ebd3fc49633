"""A run's trace as OpenTelemetry GenAI spans, written as OTLP JSON through the
OpenTelemetry SDK (a ``TracerProvider``, a ``SpanExporter``, the OTLP protobuf encoding of
``opentelemetry-exporter-otlp-proto-common`` and ``google.protobuf.json_format``).

The packages are the ``otel`` extra (``pip install 'openprogram-sim[otel]'``); without them
:func:`otlp_json` raises :class:`OtelMissingError` saying so. Reading spans back
(:func:`openprogram_sim.trace._otel.otlp_traces`) needs none of them.

Spans follow the GenAI semantic conventions, parent to child as the run nests:

``invoke_agent {title}``   each exec (``gen_ai.agent.name``: the scenario's title, or the
                           tool whose body ran a nested exec); ``openprogram.end_reason``
                           its ``agent_end`` reason; error status and ``error.type`` when
                           it ended in error (``aborted`` when aborted)
``chat {model}``           each round (``turn_start`` to ``turn_end``), a client span:
                           ``gen_ai.request.model``, ``gen_ai.provider.name``,
                           ``gen_ai.response.finish_reasons``, ``gen_ai.output.messages``
``execute_tool {name}``    each tool call, under its round: ``gen_ai.tool.name``,
                           ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` and
                           ``gen_ai.tool.call.result`` (the conventions' opt-in content,
                           written because the trace holds it), ``gen_ai.tool.type``
                           ``function``; error status and ``error.type`` (the error's kind)
                           when the result is an error; ``openprogram.tool.skipped``

A conversation's execs (several at depth 0) sit under one ``invoke_workflow {title}`` span.
The trace holds no clock, so span times are the run's wall-clock interval spread over its
events in order (each event 1 ns after the one before at least): the order is exact, the
durations are not measurements.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from openprogram_sim.errors import SimError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, Tracer
    from opentelemetry.trace import Span

__all__ = ["OtelMissingError", "otlp_json", "provider_name", "require_sdk"]

_EXTRA = "pip install 'openprogram-sim[otel]'"
_FINISH = {"toolUse": "tool_call"}
_PROVIDERS = {
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "bedrock": "aws.bedrock",
}
"""Our wire API names as the conventions' ``gen_ai.provider.name`` (others kept as they are)."""


class OtelMissingError(SimError, ImportError):
    """``--otel`` without the OpenTelemetry SDK installed (the ``otel`` extra)."""


def require_sdk(flag: str = "--otel") -> None:
    """Raise :class:`OtelMissingError` (naming ``flag`` and the extra) unless the SDK's
    packages import: checked before any run, so a missing extra costs no run."""
    _sdk(flag)


def _sdk(flag: str = "--otel") -> Any:
    """The SDK's pieces, or :class:`OtelMissingError` naming the extra."""
    try:
        from google.protobuf import json_format  # type: ignore[import-untyped, unused-ignore]
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk import trace as sdk_trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON
    except ImportError as exc:
        raise OtelMissingError(
            f"{flag} writes spans through the OpenTelemetry SDK, which is not installed "
            f"(no module {exc.name or str(exc)!r}); install the otel extra: {_EXTRA}"
        ) from None
    return (
        json_format,
        encode_spans,
        sdk_trace,
        Resource,
        SimpleSpanProcessor,
        SpanExporter,
        ALWAYS_ON,
    )


def provider_name(api: str | None) -> str:
    """``gen_ai.provider.name`` for a wire API (``openprogram_sim.scripted`` for the
    scripted model, ``openprogram_sim`` when the provider names none)."""
    if not api:
        return "openprogram_sim"
    if api == "scripted":
        return "openprogram_sim.scripted"
    return _PROVIDERS.get(api, api)


def otlp_json(
    trace: Sequence[dict[str, Any]],
    *,
    title: str,
    model: str | None = None,
    api: str | None = None,
    duration: float = 0.0,
    end_ns: int | None = None,
) -> str:
    """``trace`` as OTLP JSON text (``{"resourceSpans": [...]}``, ids in hex, enums as
    integers, as the OTLP/JSON encoding wants), the run named ``title``, its model calls to
    ``model`` through wire API ``api``, spread over ``duration`` seconds ending at
    ``end_ns`` (now)."""
    json_format, encode_spans, sdk_trace, Resource, Processor, SpanExporter, ALWAYS_ON = _sdk()
    finished: list[ReadableSpan] = []

    class _Collect(SpanExporter):  # type: ignore[misc, valid-type]
        def export(self, spans: Sequence[ReadableSpan]) -> Any:
            finished.extend(spans)
            from opentelemetry.sdk.trace.export import SpanExportResult

            return SpanExportResult.SUCCESS

    limits = sdk_trace.SpanLimits(
        max_span_attributes=sdk_trace.SpanLimits.UNSET,
        max_span_attribute_length=sdk_trace.SpanLimits.UNSET,
        max_attribute_length=sdk_trace.SpanLimits.UNSET,
    )
    resource = Resource({"service.name": "openprogram-sim"})
    tracer_provider = sdk_trace.TracerProvider(
        resource=resource, sampler=ALWAYS_ON, span_limits=limits
    )
    tracer_provider.add_span_processor(Processor(_Collect()))
    tracer = tracer_provider.get_tracer("openprogram_sim")
    _Spans(tracer, title, model, api, _times(len(trace), duration, end_ns)).play(trace)
    tracer_provider.shutdown()
    data = json_format.MessageToDict(encode_spans(finished), use_integers_for_enums=True)
    _hex_ids(data)
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def _times(count: int, duration: float, end_ns: int | None) -> list[int]:
    end = end_ns if end_ns is not None else time.time_ns()
    span = max(int(duration * 1e9), count)
    start = end - span
    out, last = [], start - 1
    for i in range(count):
        at = max(start + span * i // max(count - 1, 1), last + 1)
        out.append(at)
        last = at
    return out


def _hex_ids(node: Any) -> None:
    """protobuf's JSON writes bytes as base64; OTLP/JSON writes trace and span ids as hex."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(node, list):
        for value in node:
            _hex_ids(value)


class _Spans:
    """Plays a trace's events onto spans: open at a start event, closed at its end."""

    def __init__(
        self, tracer: Tracer, title: str, model: str | None, api: str | None, times: list[int]
    ) -> None:
        self.tracer = tracer
        self.title = title
        self.model = model
        self.provider = provider_name(api)
        self.times = times
        self.agents: dict[int, Span] = {}
        self.chats: dict[int, Span] = {}
        self.tools: dict[tuple[int, Any], Span] = {}
        self.open_tools: list[tuple[int, str, Span]] = []
        self.workflow: Span | None = None
        self.now = 0

    def play(self, trace: Sequence[dict[str, Any]]) -> None:
        roots = sum(1 for e in trace if e.get("type") == "agent_start" and not e.get("depth"))
        if roots > 1 and trace:
            self.workflow = self._start(
                f"invoke_workflow {self.title}",
                None,
                {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": self.title},
                self.times[0],
            )
        for i, entry in enumerate(trace):
            self.now = self.times[i]
            handler = getattr(self, "_on_" + str(entry.get("type")), None)
            if handler is not None:
                handler(entry, int(entry.get("depth", 0) or 0), trace, i)
        for span in [s for _, _, s in self.open_tools] + [*self.chats.values()]:
            span.end(end_time=self.now)  # a run cut short: what was open ends with it
        for span in reversed([*self.agents.values()]):
            span.end(end_time=self.now)
        if self.workflow is not None:
            self.workflow.end(end_time=self.now)

    def _start(
        self, name: str, parent: Span | None, attrs: dict[str, Any], at: int, kind: Any = None
    ) -> Span:
        from opentelemetry import trace as api
        from opentelemetry.context import Context

        context = api.set_span_in_context(parent) if parent is not None else Context()
        span: Span = self.tracer.start_span(
            name,
            context=context,
            kind=kind if kind is not None else api.SpanKind.INTERNAL,
            attributes=attrs,
            start_time=at,
        )
        return span

    def _common(self) -> dict[str, Any]:
        out = {"gen_ai.provider.name": self.provider}
        if self.model:
            out["gen_ai.request.model"] = self.model
        return out

    def _error(self, span: Span, kind: str, message: str | None) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", kind)
        span.set_status(Status(StatusCode.ERROR, message))

    def _on_agent_start(self, e: dict[str, Any], depth: int, *_: Any) -> None:
        host = next((s for d, _, s in reversed(self.open_tools) if d == depth - 1), None)
        name = next((n for d, n, _ in reversed(self.open_tools) if d == depth - 1), self.title)
        parent = host if depth else self.workflow
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        self.agents[depth] = self._start(
            f"invoke_agent {name}", parent, {**attrs, **self._common()}, self.now
        )

    def _on_turn_start(self, e: dict[str, Any], depth: int, *_: Any) -> None:
        from opentelemetry.trace import SpanKind

        parent = self.agents.get(depth)
        attrs = {"gen_ai.operation.name": "chat", **self._common()}
        name = f"chat {self.model}" if self.model else "chat"
        self.chats[depth] = self._start(name, parent, attrs, self.now, SpanKind.CLIENT)

    def _on_message_end(
        self, e: dict[str, Any], depth: int, trace: Sequence[dict[str, Any]], i: int
    ) -> None:
        chat = self.chats.get(depth)
        if e.get("role") != "assistant" or chat is None:
            return
        stop = str(e.get("stop_reason", "stop"))
        chat.set_attribute("gen_ai.response.finish_reasons", [_FINISH.get(stop, stop)])
        parts: list[dict[str, Any]] = []
        if e.get("text"):
            parts.append({"type": "text", "content": e["text"]})
        for later in trace[i + 1 :]:
            if later.get("depth") == depth and later.get("type") == "turn_end":
                break
            if later.get("depth") == depth and later.get("type") == "tool_execution_start":
                call = {"id": later.get("tool_call_id"), "name": later.get("tool_name")}
                parts.append({"type": "tool_call", **call, "arguments": later.get("args")})
        message = {"role": "assistant", "parts": parts, "finish_reason": _FINISH.get(stop, stop)}
        chat.set_attribute(
            "gen_ai.output.messages", json.dumps([message], ensure_ascii=False, default=str)
        )
        if stop in ("error", "aborted"):
            self._error(chat, str(e.get("error_reason") or stop), e.get("error"))

    def _on_tool_execution_start(self, e: dict[str, Any], depth: int, *_: Any) -> None:
        parent = self.chats.get(depth) or self.agents.get(depth)
        name = str(e.get("tool_name"))
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": json.dumps(
                e.get("args"), ensure_ascii=False, default=str
            ),
        }
        if e.get("tool_call_id") is not None:
            attrs["gen_ai.tool.call.id"] = str(e["tool_call_id"])
        span = self._start(f"execute_tool {name}", parent, attrs, self.now)
        self.tools[(depth, e.get("tool_call_id"))] = span
        self.open_tools.append((depth, name, span))

    def _on_tool_execution_end(self, e: dict[str, Any], depth: int, *_: Any) -> None:
        span = self.tools.pop((depth, e.get("tool_call_id")), None)
        if span is None:
            return
        self.open_tools = [t for t in self.open_tools if t[2] is not span]
        span.set_attribute("gen_ai.tool.call.result", str(e.get("result", "")))
        if e.get("skipped"):
            span.set_attribute("openprogram.tool.skipped", True)
        if e.get("is_error"):
            self._error(span, str(e.get("error_kind") or "tool_error"), str(e.get("result", "")))
        span.end(end_time=self.now)

    def _on_turn_end(self, e: dict[str, Any], depth: int, *_: Any) -> None:
        chat = self.chats.pop(depth, None)
        if chat is not None:
            chat.end(end_time=self.now)

    def _on_agent_end(self, e: dict[str, Any], depth: int, *_: Any) -> None:
        for d in [d for d in self.chats if d >= depth]:
            self.chats.pop(d).end(end_time=self.now)
        agent = self.agents.pop(depth, None)
        if agent is None:
            return
        reason = str(e.get("reason", "stop"))
        agent.set_attribute("openprogram.end_reason", reason)
        if reason in ("error", "aborted"):
            self._error(agent, "aborted" if reason == "aborted" else "_OTHER", None)
        agent.end(end_time=self.now)
