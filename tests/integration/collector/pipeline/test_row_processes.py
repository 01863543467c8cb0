"""Issue 15: the rows of large inserts are built in a worker process, off the collector's GIL.

A real spawned worker (:mod:`latencylens_collector.pipeline.row_processes`) against the same
function run here: the rows must be identical, priced with the collector's configured prices (the
worker has none of its own), and a worker that dies costs no row. The worker hands its rows back
laid out as the ``requests`` table (:func:`~latencylens_collector.storage.arrow_tables.requests_table`),
so rows are compared as that table, however they were built.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from otlp_builders import chat_trace, export_request
from pipeline_helpers import export, metric, row_spans_by_project

from latencylens import semconv
from latencylens_collector.analysis.costs import use_prices
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.row_work import BuiltRows, TraceToBuild, build_rows
from latencylens_collector.intake import otlp
from latencylens_collector.pipeline import Outcome, Pipeline
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.pipeline.reconciler import Reconciler
from latencylens_collector.pipeline.row_processes import MAX_RESPAWN_PAUSE_S, RowProcess, respawn_pause_s
from latencylens_collector.settings import Settings
from latencylens_collector.storage.arrow_tables import requests_table
from latencylens_collector.storage.store import Store

BASE = 1_700_000_000_000_000_000
LAST_INSERT_US = BASE // 1_000 + 5_000_000


def self_hosted_call() -> list[SpanRow]:
    """chat_trace (500 input tokens of which 100 cached, 101 output) answered by vLLM's my-llama."""
    spans = otlp.flatten(export_request(chat_trace(BASE, model="my-llama"))).spans
    return [
        dataclasses.replace(row, attributes={**row.attributes, semconv.GEN_AI_PROVIDER_NAME: "vllm"})
        if semconv.GEN_AI_REQUEST_MODEL in row.attributes
        else row
        for row in spans
    ]


def server_chain(length: int) -> list[SpanRow]:
    """vLLM server spans, each the parent of the next, each carrying ``gen_ai.latency.e2e``."""
    return [
        SpanRow(
            trace_id=b"\x07" * 16,
            span_id=(level + 1).to_bytes(8, "big"),
            parent_span_id=level.to_bytes(8, "big"),  # the root's: zeros
            service="vllm",
            name="llm_request",
            span_kind="SERVER",
            kind="other",
            start_ns=BASE + level * 1_000,
            duration_ns=10_000_000_000 - level * 2_000,
            attributes={"gen_ai.latency.e2e": "9.5"},
        )
        for level in range(length)
    ]


def table_of(built: BuiltRows) -> pa.Table:
    """A build's rows as the ``requests`` table (a worker's already are)."""
    return built.rows if isinstance(built.rows, pa.Table) else requests_table(built.rows)


def built_here(traces: list[TraceToBuild]) -> pa.Table:
    return table_of(build_rows(traces))


@pytest.fixture
def traces() -> Iterator[list[TraceToBuild]]:
    previous = use_prices({"vllm/my-llama": {"input": 0.5, "cached_input": 0.1, "output": 1.5}})
    yield [
        TraceToBuild(self_hosted_call(), LAST_INSERT_US),
        TraceToBuild(server_chain(300), LAST_INSERT_US, stored_starts=(BASE - 1,)),
    ]
    use_prices(previous)


@pytest.fixture
def process() -> Iterator[RowProcess]:
    process = RowProcess()
    yield process
    process.stop()


def workers() -> list[multiprocessing.Process]:
    return [child for child in multiprocessing.active_children() if child.pid != os.getpid()]


def test_rows_built_in_the_worker_are_the_rows_built_here(
    traces: list[TraceToBuild], process: RowProcess
) -> None:
    assert not process.started  # nothing is spawned before the first build
    here = build_rows(traces)
    there = process(traces)
    assert isinstance(there.rows, pa.Table)  # laid out in the worker, ready to insert
    assert there.rows == requests_table(here.rows) and there.live == here.live == 2
    assert process.started and workers() and process.fallbacks == 0
    assert there.cpu_s > 0 and process.worker_cpu_s == there.cpu_s  # charged to the projects
    # Priced at the collector's configured prices, passed to the worker (which has none of its
    # own; its rows equal these): 400 × 0.5 + 100 × 0.1 + 101 × 1.5 = 361.5 µ$ = 361,500 nano-dollars.
    assert isinstance(here.rows, list)
    call = next(row for row in here.rows if not row["is_deleted"] and row["trace_id"] != b"\x07" * 16)
    assert call["cost_nano_usd"] == 361_500
    # The chain's row, and a tombstone where a row of it was stored before.
    chain = [row for row in here.rows if row["trace_id"] == b"\x07" * 16]
    assert sorted(row["is_deleted"] for row in chain) == [0, 1]
    assert next(row for row in chain if row["is_deleted"])["start_time"] == BASE - 1


