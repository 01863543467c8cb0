"""Span events: decoded the same on every path, bounded, stored with ns times, and read for a
stream's first content and last chunk when a model span carries no stream record of our SDK.
Also vLLM's reported time to first token for a client call that measured none.

Events come from the real OpenTelemetry SDK (``Span.add_event`` under real span limits), from the
real OpenLLMetry and OpenInference instrumentations around the real ``openai`` SDK
(``conventions_producer.py``), or from vLLM's documented span (``tests/fixtures``).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from otlp_builders import MS, export_request, recent_base_ns, to_otlp_json
from test_conventions_vllm import FIXTURES, detail, load_shifted, post_fixture

from latencylens import semconv
from latencylens_collector.analysis.conventions import events, resolve_trace
from latencylens_collector.analysis.records import SpanEvent, SpanRow
from latencylens_collector.analysis.request_rows import build_request_row
from latencylens_collector.demo.provider_sim import ProviderSimulator, Timing
from latencylens_collector.intake import otlp
from latencylens_collector.storage.store import Store

US = 1_000
PRODUCER = Path(__file__).with_name("conventions_producer.py")


def recorded(
    model_attributes: dict[str, Any],
    timeline: Sequence[tuple[str, int, dict[str, Any]]],
    duration_ns: int = 500 * MS,
    limits: SpanLimits | None = None,
) -> list[ReadableSpan]:
    """A request root around one model span, recorded by the real SDK: each ``(name, offset_ns,
    attributes)`` of ``timeline`` is an event at that offset from the model span's start."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=limits or SpanLimits())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.events")
    base = recent_base_ns()
    with tracer.start_as_current_span(
        "POST /chat", kind=SpanKind.SERVER, start_time=base, end_on_exit=False
    ) as root:
        model = tracer.start_span(
            "chat gpt-4.1", kind=SpanKind.CLIENT, attributes=model_attributes, start_time=base + MS
        )
        for name, offset, attributes in timeline:
            model.add_event(name, attributes, timestamp=base + MS + offset)
        model.end(end_time=base + MS + duration_ns)
        root.end(end_time=base + 2 * MS + duration_ns)
    return list(exporter.get_finished_spans())


def decode_all_ways(spans: Sequence[ReadableSpan]) -> list[SpanRow]:
    """Rows from the protobuf fast path; the strict parse and OTLP/JSON must give the same."""
    request = export_request(spans)
    body = request.SerializeToString()
    fast = otlp.decode(body, as_json=False)
    assert fast.spans == otlp.flatten(otlp.parse_protobuf(body)).spans
    assert fast.spans == otlp.decode(json.dumps(to_otlp_json(request)).encode(), as_json=True).spans
    return fast.spans


def model_row(rows: Sequence[SpanRow]) -> SpanRow:
    [model] = [row for row in rows if row.kind == "model"]
    return model


CHAT = {semconv.GEN_AI_OPERATION_NAME: "chat", semconv.GEN_AI_PROVIDER_NAME: "openai"}


def test_events_are_decoded_alike_on_every_path_with_ns_times_and_typed_values() -> None:
    spans = recorded(
        CHAT,
        [
            ("exception", 7, {"exception.type": "ValueError", "exception.escaped": False}),
            ("tick", 123_456_789, {"n": 3, "ratio": 0.5, "tags": ["a", "b"]}),
        ],
    )
    model = model_row(decode_all_ways(spans))
    start = model.start_ns
    assert model.events == (
        SpanEvent("exception", start + 7, {"exception.type": "ValueError", "exception.escaped": "false"}),
        SpanEvent("tick", start + 123_456_789, {"n": "3", "ratio": "0.5", "tags": '["a","b"]'}),
    )
    assert model.dropped_events_count == 0
    assert events.FIRST_CONTENT_NS not in model.attributes  # no stream events among them


def test_a_negative_event_time_in_json_keeps_the_span() -> None:
    request = export_request(recorded(CHAT, [("tick", 5, {})]))
    document = to_otlp_json(request)
    [model] = [
        s for s in document["resourceSpans"][0]["scopeSpans"][0]["spans"] if s["name"].startswith("chat")
    ]
    model["events"][0]["timeUnixNano"] = "-5"
    batch = otlp.decode(json.dumps(document).encode(), as_json=True)
    assert batch.rejected == 0
    assert model_row(batch.spans).events[0].time_ns == 0


