"""Issue 18: the pieces of the engine ingest path that need no ClickHouse: the frame check that
keeps a sender from setting the envelope's fields, the envelope itself, the framing of a batch."""

from __future__ import annotations

import re

from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from otlp_builders import chat_trace, protobuf_body

from latencylens_collector.intake import otlp
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


def test_on_a_cluster_every_node_gets_the_views_and_spans_go_to_their_shard() -> None:
    """``ON CLUSTER`` right after each name; the SQL itself, and so the views' names, unchanged;
    the verdicts stay a plain table of the node (never replicated: a verdict is its INSERT's);
    the spans view writes the Distributed front ``spans``, not ``spans_local``."""
    single, cluster = otlp_sql.statements("ll"), otlp_sql.statements("ll", "prod")
    assert len(cluster) == len(single) == 14  # the verdicts table, and two sets of six
    for alone, on in zip(single, cluster, strict=True):
        head = re.match(r"(?:CREATE (?:TABLE|MATERIALIZED VIEW) IF NOT EXISTS|ALTER TABLE) ll\.\w+", alone)
        assert head is not None
        name = head.group(0)
        assert on == alone.replace(name, f"{name} ON CLUSTER prod", 1)
        assert "ON CLUSTER" not in alone
        assert "Replicated" not in on and "_local" not in on
    spans_views = [s for s in cluster if ".otlp_spans_mv_" in s]
    assert len(spans_views) == 2 and all(" TO ll.spans AS SELECT " in view for view in spans_views)
    verdicts = next(s for s in cluster if "CREATE TABLE IF NOT EXISTS ll.otlp_verdicts " in s)
    assert "ENGINE = MergeTree ORDER BY (batch, seq)" in verdicts
    landing = otlp_sql.landing_table("ll")
    assert cluster[0].startswith(f"CREATE TABLE IF NOT EXISTS {landing} ON CLUSTER prod (")


def test_a_cluster_insert_stores_spans_on_their_shards_before_it_returns() -> None:
    assert "distributed_foreground_insert" not in otlp_sql.insert_settings()
    assert otlp_sql.insert_settings(cluster="prod")["distributed_foreground_insert"] == 1
    in_file = otlp_sql.insert_settings("/data/s.proto", "prod")
    assert in_file["format_schema"] == "/data/s.proto" and in_file["distributed_foreground_insert"] == 1
    assert otlp_sql.insert_settings("/data/s.proto")["format_schema_source"] == "file"


def test_a_body_without_a_verdict_row_has_no_verdict() -> None:
    """Bodies 0 and 2 have rows; 1 has none (no span, or its verdict is on another node): None,
    so it takes the Python path, never counted as stored."""
    starts = {"first_start_ns": 10, "last_start_ns": 20}
    rows = [
        {"seq": 0, "spans": 4, "not_plain": 0, "project": "p", "ids": [b"t" * 16], "counts": [4], **starts},
        {"seq": 2, "spans": 3, "not_plain": 1, "project": "p", "ids": [b"u" * 16], "counts": [2], **starts},
    ]
    first, missing, third = otlp_sql.read_verdicts(rows, 3)
    assert first is not None and first.stored_all and first.trace_spans == {b"t" * 16: 4}
    assert (first.first_start_ns, first.last_start_ns) == (10, 20)
    assert missing is None
    assert third is not None and not third.stored_all
    assert otlp_sql.read_verdicts([], 2) == [None, None]


def test_the_sql_checks_the_limits_the_python_path_applies() -> None:
    """The storage layer cannot import the intake's limits: it repeats them, and they must agree."""
    assert otlp_sql.FUTURE_LIMIT_NS == otlp.FUTURE_LIMIT_NS
    assert otlp_sql.MAX_EVENTS_PER_SPAN == otlp.MAX_EVENTS_PER_SPAN


