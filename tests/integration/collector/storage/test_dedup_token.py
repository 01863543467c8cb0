"""A batch replayed with its first attempt's insert token is dropped at insert time, not stored twice."""

from __future__ import annotations

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.storage.store import Store


def _spans(n: int) -> list[SpanRow]:
    return [
        SpanRow(
            trace_id=b"\x07" * 16,
            span_id=i.to_bytes(8, "big"),
            parent_span_id=bytes(8),
            service="s",
            name=f"span {i}",
            span_kind="internal",
            kind="other",
            start_ns=1_700_000_000_000_000_000 + i,
            duration_ns=5,
            attributes={"k": "v"},
        )
        for i in range(1, n + 1)
    ]


def _stored_rows(store: Store) -> int:
    # No FINAL: this counts physical rows, so a duplicate insert would show even before merges.
    rows = store.query(f"SELECT count() AS n FROM {store.settings.database}.spans")
    return int(rows[0]["n"])


def test_same_token_twice_is_stored_once(store: Store) -> None:
    batch = _spans(3)
    store.insert_spans(batch, dedup_token="batch-42")
    store.insert_spans(batch, dedup_token="batch-42")
    assert _stored_rows(store) == 3


def test_a_different_token_is_a_different_insert(store: Store) -> None:
    batch = _spans(3)
    store.insert_spans(batch, dedup_token="batch-1")
    store.insert_spans(batch, dedup_token="batch-2")
    assert _stored_rows(store) == 6  # ReplacingMergeTree collapses these later; reads use FINAL
