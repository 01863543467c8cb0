"""The reads after an insert look only near its spans: at spans of their traces that start within a
day of the batch's own (``trace_state.NEAR_NS``), so they touch three of ``spans``' daily partitions
however many days are kept. A trace with spans further apart gets its full row from the
reconciler, which reads without that bound."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

from otlp_builders import MS, new_span_id, new_trace_id, protobuf_body, recent_base_ns, span
from query_plans import kept_by_index

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.row_work import ReadBack, build_rows
from latencylens_collector.intake import otlp
from latencylens_collector.pipeline.ingest import BodiesStored, Ingestor
from latencylens_collector.pipeline.reconciler import Reconciler
from latencylens_collector.settings import Settings
from latencylens_collector.storage import trace_state
from latencylens_collector.storage.otlp_sql import BodyLimits, Verdict
from latencylens_collector.storage.store import Store, settings_sql
from latencylens_collector.storage.trace_ids import TRACE_IDS_SET, trace_ids_param

DAY = 86_400 * 10**9


def _trace(late_by_ns: int) -> tuple[int, list[bytes]]:
    """Two export bodies of one trace: a root and its first child, then a child that starts
    ``late_by_ns`` after the root (a queued job that continues the trace)."""
    root_start = recent_base_ns() - late_by_ns
    trace, root = new_trace_id(), new_span_id()
    first = [
        span("POST /agent", trace, root, None, root_start, root_start + 900 * MS),
        span("retrieve", trace, new_span_id(), root, root_start + 10 * MS, root_start + 110 * MS),
    ]
    late_start = root_start + late_by_ns
    late = [span("follow-up", trace, new_span_id(), root, late_start, late_start + 50 * MS)]
    return trace, [protobuf_body(first), protobuf_body(late)]


def _limits() -> BodyLimits:
    return BodyLimits(recent_base_ns(), 64 * 1024, 1024 * 1024, False, 0)


def _decoded(body: bytes) -> list[SpanRow]:
    limits = otlp.Limits.of(Settings(environ={}), now_ns=recent_base_ns())
    return otlp.decode(body, as_json=False, project="default", limits=limits).spans


def _span_count(store: Store, trace: int) -> int:
    sql = (
        f"SELECT span_count FROM {store.table('requests')} FINAL "
        "WHERE trace_id = unhex({t:String}) AND is_deleted = 0"
    )
    [row] = store.query(sql, {"t": f"{trace:032x}"})
    return int(row["span_count"])


def _rows_read(read: ReadBack) -> int:
    return sum(len(json.loads(part.columns_json)[0]) for part in read.parts)


def _reconcile(store: Store) -> None:
    Reconciler(store, settle_s=0, lookback_s=3600).run_once()


def test_the_engine_path_reads_a_trace_near_the_batch_and_the_reconciler_all_of_it(store: Store) -> None:
    trace, (first, late) = _trace(late_by_ns=3 * DAY)
    ingestor = Ingestor(store)
    ingestor.ingest_bodies([("default", first, _limits())], uuid.uuid4().hex)
    assert _span_count(store, trace) == 2
    stored = ingestor.insert_bodies([("default", late, _limits())], uuid.uuid4().hex)
    [verdict] = stored.verdicts
    [late_span] = _decoded(late)
    assert verdict is not None and verdict.first_start_ns == verdict.last_start_ns == late_span.start_ns
    read = ingestor.read_back(stored)
    # The root and the first child start three days before the late child: outside a day either
    # side of it, so the read gets the late child alone (1 row, not 3), and the row it builds
    # (no root among what it read) changes nothing.
    assert _rows_read(read) == 1
    ingestor.write_built(build_rows(read))
    assert _span_count(store, trace) == 2
    _reconcile(store)  # reads the trace whole: root, first child, late child
    assert _span_count(store, trace) == 3


def test_the_python_path_reads_near_the_batch_too(store: Store) -> None:
    trace, (first, late) = _trace(late_by_ns=3 * DAY)
    ingestor = Ingestor(store)
    ingestor.ingest(_decoded(first))
    assert _span_count(store, trace) == 2
    ingestor.ingest(_decoded(late))
    assert ingestor.spans_read_back == 0  # its stamps saw the late child alone: nothing read back
    assert _span_count(store, trace) == 2
    _reconcile(store)
    assert _span_count(store, trace) == 3


def test_a_trace_within_a_day_of_the_batch_is_read_whole_at_once(store: Store) -> None:
    # The late child starts 23 hours after the root: within a day, so both paths read the root
    # and the first child back with it and write the full row at once (no reconciler).
    for path in ("engine", "python"):
        trace, (first, late) = _trace(late_by_ns=23 * 3600 * 10**9)
        ingestor = Ingestor(store)
        if path == "engine":
            ingestor.ingest_bodies([("default", first, _limits())], uuid.uuid4().hex)
            stored = ingestor.insert_bodies([("default", late, _limits())], uuid.uuid4().hex)
            read = ingestor.read_back(stored)
            assert _rows_read(read) == 3, path
            ingestor.write_built(build_rows(read))
        else:
            ingestor.ingest(_decoded(first))
            ingestor.ingest(_decoded(late))
            assert ingestor.spans_read_back == 3, path  # root, first child and its own late child
        assert _span_count(store, trace) == 3, path


def test_a_verdict_that_does_not_say_where_its_spans_start_reads_every_day(store: Store) -> None:
    # A verdict written by an earlier collector's views has no starts (0): its traces are read
    # without a bound, all three spans.
    trace, (first, late) = _trace(late_by_ns=3 * DAY)
    ingestor = Ingestor(store)
    ingestor.ingest_bodies([("default", first, _limits())], uuid.uuid4().hex)
    ingestor.ingest_bodies([("default", late, _limits())], uuid.uuid4().hex)
    earlier = Verdict(spans=1, project="default", trace_spans={trace.to_bytes(16, "big"): 1})
    assert _rows_read(ingestor.read_back(BodiesStored([earlier]))) == 3


def _spans_over_days(days: int) -> list[SpanRow]:
    """One trace with a span a day, back from today."""
    trace = new_trace_id()
    now = recent_base_ns()
    starts = [now - day * DAY for day in range(days)]
    body = protobuf_body(
        [span(f"s{i}", trace, new_span_id(), None, start, start + MS) for i, start in enumerate(starts)]
    )
    return _decoded(body)


def test_the_bounded_read_back_prunes_the_days_under_final(store: Store) -> None:
    # Under FINAL, ClickHouse 26.3 and later prunes no partition by a WHERE unless told: the
    # read-back rides the setting the server needs (Store.near_settings), or none on a server that
    # prunes anyway. Ten days stored, the newest span's day and the one before it read.
    spans: Sequence[SpanRow] = _spans_over_days(10)
    store.insert_spans(spans)
    near = trace_state.Near.of(spans[0].start_ns, spans[0].start_ns)
    sql = trace_state._STORED_SPANS_READ_BACK.format(
        spans=store.table("spans"), ids_set=TRACE_IDS_SET, near=trace_state._NEAR
    )
    params = {
        "project": "default",
        "trace_ids": trace_ids_param([spans[0].trace_id]),
        "most_spans_and_one": 100,
        **near._asdict(),
    }
    # Parts kept by the first index in the plan: the min-max of start_time, which prunes with the
    # partition key (one part a day here).
    with_settings = sql + settings_sql(store.near_settings())
    assert kept_by_index(store, with_settings, params, "Indexes:", "Parts") == (2, 10)
    if store.near_settings():  # the server defers pruning under FINAL: without the setting, all ten
        assert kept_by_index(store, sql, params, "Indexes:", "Parts") == (10, 10)
    read = trace_state.stored_traces_unparsed(store, [spans[0].trace_id], "default", near=near)
    assert len(json.loads(read)[0]) == 2  # today's span and yesterday's (a day before it, within the bound)
