"""The same store against a ClickHouse server (set LATENCYLENS_TEST_CLICKHOUSE_URL to run)."""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor

from otlp_builders import chat_trace, export_request, recent_base_ns

from latencylens_collector import queries
from latencylens_collector.intake import otlp
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.settings import Settings
from latencylens_collector.storage.store import Store


def test_store_on_a_server(clickhouse_server_url: str) -> None:
    database = f"latencylens_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    store = Store.connect(Settings(clickhouse_dsn=clickhouse_server_url, database=database, environ={}))
    try:
        assert store.migrate()
        assert store.migrate() == []
        root, retrieval, model, tool = chat_trace(recent_base_ns())
        batch = otlp.flatten(export_request([root, retrieval, model]))
        assert Ingestor(store).ingest(batch.spans) == 1
        # A late span: its trace is read back under FINAL near the batch, with the setting this
        # server needs to prune partitions so (26.3 and later) or none (older servers refuse it).
        assert store.near_settings() in ({}, {"defer_partition_pruning_after_final": 0})
        assert Ingestor(store).ingest(otlp.flatten(export_request([tool])).spans) == 1
        trace_id = batch.spans[0].trace_id
        assert len(store.spans_of_traces([trace_id])) == 4
        detail = queries.request_detail(store, "default", trace_id.hex())
        assert detail is not None and detail.span_count == 4
    finally:
        store.command(f"DROP DATABASE IF EXISTS {database}")
        store.close()


def test_statements_from_many_threads_at_once_on_a_server(clickhouse_server_url: str) -> None:
    """The writer, queries and the reconciler share the store's one client from their threads: the
    client must not pin one server session, which takes one statement at a time."""
    store = Store.connect(Settings(clickhouse_dsn=clickhouse_server_url, environ={}))
    statement = "SELECT sleepEachRow(0.2) FROM numbers(2) SETTINGS max_block_size = 1"
    try:
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda _: store.query(statement), range(8)))
        assert len(answers) == 8
    finally:
        store.close()