def test_two_sets_of_views_one_for_spans_with_events() -> None:
    """The set of spans without events is the one an INSERT takes first; the other reads events'
    attribute keys (its schema says so) and has its own landing table; both feed one verdicts
    table and ``spans``."""
    plain, with_events = otlp_sql.landing_table("a"), otlp_sql.landing_table("a", with_events=True)
    assert plain != with_events
    statements = otlp_sql.statements("a")
    assert sum(f"CREATE TABLE IF NOT EXISTS {plain} " in s for s in statements) == 1
    assert sum(f"CREATE TABLE IF NOT EXISTS {with_events} " in s for s in statements) == 1
    assert sum("CREATE TABLE IF NOT EXISTS a.otlp_verdicts " in s for s in statements) == 1
    assert "repeated EventKey attributes = 3" in otlp_sql.schema(with_events=True)
    assert "EventKey" not in otlp_sql.schema()
    assert otlp_sql.insert_settings(with_events=True)["format_schema"] == otlp_sql.EVENTS_PROTO
    assert otlp_sql.insert_settings()["format_schema"] == otlp_sql.PROTO
    assert otlp_sql.schema_file_name() != otlp_sql.schema_file_name(with_events=True)


def test_which_bodies_have_span_events() -> None:
    request = ExportTraceServiceRequest.FromString(BODY)
    assert not otlp_sql.has_span_events(BODY)
    request.resource_spans[0].scope_spans[0].spans[2].events.add(name="gen_ai.choice", time_unix_nano=1)
    assert otlp_sql.has_span_events(request.SerializeToString())
    assert not otlp_sql.has_span_events(b"\x0a\x05abc")  # does not parse: no retry, Python answers it


def _reference_has_events(body: bytes) -> bool:
    return any(
        span.events
        for rs in ExportTraceServiceRequest.FromString(body).resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    )


@st.composite
def _requests(draw: st.DrawFn) -> bytes:
    """Bodies of every shape the probe must read right: empty resources, scopes and spans, spans
    of many sizes (lengths of 90, 0x5a, and of several varint bytes), events with and without
    names and attributes, anywhere or nowhere."""
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 3))):
        resource_spans = request.resource_spans.add()
        if draw(st.booleans()):
            resource_spans.resource.attributes.add(key="service.name", value=AnyValue(string_value="svc"))
        for _ in range(draw(st.integers(0, 3))):
            scope_spans = resource_spans.scope_spans.add()
            # The probe keeps only structure: 45 spans without events make a scope of 90 (0x5a) bytes.
            for _ in range(draw(st.one_of(st.integers(0, 60), st.sampled_from([44, 45, 46])))):
                span = scope_spans.spans.add()
                span.name = "x" * draw(st.sampled_from([0, 1, 45, 88, 90, 126, 200, 16_400]))
                span.trace_id = draw(st.binary(min_size=0, max_size=16))
                if draw(st.integers(0, 9)) == 0:
                    event = span.events.add(name=draw(st.sampled_from(["", "Z", "gen_ai.choice"])))
                    event.time_unix_nano = draw(st.integers(0, 2**64 - 1))
                    if draw(st.booleans()):
                        event.attributes.add(key="k", value=AnyValue(string_value="Z" * 90))
    return request.SerializeToString()


@settings(max_examples=300, deadline=None)
@given(_requests())
def test_the_events_probe_agrees_with_a_full_parse(body: bytes) -> None:
    assert otlp_sql.has_span_events(body) == _reference_has_events(body)


def test_the_events_probe_where_a_length_is_0x5a() -> None:
    """Lengths whose bytes are 0x5a (90 = 45 bare spans; 90 × 128 + 1 as a varint's second byte)
    next to events and not: only events count."""
    for spans in (45, 90 * 64 + 1):
        request = ExportTraceServiceRequest()
        request.resource_spans.add().scope_spans.add().spans.extend([Span() for _ in range(spans)])
        assert not otlp_sql.has_span_events(request.SerializeToString())
        request.resource_spans[0].scope_spans[0].spans[-1].events.add(name="e")
        assert otlp_sql.has_span_events(request.SerializeToString())


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_the_events_probe_on_arbitrary_bytes(body: bytes) -> None:
    """Bytes that are not an export: no error; when both parsers read them, the same answer."""
    answer = otlp_sql.has_span_events(body)
    try:
        expected = _reference_has_events(body)
    except DecodeError:
        return
    assert answer == expected
