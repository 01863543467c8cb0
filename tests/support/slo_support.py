"""Helpers for the SLO tests: a hand-driven clock, synthetic chat requests, a webhook receiver.

A synthetic request (times in ms from its start): the root span lasts ``network + queue + prefill
+ decode + 20``; the model call starts at 10 and lasts ``network + queue + prefill + decode``; the
provider reports queue, prefill and decode; the first content arrives ``network / 2 + queue +
prefill`` into the call. So TTFT = network / 2 + queue + prefill, and attribution puts exactly
``queue`` ms in the queue component.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from latencylens import semconv
from latencylens_collector.analysis.records import SpanRow

MS = 1_000_000
S = 1_000_000_000
MINUTE = 60 * S
BASE_NS = 1_767_225_600 * S
"""2026-01-01T00:00:00Z: synthetic traffic lives at fixed times, so every number is reproducible."""

_ids = itertools.count(1)
SCOPE = InstrumentationScope("tests.slo")


class FakeClock:
    """Integer ns that move only when a test says so."""

    def __init__(self, now_ns: int) -> None:
        self.now_ns = now_ns

    def __call__(self) -> int:
        return self.now_ns

    def advance(self, ns: int) -> None:
        self.now_ns += ns


@dataclass(frozen=True)
class Chat:
    """Timing of one synthetic request, in ms."""

    queue: int = 20
    prefill: int = 30
    network: int = 40
    decode: int = 200

    @property
    def ttft_ms(self) -> int:
        return self.network // 2 + self.queue + self.prefill


def _model_attributes(chat: Chat, model: str, provider: str) -> dict[str, Any]:
    server = chat.queue + chat.prefill + chat.decode
    return {
        semconv.SPAN_KIND: semconv.KIND_MODEL,
        semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_CHAT,
        semconv.GEN_AI_PROVIDER_NAME: provider,
        semconv.GEN_AI_REQUEST_MODEL: model,
        semconv.GEN_AI_RESPONSE_MODEL: model,
        semconv.GEN_AI_REQUEST_STREAM: True,
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 100,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 51,
        semconv.PROVIDER_QUEUE_NS: chat.queue * MS,
        semconv.PROVIDER_PREFILL_NS: chat.prefill * MS,
        semconv.PROVIDER_DECODE_NS: chat.decode * MS,
        semconv.PROVIDER_SERVER_TOTAL_NS: server * MS,
        semconv.STREAM_FIRST_CONTENT_NS: chat.ttft_ms * MS,
        semconv.STREAM_LAST_CHUNK_NS: (chat.ttft_ms + chat.decode) * MS,
    }


def otel_spans(
    start_ns: int,
    chat: Chat,
    service: str = "chat-api",
    route: str = "POST /chat",
    model: str = "llama-3.3-70b",
    provider: str = "groq",
) -> list[ReadableSpan]:
    """One request as real OpenTelemetry SDK spans (root + streamed model call)."""
    trace_id = next(_ids) << 64 | 0xABC
    root_id, call_id = next(_ids), next(_ids)
    call_ms = chat.network + chat.queue + chat.prefill + chat.decode
    resource = Resource.create({SERVICE_NAME: service})

    def make(
        name: str, span_id: int, parent: int | None, begin_ms: int, end_ms: int, **kw: Any
    ) -> ReadableSpan:
        return ReadableSpan(
            name=name,
            context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1)),
            parent=SpanContext(trace_id, parent, is_remote=False) if parent is not None else None,
            resource=resource,
            instrumentation_scope=SCOPE,
            status=Status(StatusCode.UNSET),
            start_time=start_ns + begin_ms * MS,
            end_time=start_ns + end_ms * MS,
            **kw,
        )

    return [
        make(route, root_id, None, 0, call_ms + 20, kind=SpanKind.SERVER, attributes={}),
        make(
            f"chat {model}",
            call_id,
            root_id,
            10,
            10 + call_ms,
            kind=SpanKind.CLIENT,
            attributes=_model_attributes(chat, model, provider),
        ),
    ]


def protobuf_body(spans: Sequence[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def span_rows(
    start_ns: int, chat: Chat, service: str = "chat-api", project: str = "default"
) -> list[SpanRow]:
    """The same request as stored rows, for tests that feed the Ingestor directly."""
    rows = []
    for span in otel_spans(start_ns, chat, service=service):
        assert span.context is not None and span.start_time is not None and span.end_time is not None
        parent = span.parent.span_id.to_bytes(8, "big") if span.parent else bytes(8)
        rows.append(
            SpanRow(
                trace_id=span.context.trace_id.to_bytes(16, "big"),
                span_id=span.context.span_id.to_bytes(8, "big"),
                parent_span_id=parent,
                service=service,
                name=span.name,
                span_kind=span.kind.name,
                kind=semconv.KIND_MODEL if span.parent else semconv.KIND_REQUEST,
                start_ns=span.start_time,
                duration_ns=span.end_time - span.start_time,
                attributes={k: str(v) for k, v in (span.attributes or {}).items()},
                project=project,
            )
        )
    return rows


def spread(start_ns: int, end_ns: int, count: int) -> Iterable[int]:
    """``count`` start times evenly spaced in [start, end)."""
    step = (end_ns - start_ns) // count
    return (start_ns + i * step for i in range(count))


@dataclass
class WebhookReceiver:
    """A real HTTP server on 127.0.0.1 that records JSON bodies and answers with scripted statuses."""

    statuses: list[int] = field(default_factory=list)
    """Answered in order, then 200 for ever."""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    hits: int = 0

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with receiver._lock:
                    receiver.hits += 1
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    if status < 300:
                        receiver.bodies.append(body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