def signalled_worker(
    traces: list[TraceToBuild], process: RowProcess, signum: int, wait_s: float
) -> tuple[pa.Table, multiprocessing.Process]:
    """The rows built here, and the worker a first build started, sent ``signum`` (waited for up
    to ``wait_s``)."""
    here = built_here(traces)
    assert table_of(process(traces)) == here
    (worker,) = workers()
    assert worker.pid is not None
    os.kill(worker.pid, signum)
    worker.join(wait_s)
    return here, worker


def test_a_worker_that_dies_costs_no_rows(traces: list[TraceToBuild], process: RowProcess) -> None:
    here, _ = signalled_worker(traces, process, signal.SIGKILL, 30.0)
    in_collector = metric("latencylens_row_builds_total", ran_in="collector")
    assert table_of(process(traces)) == here  # built in this thread instead
    assert process.fallbacks == 1
    assert metric("latencylens_row_builds_total", ran_in="collector") == in_collector + 1  # shown
    assert table_of(process(traces)) == here  # and the next build has a new worker
    assert process.fallbacks == 1 and process.started


def test_a_large_exports_rows_are_built_in_the_worker(make_settings: Callable[..., Settings]) -> None:
    """3,000 spans in one trace: more than a quarter of a batch (2,500 by default), so its rows
    are built beside the writer, in the worker; the row counts every span."""
    settings = make_settings(flush_interval_ms=20)
    store = Store(settings)
    store.migrate()
    pipeline = Pipeline(settings, Ingestor(store))
    pipeline.start()
    try:
        assert pipeline.submit(export("big", 0, 3_000)).result(timeout=60) is Outcome.STORED
        assert workers()
    finally:
        pipeline.stop()
    assert row_spans_by_project(store) == {"big": 3_000}
    assert not workers()  # stopping the pipeline ends the worker
    store.close()


def test_the_reconciler_rewrites_settled_traces_through_the_worker(
    make_settings: Callable[..., Settings], process: RowProcess
) -> None:
    """Spans stored with no row (a collector stopped between the writes): the reconciler's pass
    builds the settled rows in the worker, rooted and counted as in-thread."""
    store = Store(make_settings())
    store.migrate()
    try:
        shift = time.time_ns() - 60 * 1_000_000_000 - BASE  # a minute ago: in the look-back
        spans = [dataclasses.replace(span, start_ns=span.start_ns + shift) for span in self_hosted_call()]
        Ingestor(store).insert(spans + server_chain_now(300))  # the spans only, no row
        assert row_spans_by_project(store) == {}
        done = Reconciler(store, settle_s=0, lookback_s=3600, build=process).run_once()
        assert done.rewritten == 2
        assert process.started and process.worker_cpu_s > 0 and process.fallbacks == 0
        assert row_spans_by_project(store) == {"default": len(spans) + 300}
    finally:
        store.close()


def test_a_stopped_process_builds_in_the_caller_and_spawns_nothing(
    traces: list[TraceToBuild], process: RowProcess
) -> None:
    """The reconciler may run its last pass after the pipeline stopped: no worker outlives it."""
    process.stop()
    assert table_of(process(traces)) == built_here(traces)
    assert not process.started and not workers() and process.worker_cpu_s == 0


def server_chain_now(length: int) -> list[SpanRow]:
    """:func:`server_chain`, a minute ago (inside the reconciler's look-back)."""
    shift = time.time_ns() - 60 * 1_000_000_000 - BASE
    return [dataclasses.replace(span, start_ns=span.start_ns + shift) for span in server_chain(length)]


def test_small_builds_run_in_the_caller_and_spawn_nothing(traces: list[TraceToBuild]) -> None:
    """At most ``min_spans`` spans (a writer's turn): not worth a trip to the worker, nor a worker."""
    spans = sum(len(trace.spans) for trace in traces)
    small = RowProcess(min_spans=spans)
    try:
        assert table_of(small(traces)) == built_here(traces)
        assert not small.started and not workers() and small.worker_cpu_s == 0
        assert table_of(small(traces + traces[:1])) == built_here(traces + traces[:1])  # more than min_spans
        assert small.started and small.worker_cpu_s > 0
    finally:
        small.stop()


def test_ctrl_c_in_a_terminal_does_not_kill_the_worker(
    traces: list[TraceToBuild], process: RowProcess
) -> None:
    """Ctrl-C reaches the whole process group; the collector stops itself, and the worker with it."""
    here, worker = signalled_worker(traces, process, signal.SIGINT, 1.0)
    assert worker.is_alive()
    assert table_of(process(traces)) == here and process.fallbacks == 0


def worker_heap() -> tuple[tuple[int, ...], int, bool]:
    """Run in the worker: its collection thresholds, how many objects are frozen, and whether the
    function its builds run is among them (frozen objects are in no generation)."""
    import gc

    from latencylens_collector.storage.arrow_tables import build_rows_as_table

    collected = any(each is build_rows_as_table for each in gc.get_objects())
    return gc.get_threshold(), gc.get_freeze_count(), not collected


