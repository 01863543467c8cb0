"""What keeps the collector's write path cheap: one writer flush is one Arrow insert of spans, one
count of stored rows per trace (key columns only), and one insert of request rows — however many
exports the flush gathers; only traces with spans stored before the batch are read back, in one
query of only the columns request rows need. Checked against the real embedded ClickHouse through
a client that counts the calls it passes on."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, cast

from clickhouse_connect.driver.client import Client

from latencylens import semconv
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.pipeline.queue import BoundedQueue
from latencylens_collector.pipeline.writer import Writer
from latencylens_collector.settings import Settings
from latencylens_collector.storage.store import Store

MS = 1_000_000


class CountingClient:
    """The real clickhouse-connect client, with a log of the statements that reach it."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[tuple[str, str]] = []

    def insert(self, table: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("insert", table))
        return self._client.insert(table, *args, **kwargs)

    def insert_arrow(self, table: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("insert_arrow", table))
        return self._client.insert_arrow(table, *args, **kwargs)

    def query(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("query", sql))
        return self._client.query(sql, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def trace_rows(number: int, base_ns: int) -> list[SpanRow]:
    """A 1 s request whose middle 600 ms are one model call with reported queue time."""
    trace_id = number.to_bytes(16, "big")
    root, call = (number * 2).to_bytes(8, "big"), (number * 2 + 1).to_bytes(8, "big")
    return [
        SpanRow(trace_id, root, bytes(8), "api", "POST /chat", "server", "request", base_ns, 1000 * MS),
        SpanRow(
            trace_id,
            call,
            root,
            "api",
            "chat m",
            "client",
            "model",
            base_ns + 200 * MS,
            600 * MS,
            attributes={semconv.GEN_AI_REQUEST_MODEL: "m", semconv.PROVIDER_QUEUE_NS: str(50 * MS)},
            resource_attributes={"service.name": "api", "host.name": "h1"},
        ),
    ]


def counting_store(make_settings: Callable[..., Settings]) -> tuple[Store, CountingClient]:
    plain = Store(make_settings())
    plain.migrate()
    counting = CountingClient(plain.client)
    return Store(plain.settings, client=cast(Client, counting)), counting


def test_perf_one_flush_is_one_arrow_insert_one_count_one_request_insert(
    make_settings: Callable[..., Settings],
) -> None:
    store, client = counting_store(make_settings)
    store.ensure_ready()
    client.calls.clear()
    base = time.time_ns() - 3600 * 1000 * MS
    queue = BoundedQueue(10_000)
    for number in range(1, 4):  # three exports of one trace each: one flush
        queue.put(trace_rows(number, base))
    writer = Writer(queue, Ingestor(store), None, max_batch_spans=10_000, flush_interval_s=0.0)
    writer.start()
    writer.stop()  # closing flushes what is queued, at once

    kinds = [(kind, target if kind != "query" else "query") for kind, target in client.calls]
    db = store.database
    assert kinds == [("insert_arrow", f"{db}.spans"), ("query", "query"), ("insert_arrow", f"{db}.requests")]
    count = client.calls[1][1]
    assert "count()" in count and "attributes" not in count and "FINAL" not in count
    rows = store.query(f"SELECT count() AS n, sum(queue_ns) AS queue FROM {db}.requests FINAL")
    assert rows == [{"n": 3, "queue": 3 * 50 * MS}]  # each request: 50 ms reported queue


def test_perf_only_traces_with_earlier_spans_are_read_back(make_settings: Callable[..., Settings]) -> None:
    """A late span of trace 1 next to the whole new trace 2: the read-back asks for trace 1 only,
    and lean (no resource attributes, no status message)."""
    store, client = counting_store(make_settings)
    base = time.time_ns() - 3600 * 1000 * MS
    first, late_call = trace_rows(1, base)
    ingestor = Ingestor(store)
    ingestor.ingest([first])
    client.calls.clear()

    assert ingestor.ingest([late_call, *trace_rows(2, base)]) == 2
    queries = [target for kind, target in client.calls if kind == "query"]
    # The count, the server's settings for a read near the batch under FINAL (asked once per
    # store: Store.near_settings), then the read-back of trace 1.
    assert len(queries) == 3 and "system.settings" in queries[1]
    read_back = queries[2]
    assert "resource_attributes" not in read_back and "status_message" not in read_back
    db = store.database
    rows = store.query(f"SELECT hex(trace_id) AS t, span_count FROM {db}.requests FINAL ORDER BY t")
    assert rows == [{"t": f"{1:032X}", "span_count": 2}, {"t": f"{2:032X}", "span_count": 2}]

    client.calls.clear()  # another late span of trace 1: the settings are not asked again
    third = dataclasses.replace(trace_rows(1, base)[1], span_id=(99).to_bytes(8, "big"))
    assert ingestor.ingest([third]) == 1
    assert len([target for kind, target in client.calls if kind == "query"]) == 2


def test_perf_arrow_insert_keeps_every_column(make_settings: Callable[..., Settings]) -> None:
    """The Arrow route stores the same values the row route did: ids, ns times, both maps."""
    store, _ = counting_store(make_settings)
    base = time.time_ns() - 3600 * 1000 * MS
    rows = trace_rows(7, base)
    store.insert_spans(rows, dedup_token="t7")
    [stored_root, stored_call] = store.spans_of_traces([rows[0].trace_id])
    assert stored_root == rows[0]
    assert stored_call == rows[1]
    lean = store.spans_of_traces([rows[0].trace_id], for_requests=True)
    assert lean[1].resource_attributes == {} and lean[1].attributes == rows[1].attributes
