"""The ingest benchmark's traces stored by the collector, and read back as its engine path reads
them: what the row benchmarks (``rows_sql``, ``row_worker``) build from.

The ingest benchmark's bodies (100 RAG traces of 5 spans each, stamped with fresh ids) are written
through the collector's :class:`Ingestor`, :data:`BODIES_PER_FLUSH` per flush as the service's
writer writes them under load, into the embedded ClickHouse (``.latencylens/bench``, a database of
the caller's).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final, NamedTuple

from bench import _payloads
from latencylens_collector.analysis.row_work import ReadBack, ReadPart
from latencylens_collector.intake import otlp
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.settings import Settings, chdb_dsn
from latencylens_collector.storage import trace_state
from latencylens_collector.storage.store import Store

BENCH_DIR: Final = Path(__file__).resolve().parents[1] / ".latencylens" / "bench"
BODIES = int(os.environ.get("LATENCYLENS_BENCH_ROWS_BODIES", "200"))
"""200 bodies: 20,000 traces, 100,000 spans."""
BODIES_PER_FLUSH: Final = 20
PAGE: Final = 1600
"""Traces read back at once: the traces of 16 bodies, the engine path's INSERT under load."""


def fresh_store(database: str, index_cache_bytes: int | None = None) -> Store:
    """An empty, migrated database of the embedded ClickHouse in ``BENCH_DIR/data``; the engine's
    index block cache as the collector sets it unless ``index_cache_bytes`` is given (it takes
    effect only if this store starts the process's engine)."""
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    settings = Settings(
        clickhouse_dsn=chdb_dsn(BENCH_DIR / "data"),
        database=database,
        metadata_url=f"sqlite:///{BENCH_DIR / f'{database}-metadata.db'}",
        index_cache_bytes=index_cache_bytes,
        environ={},
    )
    store = Store(settings)
    store.command(f"DROP DATABASE IF EXISTS {database}")
    store.migrate()
    return store


class Stored(NamedTuple):
    trace_ids: list[bytes]
    """In id order."""
    spans: int


def load(store: Store) -> Stored:
    """The bodies written as the service's writer writes them."""
    templates = _payloads.templates(8)
    spans = [
        otlp.decode(_payloads.stamp(templates[index % len(templates)]), as_json=False).spans
        for index in range(BODIES)
    ]
    ingestor = Ingestor(store)
    for start in range(0, len(spans), BODIES_PER_FLUSH):
        ingestor.ingest([span for body in spans[start : start + BODIES_PER_FLUSH] for span in body])
    trace_ids = sorted({span.trace_id for body in spans for span in body})
    return Stored(trace_ids, sum(map(len, spans)))


def pages(trace_ids: Sequence[bytes]) -> list[Sequence[bytes]]:
    """The trace ids in pages of :data:`PAGE`."""
    return [trace_ids[start : start + PAGE] for start in range(0, len(trace_ids), PAGE)]


def read_back(store: Store, trace_ids: Sequence[bytes]) -> list[ReadBack]:
    """The traces read back a page at a time, as the engine path's writer reads them."""
    return [
        ReadBack((ReadPart("default", trace_state.stored_traces_unparsed(store, page, "default")),), 0)
        for page in pages(trace_ids)
    ]


def drop(store: Store) -> None:
    store.command(f"DROP DATABASE IF EXISTS {store.database}")
    store.close()