def test_events_beyond_the_limits_keep_the_first_127_and_the_last() -> None:
    """200 chunk events (the SDK allowed 300): 72 are dropped, chunks 127..198; 130 attributes on
    the first event: 2 are dropped. Stream times are read before the limit: the last chunk is 199."""
    timeline = [(events.OPENLLMETRY_CHUNK, 1000 * (i + 1), {}) for i in range(200)]
    timeline[0] = (events.OPENLLMETRY_CHUNK, 1000, {f"k{i:03d}": i for i in range(130)})
    limits = SpanLimits(max_events=300, max_event_attributes=200)
    request = export_request(recorded(CHAT, timeline, limits=limits))
    batch = otlp.decode(request.SerializeToString(), as_json=False)
    model = model_row(batch.spans)
    kept = [event.time_ns - model.start_ns for event in model.events]
    assert kept == [1000 * (i + 1) for i in range(127)] + [200_000]
    assert list(model.events[0].attributes) == [f"k{i:03d}" for i in range(128)]
    assert batch.warnings == {otlp.EVENTS_DROPPED: 72, otlp.EVENT_ATTRIBUTES_DROPPED: 2}
    assert (model.attributes[events.FIRST_CONTENT_NS], model.attributes[events.LAST_CHUNK_NS]) == (
        "1000",
        "200000",
    )
    assert "kept with changes: 72 span events beyond 128 per span dropped" in batch.error_message


def test_events_beyond_the_limit_are_counted_in_metrics(collector: Any) -> None:
    timeline = [(events.OPENLLMETRY_CHUNK, 1000 * (i + 1), {}) for i in range(130)]
    body = export_request(recorded(CHAT, timeline, limits=SpanLimits(max_events=200))).SerializeToString()
    before = _counter(collector.url, "latencylens_span_events_dropped_total")
    response = httpx.post(
        f"{collector.url}/v1/traces", content=body, headers={"content-type": "application/x-protobuf"}
    )
    assert response.status_code == 200
    assert _counter(collector.url, "latencylens_span_events_dropped_total") == before + 2