def test_the_worker_builds_with_its_imports_frozen_and_few_young_collections(
    traces: list[TraceToBuild], process: RowProcess
) -> None:
    """A build allocates a few dicts and objects per span: with CPython's default threshold (700)
    the worker collected every few dozen spans, scanning its imports too (≈ 15 % of a build)."""
    assert table_of(process(traces)) == built_here(traces)
    thresholds, frozen, build_frozen = process._worker().submit(worker_heap).result()
    assert thresholds[0] >= 50_000
    assert frozen > 10_000 and build_frozen  # pyarrow and the analysis: imported, then frozen


class NoSemaphores(RowProcess):
    """A platform whose multiprocessing has no working ``sem_open`` (some serverless runtimes):
    creating the pool raises as ``concurrent.futures`` does there."""

    def _worker(self) -> Any:
        raise NotImplementedError("This Platform lacks a functioning sem_open implementation")


def test_a_platform_without_worker_processes_builds_every_row_in_the_collector(
    traces: list[TraceToBuild], caplog: pytest.LogCaptureFixture
) -> None:
    process = NoSemaphores()
    here = built_here(traces)
    assert table_of(process(traces)) == here and table_of(process(traces)) == here
    assert process.fallbacks == 1  # tried once, then never again
    assert sum("cannot run the row-building process" in r.getMessage() for r in caplog.records) == 1


def test_each_thread_is_charged_the_worker_time_of_its_own_builds(
    traces: list[TraceToBuild], process: RowProcess
) -> None:
    """The row builder and the reconciler build through one worker: each charges only its own."""
    spent: dict[int, tuple[float, float]] = {}

    def build(count: int) -> None:
        own = sum(process(traces).cpu_s for _ in range(count))
        spent[count] = (own, process.worker_cpu_s_for_this_thread())

    threads = [threading.Thread(target=build, args=(count,)) for count in (1, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(spent) == [1, 3]
    for own, charged in spent.values():
        assert charged == pytest.approx(own) and own > 0
    assert process.worker_cpu_s == pytest.approx(sum(own for own, _ in spent.values()))
    assert process.worker_cpu_s_for_this_thread() == 0  # this thread built nothing


def test_a_started_build_runs_in_the_worker_while_the_caller_goes_on(
    traces: list[TraceToBuild], process: RowProcess
) -> None:
    """The engine path's writer starts a batch's build, inserts the next batch, then takes the rows."""
    pending = process.start(traces)
    assert process.started  # handed over at once, whatever the size
    assert table_of(pending.result()) == built_here(traces)
    assert process.worker_cpu_s > 0 and process.fallbacks == 0


def test_a_started_build_of_few_spans_runs_in_the_caller_when_its_rows_are_asked_for(
    traces: list[TraceToBuild], process: RowProcess
) -> None:
    spans = sum(len(trace.spans) for trace in traces)
    pending = process.start(traces, min_spans=spans)
    assert not process.started and not workers()
    assert table_of(pending.result()) == built_here(traces)
    assert process.worker_cpu_s == 0


def test_a_started_build_whose_worker_dies_is_built_in_the_caller(
    traces: list[TraceToBuild], process: RowProcess
) -> None:
    here, _ = signalled_worker(traces, process, signal.SIGKILL, 30.0)
    assert table_of(process.start(traces).result()) == here
    assert process.fallbacks == 1
    assert table_of(process.start(traces).result()) == here and process.fallbacks == 1  # a new worker


class BrokenStart(RowProcess):
    """A worker whose start fails every time (here: its initializer cannot import what builds run,
    as when the worker's environment differs from the collector's), started by the real pool."""

    worker_imports = ("latencylens_collector.no_such_module",)


def test_a_worker_that_keeps_failing_is_tried_again_after_pauses_that_grow(
    traces: list[TraceToBuild], caplog: pytest.LogCaptureFixture
) -> None:
    process = BrokenStart()
    here = built_here(traces)
    try:
        # The first failure is replaced at once; the second starts a pause of 1 s.
        assert table_of(process(traces)) == here and table_of(process(traces)) == here
        assert process.fallbacks == 2 and process.failures_in_a_row == 2
        # During the pause, builds run here without trying a worker (a try would fail and count:
        # the failed workers may still be exiting, so the process list cannot tell), and without
        # a log line each.
        assert table_of(process(traces)) == here
        assert process.fallbacks == 3 and process.failures_in_a_row == 2 and not process.started
        failed = [r.getMessage() for r in caplog.records if "its process failed" in r.getMessage()]
        assert len(failed) == 2 and "2 in a row; next try in 1 s" in failed[1]
        time.sleep(respawn_pause_s(2) + 0.2)
        assert table_of(process(traces)) == here  # a new worker was tried, and failed too
        assert process.failures_in_a_row == 3
    finally:
        process.stop()


def test_the_pause_doubles_from_the_second_failure_in_a_row_up_to_five_minutes() -> None:
    assert [respawn_pause_s(n) for n in range(1, 6)] == [0.0, 1.0, 2.0, 4.0, 8.0]
    assert respawn_pause_s(40) == MAX_RESPAWN_PAUSE_S == 300.0
