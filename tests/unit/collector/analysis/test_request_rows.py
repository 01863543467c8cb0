"""Request rows from a small hand-built trace, without ClickHouse."""

from __future__ import annotations

import pytest
from otlp_builders import EXPECTED_PARTS_MS, MS, chat_trace, export_request

from latencylens import semconv
from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.analysis.conventions import model_timing, parse_int
from latencylens_collector.analysis.records import REQUEST_COLUMNS, SpanRow
from latencylens_collector.analysis.request_rows import build_request_row, stream_metrics
from latencylens_collector.intake import otlp

BASE = 1_700_000_000_000_000_000


def rows_of(spans: list) -> list[SpanRow]:
    return otlp.flatten(export_request(spans)).spans


def test_request_row_of_a_small_trace() -> None:
    spans = rows_of(chat_trace(BASE, service="shop", model="m-1"))
    row = build_request_row(spans, computed_at_us=42)
    assert row is not None
    assert set(row) == set(REQUEST_COLUMNS)
    assert row["trace_id"] == spans[0].trace_id
    assert (row["start_time"], row["e2e_ns"]) == (BASE, 1000 * MS)
    assert (row["service"], row["name"], row["model"], row["provider"]) == (
        "shop",
        "POST /chat",
        "m-1",
        "groq",
    )
    assert {name: row[f"{name}_ns"] // MS for name in COMPONENTS} == EXPECTED_PARTS_MS
    assert sum(row[f"{name}_ns"] for name in COMPONENTS) == row["e2e_ns"]
    assert sum(row[f"busy_{name}_ns"] for name in COMPONENTS) == row["e2e_ns"]  # nothing runs in parallel
    assert row["provenance"]["queue"] == "reported"
    assert row["provenance"]["network"] == "derived"
    assert row["inconsistent"] == 0
    assert (row["input_tokens"], row["output_tokens"], row["cache_read_input_tokens"]) == (500, 101, 100)
    assert row["ttft_ns"] == 300 * MS
    assert row["itl_ns"] == 4 * MS  # (700 − 300) ms over 100 gaps
    assert row["decode_tokens_per_second"] == pytest.approx(101 / 0.4)
    assert (row["model_calls"], row["span_count"], row["status_error"], row["computed_at"]) == (1, 4, 0, 42)


def test_no_row_without_a_root() -> None:
    children = [span for span in rows_of(chat_trace(BASE)) if span.has_parent]
    assert build_request_row(children, 1) is None


def test_primary_model_is_the_one_on_the_critical_path() -> None:
    spans = rows_of(chat_trace(BASE, model="slow-model"))
    root = next(span for span in spans if not span.has_parent)
    # A parallel model call that ends early: busy time, but not on the critical path.
    side = SpanRow(
        trace_id=root.trace_id,
        span_id=b"\x09" * 8,
        parent_span_id=root.span_id,
        service=root.service,
        name="chat other",
        span_kind="client",
        kind="model",
        start_ns=BASE + 200 * MS,
        duration_ns=100 * MS,
        attributes={
            semconv.GEN_AI_RESPONSE_MODEL: "side-model",
            semconv.GEN_AI_USAGE_PROMPT_TOKENS_DEPRECATED: "7",
            semconv.GEN_AI_USAGE_COMPLETION_TOKENS_DEPRECATED: "3",
        },
    )
    row = build_request_row([*spans, side], 1)
    assert row is not None
    assert row["model"] == "slow-model"
    assert row["model_calls"] == 2
    assert (row["input_tokens"], row["output_tokens"]) == (507, 104)
    assert sum(row[f"{name}_ns"] for name in COMPONENTS) == row["e2e_ns"]
    assert sum(row[f"busy_{name}_ns"] for name in COMPONENTS) > row["e2e_ns"]


def test_stream_metrics_without_server_timing() -> None:
    call = SpanRow(
        trace_id=b"\x01" * 16,
        span_id=b"\x02" * 8,
        parent_span_id=b"\x03" * 8,
        service="s",
        name="chat",
        span_kind="client",
        kind="model",
        start_ns=BASE,
        duration_ns=1000 * MS,
        attributes={
            semconv.GEN_AI_USAGE_OUTPUT_TOKENS: "11",
            semconv.STREAM_FIRST_CONTENT_NS: str(200 * MS),
            semconv.STREAM_LAST_CHUNK_NS: str(700 * MS),
        },
    )
    metrics = stream_metrics(call)
    assert metrics["ttft_ns"] == 200 * MS
    assert metrics["itl_ns"] == 50 * MS
    assert metrics["decode_tokens_per_second"] == pytest.approx(11 / 0.5)


def test_non_streamed_call_has_no_itl() -> None:
    attrs = {semconv.GEN_AI_USAGE_OUTPUT_TOKENS: "5"}
    call = SpanRow(
        b"\x01" * 16, b"\x02" * 8, b"\x03" * 8, "s", "chat", "client", "model", BASE, MS, attributes=attrs
    )
    assert stream_metrics(call) == {"ttft_ns": None, "itl_ns": None, "decode_tokens_per_second": None}


def test_attribute_parsing() -> None:
    assert [parse_int(v) for v in ("12", "1.5e3", "", None, "x")] == [12, 1500, None, None, None]
    timing = model_timing({semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: "0.25"})
    assert timing.first_content_ns == 250 * MS