def _counter(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(f'{name}{{protocol="http"}} '):
            return float(line.split()[-1])
    return 0.0


def test_events_round_trip_through_clickhouse(store: Store) -> None:
    spans = recorded(
        CHAT,
        [(events.OPENLLMETRY_CHUNK, 999_999_001, {}) for _ in range(6)],
        duration_ns=2_000 * MS,
        limits=SpanLimits(max_events=4),
    )
    rows = decode_all_ways(spans)
    store.insert_spans(rows)
    [stored_model] = [row for row in store.spans_of_traces([rows[0].trace_id]) if row.kind == "model"]
    model = model_row(rows)
    assert stored_model == model  # events (ns times) and the sender's dropped count included
    assert (len(model.events), model.dropped_events_count) == (4, 2)
    described = {
        row["name"]: " ".join(row["type"].split())
        for row in store.query(f"DESCRIBE TABLE {store.database}.spans")
    }
    assert described["events"] == (
        "Array(Tuple( name String, time DateTime64(9, 'UTC'), "
        "attributes Map(LowCardinality(String), String)))"
    )
    assert described["dropped_events_count"] == "UInt32"
    for_requests = store.spans_of_traces([rows[0].trace_id], for_requests=True)
    assert all(row.events == () for row in for_requests)  # their stream times are attributes already


def test_openllmetry_chunk_events_give_ttft_and_decode(provider_url: str) -> None:
    rows = produced("openllmetry", provider_url)
    model = model_row(rows)
    chunks = [
        event.time_ns - model.start_ns for event in model.events if event.name == events.OPENLLMETRY_CHUNK
    ]
    assert len(chunks) >= 3
    request = build_request_row(rows, computed_at_us=0)
    assert request is not None
    # TTFT: the first chunk's event; decode (no server timing): last chunk − first chunk, measured.
    assert request["ttft_ns"] == chunks[0]
    assert request["decode_ns"] == chunks[-1] - chunks[0] > 0
    assert request["provenance"]["decode"] == "measured"
    output = request["output_tokens"]
    if output and output > 1:  # ITL: the measured decode over the gaps between output tokens
        assert request["itl_ns"] == (chunks[-1] - chunks[0]) // (output - 1)


def test_openinference_first_token_event_gives_ttft(provider_url: str) -> None:
    rows = produced("openinference", provider_url)
    model = model_row(rows)
    [first] = [
        event.time_ns - model.start_ns
        for event in model.events
        if event.name == events.OPENINFERENCE_FIRST_TOKEN
    ]
    request = build_request_row(rows, computed_at_us=0)
    assert request is not None
    # No chunk events: the last chunk is the span's end (OpenInference ends it with the stream).
    assert request["ttft_ns"] == first
    assert request["decode_ns"] == model.duration_ns - first > 0


@pytest.fixture(scope="module")
def provider_url() -> Iterator[str]:
    timing = Timing(queue_s=0.002, prefill_s=0.03, decode_s=0.06, prompt_tokens=37, completion_tokens=12)
    with ProviderSimulator(lambda body: timing) as sim:
        yield sim.base_url


def produced(name: str, url: str) -> list[SpanRow]:
    """Spans of one streamed call through the real instrumentation, decoded by the collector."""
    module = "opentelemetry" if name == "openllmetry" else "openinference"
    pytest.importorskip(f"{module}.instrumentation.openai")
    done = subprocess.run(
        [sys.executable, str(PRODUCER), name, url, "stream"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    export = ExportTraceServiceRequest.FromString(base64.b64decode(done.stdout.strip().splitlines()[-1]))
    batch = otlp.flatten(export)
    assert batch.rejected == 0
    return batch.spans


def test_sdk_that_dropped_the_first_events_gives_no_first_content() -> None:
    """The SDK keeps the latest 4 of 6 chunk events: the first chunk's is gone, so no TTFT from
    events; the last chunk still ends decode's window once a first content is known."""
    timeline = [(events.OPENLLMETRY_CHUNK, MS * (100 + 10 * i), {}) for i in range(6)]
    rows = decode_all_ways(recorded(CHAT, timeline, limits=SpanLimits(max_events=4)))
    model = model_row(rows)
    assert model.dropped_events_count == 2
    assert events.FIRST_CONTENT_NS not in model.attributes
    assert model.attributes[events.LAST_CHUNK_NS] == str(150 * MS)
    request = build_request_row(rows, computed_at_us=0)
    assert request is not None and request["ttft_ns"] is None
    assert request["decode_ns"] == 0  # unknown first content: nothing measured


def test_a_genai_choice_event_ends_the_stream() -> None:
    """TTFT 0.1 s from the GenAI attribute; the choice event at 400 ms is the last chunk, though
    the span runs to 500 ms: decode = 400 − 100 = 300 ms."""
    attributes = {**CHAT, semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: 0.1}
    rows = decode_all_ways(recorded(attributes, [(events.GENAI_CHOICE, 400 * MS, {"index": 0})]))
    request = build_request_row(rows, computed_at_us=0)
    assert request is not None
    assert request["ttft_ns"] == 100 * MS
    assert request["decode_ns"] == 300 * MS


def test_our_sdks_stream_record_wins_over_events() -> None:
    attributes = {
        **CHAT,
        semconv.SPAN_KIND: semconv.KIND_MODEL,
        semconv.STREAM_FIRST_CONTENT_NS: 50 * MS,
        semconv.STREAM_LAST_CHUNK_NS: 450 * MS,
    }
    timeline = [(events.OPENLLMETRY_CHUNK, 200 * MS, {}), (events.OPENLLMETRY_CHUNK, 300 * MS, {})]
    request = build_request_row(decode_all_ways(recorded(attributes, timeline)), computed_at_us=0)
    assert request is not None
    assert (request["ttft_ns"], request["decode_ns"]) == (50 * MS, 400 * MS)


def test_events_outside_the_span_are_not_its_chunks() -> None:
    found = events.stream_attributes(
        [(events.OPENLLMETRY_CHUNK, 5, None), (events.OPENLLMETRY_CHUNK, 30, None)], start_ns=10, end_ns=20
    )
    assert found == {}


# --- vLLM's reported TTFT --------------------------------------------------------------------------
def test_vllm_time_to_first_token_when_the_client_has_none(collector: Any) -> None:
    """The fixture's client call records no TTFT; vLLM reports time_to_first_token 0.0911 s and
    e2e 1.3342 s for 128 output tokens. TTFT = 91 100 µs (reported: the server's share, without
    the network); ITL = (e2e − TTFT) / (128 − 1) = 1 243 100 µs / 127 = 9 788 188 ns."""
    trace_id = post_fixture(collector.url, "vllm_with_client.otlp.json")
    request = detail(collector.url, trace_id)
    assert request["ttft_ns"] == 91_100 * US
    assert request["itl_ns"] == 1_243_100 * US // 127
    body, _ = load_shifted("vllm_with_client.otlp.json", recent_base_ns())
    resolved = resolve_trace(otlp.decode(body, as_json=True).spans)
    [client] = [row for row in resolved if row.kind == "model"]
    assert client.attributes[semconv.PROVENANCE_TTFT] == semconv.SOURCE_REPORTED
    assert client.attributes[semconv.STREAM_FIRST_CONTENT_NS] == str(91_100 * US)


def test_a_client_ttft_is_kept_over_vllms() -> None:
    document = json.loads((FIXTURES / "vllm_with_client.otlp.json").read_text())
    spans = [s for r in document["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    [client] = [span for span in spans if span["name"].startswith("chat")]
    client["attributes"].append(
        {"key": semconv.STREAM_FIRST_CONTENT_NS, "value": {"intValue": str(120 * MS)}}
    )
    rows = otlp.decode(json.dumps(document).encode(), as_json=True).spans
    [model] = [row for row in resolve_trace(rows) if row.kind == "model"]
    assert model.attributes[semconv.STREAM_FIRST_CONTENT_NS] == str(120 * MS)
    assert semconv.PROVENANCE_TTFT not in model.attributes
