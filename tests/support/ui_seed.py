"""Requests for the browser tests, stored through the real ingest path (Ingestor → chdb).

One request has hand-picked timings so its waterfall and breakdown can be checked exactly; the
rest are varied traffic over the last two hours across two models and providers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from latencylens import semconv
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.storage.store import Store

MS = 1_000_000
KNOWN_TRACE = "a" * 32
"""Trace id of the request with known timings."""
KNOWN_SPANS = ["POST /chat", "retrieve docs", "order_status", "chat llama-3.3-70b"]
"""Its spans in start order (the waterfall order)."""


@dataclass(frozen=True)
class Seeded:
    known_trace: str
    count: int
    by_model: dict[str, int]
    slower_than_500ms: int


def _span(
    trace: bytes,
    span: int,
    parent: int,
    name: str,
    kind: str,
    start_ns: int,
    dur_ns: int,
    service: str,
    attrs: dict[str, Any] | None = None,
) -> SpanRow:
    attributes = {key: str(value) for key, value in (attrs or {}).items()}
    if kind != "request":
        attributes[semconv.SPAN_KIND] = kind
    return SpanRow(
        trace_id=trace,
        span_id=span.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big"),
        service=service,
        name=name,
        span_kind="server" if kind == "request" else "internal",
        kind=kind,
        start_ns=start_ns,
        duration_ns=dur_ns,
        attributes=attributes,
    )


def _model(
    model: str, provider: str, queue: int, prefill: int, decode: int, first: int, out: int
) -> dict[str, Any]:
    return {
        semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_CHAT,
        semconv.GEN_AI_REQUEST_MODEL: model,
        semconv.GEN_AI_PROVIDER_NAME: provider,
        semconv.PROVIDER_QUEUE_NS: queue,
        semconv.PROVIDER_PREFILL_NS: prefill,
        semconv.PROVIDER_DECODE_NS: decode,
        semconv.PROVIDER_SERVER_TOTAL_NS: queue + prefill + decode,
        semconv.STREAM_FIRST_CONTENT_NS: first,
        semconv.STREAM_LAST_CHUNK_NS: first + decode,
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 1200,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: out,
        semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 800,
    }


def known_request(start_ns: int) -> list[SpanRow]:
    """600 ms: root 0–600, retrieve 10–110, order_status 120–150, model call 160–560 ms.

    Critical path: retrieval 100, tool 30, the call's 400 ms = queue 40 + prefill 20 + decode 300 +
    network 40 (400 − 360 server), and app time where no child runs: 10 + 10 + 10 + 40 = 70 ms.
    """
    trace = bytes.fromhex(KNOWN_TRACE)
    at = lambda ms: start_ns + ms * MS  # noqa: E731
    return [
        _span(trace, 1, 0, "POST /chat", "request", at(0), 600 * MS, "chat-api"),
        _span(
            trace,
            2,
            1,
            "retrieve docs",
            "retrieval",
            at(10),
            100 * MS,
            "chat-api",
            {semconv.GEN_AI_DATA_SOURCE_ID: "product-docs"},
        ),
        _span(
            trace,
            3,
            1,
            "order_status",
            "tool",
            at(120),
            30 * MS,
            "chat-api",
            {semconv.GEN_AI_TOOL_NAME: "order_status"},
        ),
        _span(
            trace,
            4,
            1,
            "chat llama-3.3-70b",
            "model",
            at(160),
            400 * MS,
            "chat-api",
            _model("llama-3.3-70b", "groq", 40 * MS, 20 * MS, 300 * MS, 80 * MS, 600),
        ),
    ]


TGI_TRACE = "7" * 32
"""Trace id of a request to a provider that does not split prefill from decode (TGI)."""


def tgi_request(start_ns: int) -> list[SpanRow]:
    """1400 ms: root 0–1400, one TGI call 50–1350 ms with the attributes the SDK's TGI adapter
    writes from the reconstructed headers (x-queue-time 15, x-inference-time 1217, x-total-time
    1234 ms, x-prompt-tokens 28, x-generated-tokens 100).

    Critical path: app 50 + 50 = 100 ms; the call's 1300 ms = network 1300 − 1234 = 66 + queue 15 +
    inference 1217 + server other 1234 − 15 − 1217 = 2.
    """
    trace = bytes.fromhex(TGI_TRACE)
    attrs = {
        semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_CHAT,
        semconv.GEN_AI_REQUEST_MODEL: "llama-3.1-8b",
        semconv.GEN_AI_PROVIDER_NAME: "tgi",
        semconv.PROVIDER_QUEUE_NS: 15 * MS,
        semconv.PROVIDER_INFERENCE_NS: 1_217 * MS,
        semconv.PROVIDER_SERVER_TOTAL_NS: 1_234 * MS,
        semconv.GEN_AI_USAGE_INPUT_TOKENS: 28,
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 100,
    }
    return [
        _span(trace, 1, 0, "POST /ask", "request", start_ns, 1_400 * MS, "chat-api"),
        _span(trace, 2, 1, "chat llama-3.1-8b", "model", start_ns + 50 * MS, 1_300 * MS, "chat-api", attrs),
    ]


def varied_request(index: int, start_ns: int, rng: random.Random) -> tuple[list[SpanRow], str, int]:
    model, provider, service, route = [
        ("llama-3.3-70b", "groq", "chat-api", "POST /chat"),
        ("gpt-4o-mini", "openai", "summarizer", "POST /summarize"),
    ][index % 2]
    trace = (0xB0 << 120 | index).to_bytes(16, "big")
    retrieval = rng.randint(5, 60) * MS if rng.random() > 0.1 else 250 * MS
    queue, prefill, decode = rng.randint(1, 30) * MS, rng.randint(5, 40) * MS, rng.randint(80, 300) * MS
    network = rng.randint(10, 40) * MS
    call = queue + prefill + decode + network
    e2e = 5 * MS + retrieval + 5 * MS + call + 5 * MS
    rows = [
        _span(trace, 1, 0, route, "request", start_ns, e2e, service),
        _span(trace, 2, 1, "retrieve docs", "retrieval", start_ns + 5 * MS, retrieval, service),
        _span(
            trace,
            3,
            1,
            f"chat {model}",
            "model",
            start_ns + 10 * MS + retrieval,
            call,
            service,
            _model(
                model, provider, queue, prefill, decode, network // 2 + queue + prefill, rng.randint(50, 400)
            ),
        ),
    ]
    return rows, model, e2e


def seed(store: Store, now_ns: int) -> Seeded:
    rng = random.Random(7)
    rows = known_request(now_ns - 10 * 60 * 1_000_000_000)
    by_model = {"llama-3.3-70b": 1, "gpt-4o-mini": 0}
    slow = 1  # the known request: 600 ms
    count = 40
    for index in range(count - 1):
        start = now_ns - (115 - index * 3) * 60 * 1_000_000_000  # spread over the last two hours
        more, model, e2e = varied_request(index, start, rng)
        rows += more
        by_model[model] += 1
        slow += e2e >= 500 * MS
    assert Ingestor(store).ingest(rows) == count
    return Seeded(known_trace=KNOWN_TRACE, count=count, by_model=by_model, slower_than_500ms=slow)
