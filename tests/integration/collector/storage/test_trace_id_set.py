"""``spans``' set index over trace ids (migration 0021): the reads after an insert read the granules
that hold the batch's traces, not every granule whose key range a random trace id falls in.

Random trace ids fall inside the key range of nearly every granule, so the sorting key alone keeps
them all. The set keeps only the granules that hold one of the ids: here the batch's own part, and
the one granule of the older part that holds a trace the batch continues (a late span)."""

from __future__ import annotations

from otlp_builders import MS, new_span_id, new_trace_id, protobuf_body, recent_base_ns, span
from query_plans import kept_by_index

from latencylens_collector.intake import otlp
from latencylens_collector.settings import Settings
from latencylens_collector.storage import trace_state
from latencylens_collector.storage.store import Store, settings_sql
from latencylens_collector.storage.trace_ids import TRACE_IDS_SET, trace_ids_param

OLDER_SPANS = 40_000
"""In one merged part: five granules of 8,192 rows, each spanning a wide range of random ids."""


def _store_older_spans(store: Store, start_ns: int) -> bytes:
    """``OLDER_SPANS`` spans of 8,000 traces with random ids, merged into one part; the first of
    their trace ids, whose spans open the part's first granule (so they lie in one granule).

    Every span starts at ``start_ns``, the batch's start: spans spread over the minutes before it
    would fall into two days' partitions, and two parts, when the test runs just after midnight."""
    spans = store.table("spans")
    store.command(
        f"INSERT INTO {spans} (project, trace_id, span_id, start_time, duration_ns) "
        "SELECT 'default', sipHash128(number % 8000), reinterpretAsFixedString(sipHash64(number)), "
        f"fromUnixTimestamp64Nano({{start:Int64}}), 1000 FROM numbers({OLDER_SPANS})",
        {"start": start_ns},
    )
    store.command(f"OPTIMIZE TABLE {spans} FINAL")
    [row] = store.query(f"SELECT trace_id FROM {spans} ORDER BY trace_id LIMIT 1")  # first granule
    return bytes(row["trace_id"])


def test_the_reads_after_an_insert_keep_the_granules_that_hold_the_batch(store: Store) -> None:
    now = recent_base_ns()
    older = _store_older_spans(store, now)
    batch_traces = [new_trace_id() for _ in range(20)]
    body = protobuf_body(
        [
            span(f"s{index}", trace, new_span_id(), None, now, now + MS)
            for index, trace in enumerate(batch_traces * 3)
        ]
        + [span("late", int.from_bytes(older, "big"), new_span_id(), None, now, now + MS)]  # continues one
    )
    limits = otlp.Limits.of(Settings(environ={}), now_ns=now)
    rows = otlp.decode(body, as_json=False, project="default", limits=limits).spans
    store.insert_spans(rows)  # the batch: a part of its own, one granule
    batch = sorted({row.trace_id for row in rows})
    near = trace_state.Near.of(now, now)
    params = {"project": "default", "trace_ids": trace_ids_param(batch), **near._asdict()}
    spans = store.table("spans")

    # The key keeps nearly every granule of the older part; the set keeps the batch's granule and
    # the older part's one granule that holds the continued trace (each id is in one granule).
    stamps_sql = trace_state._STAMPS.format(spans=spans, ids_set=TRACE_IDS_SET, near=trace_state._NEAR)
    kept, given = kept_by_index(store, stamps_sql, params, "Name: trace_id_set", "Granules")
    assert given >= 5 and kept == 2, (kept, given)
    read_back_sql = trace_state._STORED_SPANS_READ_BACK.format(
        spans=spans, ids_set=TRACE_IDS_SET, near=trace_state._NEAR
    ) + settings_sql(store.near_settings())
    read_back_params = {**params, "most_spans_and_one": 100}
    by_set = kept_by_index(store, read_back_sql, read_back_params, "Name: trace_id_set", "Granules")
    assert by_set == (kept, given)  # under FINAL too

    # What the set keeps is all there is: every trace's spans, the continued one's older spans too.
    stamps = trace_state.stamps(store, batch, "default", near)
    [older_count] = store.query(
        f"SELECT count() AS spans FROM {spans} WHERE trace_id = {{t:FixedString(16)}}", {"t": older}
    )
    assert older in stamps and len(stamps) == len(batch_traces) + 1
    assert {trace: stamp.spans for trace, stamp in stamps.items()} == {
        trace: (older_count["spans"] if trace == older else 3) for trace in batch
    }
    read = trace_state.stored_traces(store, batch, "default", near)
    assert sum(len(trace.spans) for trace in read.values()) == 3 * len(batch_traces) + older_count["spans"]
