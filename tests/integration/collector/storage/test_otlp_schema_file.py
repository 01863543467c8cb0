"""The engine ingest path's OTLP schema on the embedded engine: read from a file in the data
directory, never compiled from a copy the engine writes under the working directory (an inline
schema leaves ``__cache__/`` in whatever folder the collector was started from)."""

from __future__ import annotations

from pathlib import Path

import pytest
from otlp_builders import chat_trace, protobuf_body, recent_base_ns

from latencylens_collector.settings import chdb_path
from latencylens_collector.storage import otlp_sql
from latencylens_collector.storage.store import Store


@pytest.mark.parametrize("with_events", [False, True], ids=["plain views", "views with events"])
def test_engine_inserts_leave_nothing_in_the_working_directory(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_events: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    limits = otlp_sql.BodyLimits(recent_base_ns(), 65_536, 1_048_576, False, 16_384)
    body = protobuf_body(chat_trace(recent_base_ns()))
    verdicts = store.insert_otlp_bodies(
        otlp_sql.framed([(body, otlp_sql.envelope("default", "b1", 0, limits))]), "b1", with_events
    )

    assert verdicts, "the engine read the body"
    assert list(tmp_path.iterdir()) == []
    folder = chdb_path(store.settings.clickhouse_dsn) / "format_schemas"
    schema = folder / otlp_sql.schema_file_name(with_events)
    expected = otlp_sql.EVENTS_PROTO if with_events else otlp_sql.PROTO
    assert schema.read_text(encoding="utf-8") == expected
    spans = store.query(f"SELECT count() AS n FROM {store.table('spans')}")
    assert spans[0]["n"] == 4  # chat_trace: root, retrieval, model call, tool


def test_verdicts_table_of_an_earlier_collector_gains_the_span_counts(store: Store) -> None:
    """An ``otlp_verdicts`` made before the per-trace counts (no ``trace_spans``) is altered in
    place on first use: the engine then reports chat_trace's 4 spans under its one trace."""
    store.command(
        f"CREATE TABLE {store.table(otlp_sql.VERDICTS)} (inserted DateTime DEFAULT now(), batch String, "
        "seq UInt32, spans UInt32, not_plain UInt32, project LowCardinality(String), "
        "trace_ids Array(FixedString(16))) ENGINE = MergeTree ORDER BY (batch, seq)"
    )
    limits = otlp_sql.BodyLimits(recent_base_ns(), 65_536, 1_048_576, False, 16_384)
    spans = chat_trace(recent_base_ns())
    rows = store.insert_otlp_bodies(
        otlp_sql.framed([(protobuf_body(spans), otlp_sql.envelope("default", "b2", 0, limits))]), "b2"
    )
    [verdict] = otlp_sql.read_verdicts(rows, 1)
    assert verdict.trace_spans == {spans[0].context.trace_id.to_bytes(16, "big"): 4}
