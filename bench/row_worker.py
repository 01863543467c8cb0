"""The row-building worker as the collector starts it, against a worker with CPython's default
garbage collection, building the same read-backs in one run.

The engine path's writer hands each batch of more than 1,000 spans to the worker process
(:mod:`~latencylens_collector.pipeline.row_processes`), which parses the read-back, builds the rows
and lays them out as the ``requests`` table (``build_rows_as_table``). The collector's worker starts
through :func:`latencylens_collector.runtime.worker.initialize`: what it builds with is imported and
frozen, and the young-generation threshold raised. The baseline is a worker spawned the same way
without that (only SIGINT ignored, as the worker was started before). The two alternate
:data:`ROUNDS` times; each round builds every page once in each (after one warm-up build), and the
figure is the median over rounds of the CPU per span the builds report (the worker's own).
"""

from __future__ import annotations

import multiprocessing
import signal
import statistics
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Final

from bench import _stored_traces
from latencylens_collector.analysis.costs import configured_prices
from latencylens_collector.analysis.row_work import ReadBack
from latencylens_collector.runtime import worker
from latencylens_collector.storage.arrow_tables import build_rows_as_table

DATABASE: Final = "bench_row_worker"
ROUNDS: Final = 5


def _pool(collectors: bool) -> ProcessPoolExecutor:
    spawn = multiprocessing.get_context("spawn")
    if collectors:
        return ProcessPoolExecutor(
            1, mp_context=spawn, initializer=worker.initialize, initargs=(build_rows_as_table.__module__,)
        )
    return ProcessPoolExecutor(
        1, mp_context=spawn, initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN)
    )


def _cpu_per_span(pool: ProcessPoolExecutor, reads: list[ReadBack], spans: int) -> float:
    prices = configured_prices()
    cpu_s = sum(pool.submit(build_rows_as_table, read, prices).result().cpu_s for read in reads)
    return cpu_s / spans * 1e6


def run(report: Any) -> None:
    store = _stored_traces.fresh_store(DATABASE)
    trace_ids, spans = _stored_traces.load(store)
    reads = _stored_traces.read_back(store, trace_ids)
    _stored_traces.drop(store)
    pools = {collectors: _pool(collectors) for collectors in (False, True)}
    figures: dict[bool, list[float]] = {False: [], True: []}
    try:
        for pool in pools.values():
            pool.submit(build_rows_as_table, reads[0], configured_prices()).result()  # warm up
        for _ in range(ROUNDS):
            for collectors, pool in pools.items():
                figures[collectors].append(_cpu_per_span(pool, reads, spans))
    finally:
        for pool in pools.values():
            pool.shutdown()
    baseline = statistics.median(figures[False])
    report.add(
        "rows built in a worker with CPython's default collection (baseline)",
        baseline,
        "µs CPU per span",
        f"{len(trace_ids):,} traces, {spans:,} spans in {len(reads)} read-backs; median of {ROUNDS} rounds",
    )
    ours = statistics.median(figures[True])
    report.add(
        "rows built in the collector's worker (imports frozen, young threshold raised)",
        ours,
        "µs CPU per span",
        ratio=ours / baseline,
    )
