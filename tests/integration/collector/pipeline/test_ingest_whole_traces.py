"""Request rows of traces a batch holds whole are built from the batch; they must equal the rows a
read-back of the stored spans gives, and a trace with spans stored earlier must still be read back."""

from __future__ import annotations

from otlp_builders import MS, chat_trace, protobuf_body, recent_base_ns

from latencylens_collector.analysis.records import REQUEST_COLUMNS
from latencylens_collector.analysis.request_rows import build_request_row, group_by_trace, row_version
from latencylens_collector.intake import otlp
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.storage.store import Store


def test_rows_from_the_batch_equal_rows_from_a_read_back(store: Store) -> None:
    base = recent_base_ns()
    spans = [s for number in range(6) for s in chat_trace(base + number * 5 * MS, scale=number + 1)]
    rows = otlp.decode(protobuf_body(spans), as_json=False).spans
    assert Ingestor(store).ingest(rows) == 6

    ids = {row.trace_id for row in rows}
    stored = group_by_trace(store.spans_of_traces(ids, for_requests=True))
    expected = {trace_id: build_request_row(trace_spans) for trace_id, trace_spans in stored.items()}
    written = store.query(
        f"SELECT {', '.join(REQUEST_COLUMNS)}, toUnixTimestamp64Nano(start_time) AS start_ns, "
        f"toUnixTimestamp64Micro(computed_at) AS computed_us FROM {store.database}.requests FINAL "
        "ORDER BY trace_id"
    )
    assert len(written) == 6
    for row in written:
        want = expected[row["trace_id"]]
        assert want is not None
        same = [c for c in REQUEST_COLUMNS if c not in ("start_time", "computed_at", "version")]
        assert {c: row[c] for c in same} == {c: want[c] for c in same}
        assert row["start_ns"] == want["start_time"]
        # Versioned by what it saw: its 4 spans, stamped by ClickHouse at their insert.
        assert row["version"] == row_version(4, row["computed_us"]) and row["computed_us"] > 0
    # chat_trace of scale s spends 400 ms × s decoding on its critical path: 400 × (1+…+6) = 8400 ms.
    assert sum(row["decode_ns"] for row in written) == 8400 * MS


def test_a_trace_with_stored_spans_is_read_back_and_a_duplicate_batch_too(store: Store) -> None:
    root, retrieval, model, tool = otlp.decode(
        protobuf_body(chat_trace(recent_base_ns())), as_json=False
    ).spans
    ingestor = Ingestor(store)
    assert ingestor.ingest([root, retrieval]) == 1
    assert ingestor.ingest([model, tool]) == 1  # the batch alone has no root: read back
    assert ingestor.ingest([tool, tool]) == 1  # the same span twice in one batch
    [row] = store.query(f"SELECT span_count, tool_ns, decode_ns FROM {store.database}.requests FINAL")
    # All four spans, each once; tool 50 ms and decode 400 ms on the critical path (chat_trace).
    assert row == {"span_count": 4, "tool_ns": 50 * MS, "decode_ns": 400 * MS}
