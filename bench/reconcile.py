"""What the reconciler costs: traces it looks at per second, and its CPU next to ingesting them.

The ingest benchmark's bodies (100 RAG traces of 5 spans each, decoded by the collector's own OTLP
decoder) are written through the collector's :class:`Ingestor`, 20 bodies per flush as the
service's writer does under load, into the embedded ClickHouse, in a
database of their own beside the query benchmark's (``.latencylens/bench``: chdb takes one
directory per process). Then the :class:`Reconciler` looks at every one of those traces, as the
service does after the settle delay:

* **rows already right** (the common case: each trace reached one collector in one batch): one
  narrow query per minute of inserts compares the stored spans with the rows, no span read. Each
  trace is looked at twice in production (once settled, once a settle delay later), so the pass
  runs twice and both count;
* **rows missing** (spans stored by a collector that died before writing rows): every trace is
  read whole and its row written.

CPU is the process's (``time.process_time``: Python and chdb's threads together), so the share of
ingest CPU does not depend on what else the machine runs. Each collector runs its own reconciler
over every trace, so with k collectors each pays k times the share of its own ingest.

Set ``LATENCYLENS_BENCH_RECONCILE_BODIES`` for a quicker run (default 200 bodies: 20,000 traces).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from bench import _payloads
from bench._stored_traces import fresh_store
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.intake import otlp
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.pipeline.reconciler import Pass, Reconciler
from latencylens_collector.storage.store import Store

BODIES = int(os.environ.get("LATENCYLENS_BENCH_RECONCILE_BODIES", "200"))
DATABASES = ("bench_reconcile", "bench_reconcile_missing")
BODIES_PER_FLUSH = 20
LOOKBACK_S = 300
"""Covers the run's inserts; in the service a pass covers the interval plus the settle delay."""


def _batches(count: int) -> list[list[SpanRow]]:
    """``count`` bodies decoded, in writer flushes of :data:`BODIES_PER_FLUSH` (10,000 spans, the
    service's ``max_batch_spans``: under load its writer flushes that much at once)."""
    templates = _payloads.templates(8)
    bodies = [
        otlp.decode(_payloads.stamp(templates[index % len(templates)]), as_json=False).spans
        for index in range(count)
    ]
    return [
        [span for body in bodies[start : start + BODIES_PER_FLUSH] for span in body]
        for start in range(0, len(bodies), BODIES_PER_FLUSH)
    ]


def _timed(work: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall s, process CPU s, result) of ``work``."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def _pass(store: Store) -> Pass:
    """One look at every trace inserted in the last :data:`LOOKBACK_S` (the run's inserts)."""
    return Reconciler(store, settle_s=0, lookback_s=LOOKBACK_S).run_once()


def run(report: Any) -> None:
    store, other = (fresh_store(database) for database in DATABASES)
    right = _batches(BODIES)
    traces = len({span.trace_id for batch in right for span in batch})
    spans = sum(len(batch) for batch in right)
    ingestor = Ingestor(store)
    wall, ingest_cpu, _ = _timed(lambda: [ingestor.ingest(batch) for batch in right])
    report.add(
        "ingest through the Ingestor (baseline)",
        spans / ingest_cpu,
        "spans/CPU-s",
        f"{traces:,} traces, {spans:,} spans in {wall:.1f} s wall, {ingest_cpu:.1f} CPU-s",
    )

    wall, cpu, passes = _timed(lambda: [_pass(store), _pass(store)])
    checked = sum(p.checked for p in passes)
    assert sum(p.rewritten for p in passes) == 0, "rows written by the Ingestor were not right"
    report.add(
        "reconciler, rows already right",
        checked / cpu,
        "traces/CPU-s",
        f"each trace looked at twice, as in the service; {checked / wall:,.0f} traces/s wall; "
        f"{100 * cpu / ingest_cpu:.1f} % of the ingest CPU of the same traces",
        ratio=cpu / ingest_cpu,
    )

    missing = _batches(BODIES // 4)
    lost = len({span.trace_id for batch in missing for span in batch})
    for batch in missing:
        other.insert_spans(batch)  # stored, and the collector stopped before writing rows
    wall, cpu, done = _timed(lambda: _pass(other))
    assert done.rewritten == done.checked == lost, (done, lost)
    ingest_of_lost = ingest_cpu / traces * lost
    report.add(
        "reconciler, rows missing (written from the spans)",
        lost / cpu,
        "traces/CPU-s",
        f"{lost:,} traces; {lost / wall:,.0f} traces/s wall; "
        f"{100 * cpu / ingest_of_lost:.0f} % of the ingest CPU of as many traces",
        ratio=cpu / ingest_of_lost,
    )
    for each in (store, other):
        each.command(f"DROP DATABASE IF EXISTS {each.database}")
        each.close()
