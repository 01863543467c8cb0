"""Issue 18: the pieces of the engine ingest path that need no ClickHouse: the frame check that
keeps a sender from setting the envelope's fields, the envelope itself, the framing of a batch."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from otlp_builders import chat_trace, protobuf_body

from latencylens_collector.storage import otlp_sql

BODY = protobuf_body(chat_trace(1_700_000_000_000_000_000))
LIMITS = otlp_sql.BodyLimits(1_700_000_000_000_000_000, 65_536, 1_048_576, False, 16_384)


def test_a_real_export_body_passes_the_frame_check() -> None:
    assert otlp_sql.otlp_frame_ok(BODY)
    assert otlp_sql.otlp_frame_ok(b"")  # an empty export: nothing to store, nothing refused


def test_bodies_that_are_not_plain_otlp_fail_the_frame_check() -> None:
    # A sender appending the envelope's own fields (its project!) is sent to the Python path.
    assert not otlp_sql.otlp_frame_ok(BODY + otlp_sql.envelope("other", "b", 0, LIMITS))
    assert not otlp_sql.otlp_frame_ok(BODY[:-1])  # the last resource's length runs past the end
    assert not otlp_sql.otlp_frame_ok(b"\x12\x00")  # field 2: not in an export request
    assert not otlp_sql.otlp_frame_ok(b"\x0a\xff\xff\xff\xff\xff\xff")  # length varint never ends


def test_the_envelope_is_invisible_to_an_otlp_reader() -> None:
    """Appended fields (1001–1008) merge into the message; OTLP's own reader skips them."""
    extra = otlp_sql.envelope("alpha", "batch-1", 3, LIMITS)
    assert b"alpha" in extra and b"batch-1" in extra
    merged, plain = (
        ExportTraceServiceRequest.FromString(BODY + extra),
        ExportTraceServiceRequest.FromString(BODY),
    )
    assert list(merged.resource_spans) == list(plain.resource_spans)


def test_a_batch_is_length_delimited() -> None:
    extra = otlp_sql.envelope("p", "b", 0, LIMITS)
    data = otlp_sql.framed([(BODY, extra), (b"", extra)])
    size = len(BODY) + len(extra)
    prefix = bytes([size & 0x7F | 0x80, size >> 7]) if size < 1 << 14 else None
    assert prefix is not None and data.startswith(prefix + BODY + extra)
    assert data.endswith(bytes([len(extra)]) + extra)


def test_views_are_named_by_their_sql() -> None:
    """Two collectors with the same mapping share the views; the database is part of the SQL."""
    first, again = otlp_sql.statements("a"), otlp_sql.statements("a")
    assert first == again
    assert otlp_sql.landing_table("a").startswith("a.otlp_landing_")
    assert all(statement.count(" a.") or "a." in statement for statement in first)
