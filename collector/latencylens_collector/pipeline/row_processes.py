"""Request rows of large inserts built in a worker process, so their Python does not hold the GIL.

The row builder (:mod:`.row_builder`) already keeps a large build out of the writer's way, but a
thread still shares the process's one GIL: while it built an 8,000-span chain's row (~0.5 s of
Python), a normal export's decode and its own, small, rows took turns with it 1 ms at a time,
and took about twice as long as on an idle collector (the hostile soak's p99). A worker process
runs on the other core: the collector's threads only pickle the spans over (~4 µs a span) and
wait with the GIL released.

The reconciler builds through it too: a pass that rewrites long traces held the GIL for seconds.
So does the engine path's writer, for each batch of more than 1,000 spans
(:meth:`RowProcess.start`): the build runs while the writer inserts the next batch.
Builds from few spans (at most a writer's turn) run in the caller: the trip costs more than it
saves. One worker, spawned at the first large build (a collector that never sees one never
starts it), importing the analysis and pyarrow (:mod:`~latencylens_collector.storage.arrow_tables`:
≈ 60 MiB, 0.3 s; the analysis alone is ≈ 25 MiB) and little else, then freezing them and raising
the young-generation threshold (:mod:`~latencylens_collector.runtime.worker`: builds cost ≈ 15 %
less CPU). It lays the rows out as the ``requests`` table
before handing them back: the collector then loads a few buffers (≈ 0.6 ms for 1,600 rows)
instead of unpickling their dicts and laying them out itself (≈ 22 ms under its GIL).
It is passed the collector's configured prices with each build, so rows are priced as in-process.
If the worker cannot be started or dies, the build runs in the calling thread instead (the
same function), and the next large build tries a new worker. A worker that keeps failing (its
start fails, or something kills it each time) is tried again after a pause that doubles with each
failure in a row, up to :data:`MAX_RESPAWN_PAUSE_S`, so a broken worker costs neither a spawn per
build nor a log line per build; the builds meanwhile run in the caller. On a platform that cannot
run one at all (no working semaphores, as on some serverless runtimes) every build runs in the
caller, said once in the log. A build that fails in the worker raises as it would have here.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Final

from latencylens_collector.analysis.costs import Prices, configured_prices
from latencylens_collector.analysis.row_work import BuiltRows, ReadBack, TraceToBuild, build_rows, span_count
from latencylens_collector.runtime import metrics, worker
from latencylens_collector.storage.arrow_tables import build_rows_as_table

_log = logging.getLogger(__name__)

MAX_RESPAWN_PAUSE_S: Final = 300.0
"""The longest pause before a new worker is tried after failures in a row (the first failure
gets none: a worker killed once is replaced at the next build; then 1 s, 2 s, 4 s, ...)."""


def respawn_pause_s(failures_in_a_row: int) -> float:
    """How long after its latest failure a new worker is tried."""
    if failures_in_a_row <= 1:
        return 0.0
    return min(MAX_RESPAWN_PAUSE_S, 2.0 ** (failures_in_a_row - 2))


class _WorkerPaused(Exception):
    """The worker failed in a row lately: this build runs in the caller until a new one is tried."""


class RowProcess:
    """A :data:`~latencylens_collector.analysis.row_work.RowBuild` that runs in one worker process,
    started on first use. Several threads may build through it (the row builder, the reconciler);
    their builds take turns in the worker."""

    worker_imports: tuple[str, ...] = (build_rows_as_table.__module__,)
    """What the worker imports and freezes at its start (:func:`.worker.initialize`)."""

    def __init__(self, min_spans: int = 0) -> None:
        self.min_spans = min_spans
        """Builds from at most this many spans run in the caller: not worth the trip (nor, for a
        collector that only ever builds those, a worker)."""
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self.fallbacks = 0
        """Builds run in the calling thread because the worker could not run them."""
        self.worker_cpu_s = 0.0
        """CPU time the worker spent building, in all (the calling thread's own is its own)."""
        self._callers = threading.local()
        self._caller_only = False
        """No worker any more: the service stopped, or this platform cannot run one."""
        self.failures_in_a_row = 0
        """Workers that failed since the last build one finished."""
        self._respawn_at = 0.0
        """No new worker before this (``time.monotonic``): see :func:`respawn_pause_s`."""

    def __call__(self, traces: Sequence[TraceToBuild]) -> BuiltRows:
        if span_count(traces) <= self.min_spans:
            return build_rows(traces, configured_prices())  # small: not worth the trip (nor a worker)
        return self.start(traces).result()

    def start(self, traces: Sequence[TraceToBuild] | ReadBack, min_spans: int = 0) -> PendingRows:
        """Start building in the worker, for a caller with other work to do meanwhile (the engine
        path's writer inserts the next batch); the rows come from :meth:`PendingRows.result`,
        which builds them in the caller if the worker cannot, or if they come from at most
        ``min_spans`` spans (then the build waits for :meth:`PendingRows.result`)."""
        prices = configured_prices()
        if self._caller_only or span_count(traces) <= min_spans:
            return PendingRows(self, traces, prices, None)
        if self._pool is None and time.monotonic() < self._respawn_at:
            return PendingRows(self, traces, prices, None, _WorkerPaused())
        try:
            future = self._worker().submit(build_rows_as_table, traces, prices)
            return PendingRows(self, traces, prices, future)
        except (BrokenProcessPool, OSError, NotImplementedError, ImportError, RuntimeError) as exc:
            return PendingRows(self, traces, prices, None, exc)

    def _built_in_worker(self, built: BuiltRows) -> BuiltRows:
        self.failures_in_a_row = 0
        self.worker_cpu_s += built.cpu_s
        self._callers.cpu_s = self.worker_cpu_s_for_this_thread() + built.cpu_s
        metrics.ROW_BUILDS.labels(ran_in="worker").inc()
        metrics.ROW_WORKER_CPU.inc(built.cpu_s)
        return built

    def _built_here(
        self, traces: Sequence[TraceToBuild] | ReadBack, prices: Prices, exc: BaseException
    ) -> BuiltRows:
        """The worker could not build (not the build's fault): build in the caller, and let a
        later large build try a new worker (:func:`respawn_pause_s`), unless this platform cannot
        run one at all."""
        self.fallbacks += 1
        metrics.ROW_BUILDS.labels(ran_in="collector").inc()
        if not isinstance(exc, _WorkerPaused):
            self._discard()
            self.failures_in_a_row += 1
            pause_s = respawn_pause_s(self.failures_in_a_row)
            self._respawn_at = time.monotonic() + pause_s
            for_good = isinstance(exc, (NotImplementedError, ImportError))  # no semaphores here
            self._caller_only = self._caller_only or for_good
            if for_good:
                what = "this platform cannot run the row-building process"
            else:
                what = f"its process failed ({self.failures_in_a_row} in a row; next try in {pause_s:g} s)"
            _log.warning("rows built in the collector: %s (%s)", what, exc)
        return build_rows(traces, prices)

    def worker_cpu_s_for_this_thread(self) -> float:
        """The worker's CPU time spent on this thread's builds, so a caller charges its own builds
        and not another thread's made meanwhile."""
        cpu_s: float = getattr(self._callers, "cpu_s", 0.0)
        return cpu_s

    def stop(self) -> None:
        """End the worker (after the build it is running, if any); later builds run in the caller."""
        with self._lock:
            pool, self._pool, self._caller_only = self._pool, None, True
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    @property
    def started(self) -> bool:
        return self._pool is not None

    def _worker(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                # spawn, not fork: the collector has threads (and chdb's) that a fork would copy
                # mid-flight, and the worker needs none of the collector's state.
                spawn = multiprocessing.get_context("spawn")
                # Quiet on Ctrl-C (the collector stops it), what builds run imported and frozen.
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=spawn,
                    initializer=worker.initialize,
                    initargs=self.worker_imports,
                )
            return self._pool

    def _discard(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


class PendingRows:
    """A build handed to :meth:`RowProcess.start`; :meth:`result` waits for its rows."""

    def __init__(
        self,
        process: RowProcess,
        traces: Sequence[TraceToBuild] | ReadBack,
        prices: Prices,
        future: Future[BuiltRows] | None,
        failed: BaseException | None = None,
    ) -> None:
        self._process, self._traces, self._prices = process, traces, prices
        self._future, self._failed = future, failed

    def done(self) -> bool:
        """Whether :meth:`result` would not wait for the worker (a build in the caller: always)."""
        return self._future is None or self._future.done()

    def result(self) -> BuiltRows:
        """The rows, built by the worker or, if it could not, here. A build that fails in the
        worker raises as it would have here."""
        if self._future is None:
            if self._failed is None:
                return build_rows(self._traces, self._prices)
            return self._process._built_here(self._traces, self._prices, self._failed)
        try:
            built: BuiltRows = self._future.result()
        except (BrokenProcessPool, OSError, NotImplementedError, ImportError) as exc:  # not the build's
            return self._process._built_here(self._traces, self._prices, exc)
        return self._process._built_in_worker(built)
