"""Request rows of a large insert, built beside the writer rather than in it.

After each insert the writer builds the request rows of the traces it touched. For most batches
that takes milliseconds; for one trace of thousands of spans (an agent's long run, or a hostile
8,000-span chain in which every span is a model call) it is close to a second of Python, and
every other project's export arriving meanwhile waited for it behind the single writer: on a
2-core machine that was the tail of normal traffic's export latency beside such senders.

So rows built from more spans than one turn may write while other projects send (a quarter of a
batch, :data:`~.queue.TURN_SHARE`) are handed to this one thread: the rows of a large trace's last
piece, joined with its earlier pieces, or a project's whole batch while it sends alone; a turn's
own rows stay with the writer, so another project's rows never queue behind them here. The writer
goes on with the next project's turn (it shares the GIL with this thread instead of waiting for
it). Only the projects whose rows are that large wait for this thread: their exports are answered
once their rows are written; another project's export that rode in the same insert has its rows
written by the writer and is answered at once (the soak's tail was a normal export riding with
a chain's last piece and waiting ~2 s for the chain's row).
The build itself runs in a worker process (:mod:`.row_processes`), so it does not share the
GIL with the writer and the receivers either; this thread waits for it with the GIL released.
The engine path hands over the same way a project's rows after an INSERT of bodies, read back
here too (:meth:`RowBuilder.submit_stored`), when they are that large while another project sends,
and has the rows it built beside its next INSERT written here (:meth:`RowBuilder.submit_built`).
At most one build runs and one waits: a writer with a third to hand waits, so the rows never
fall far behind the spans. A build that fails loses no span (they are stored): it is logged,
the exports are answered as stored, and the reconciler rebuilds the rows once the traces settle.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import NamedTuple

from opentelemetry import context as otel_context

from latencylens_collector.analysis.row_work import BuiltRows, ReadBack
from latencylens_collector.pipeline.ingest import Ingestor, RowsToWrite
from latencylens_collector.pipeline.row_processes import RowProcess

_log = logging.getLogger(__name__)


class _Job(NamedTuple):
    write: Callable[[], int]
    """Builds the rows (in the worker) and writes them; returns how many were written."""
    spans: int
    charge: Callable[[float], None]
    """Called with the job's CPU time (this thread's and the worker's)."""


class RowBuilder:
    """One thread writing the rows of large inserts, in the order they were handed over."""

    def __init__(
        self, ingestor: Ingestor, charge: Callable[[RowsToWrite, float], None], large_rows: int = 0
    ) -> None:
        self.ingestor = ingestor
        self._charge = charge
        """Called with each build's CPU time (this thread's and the worker's), for the projects'
        CPU shares."""
        self.process = RowProcess(min_spans=large_rows)
        """Where builds from more than ``large_rows`` spans run (the reconciler's too)."""
        self._jobs: queue.Queue[tuple[_Job, Future[int]] | None] = queue.Queue(maxsize=1)
        """Builds handed over; None ends the thread."""
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="latencylens-rows", daemon=True)
        self._thread.start()

    def submit(self, todo: RowsToWrite) -> Future[int]:
        """The rows' future (how many were written); waits while a build runs and another waits."""
        write = partial(self.ingestor.write_rows, todo, self.process)
        return self._submit(_Job(write, todo.spans, partial(self._charge, todo)))

    def submit_stored(
        self, read_back: Callable[[], ReadBack], spans: int, charge: Callable[[float], None]
    ) -> Future[int]:
        """The same for rows of traces the engine path stored (at least ``spans`` spans), read back
        here with ``read_back``; ``charge`` is called with the CPU time spent on them."""
        return self._submit(_Job(partial(self._write_stored, read_back), spans, charge))

    def submit_built(self, built: BuiltRows, charge: Callable[[float], None]) -> Future[int] | None:
        """Write rows built elsewhere: the engine path's, built in the worker beside the writer's
        next INSERT, are written here while the writer goes on to the batch after; ``charge`` is
        called with the CPU time of the write. None, and nothing handed over, when work waits
        here already: the caller writes them itself rather than wait."""
        try:
            return self._submit(_Job(partial(self._write_built, built), built.spans, charge), block=False)
        except queue.Full:
            return None

    def _submit(self, job: _Job, block: bool = True) -> Future[int]:
        """Hand ``job`` to the thread; without ``block``, raise ``queue.Full`` rather than wait."""
        future: Future[int] = Future()
        self._jobs.put((job, future), block=block)
        return future

    def _write_stored(self, read_back: Callable[[], ReadBack]) -> int:
        return self._write_built(self.process.start(read_back()).result())

    def _write_built(self, built: BuiltRows) -> int:
        self.ingestor.write_built(built)
        return built.live

    def stop(self, timeout_s: float = 60.0) -> None:
        """Build what was handed over, then end the thread."""
        if self._thread is None:
            return
        self._jobs.put(None)
        self._thread.join(timeout_s)
        self._thread = None
        self.process.stop()

    def _run(self) -> None:
        # The collector's own ClickHouse calls must never be traced (and exported back to itself).
        otel_context.attach(otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True))
        while (job := self._jobs.get()) is not None:
            todo, future = job
            started, elsewhere = time.thread_time(), self.process.worker_cpu_s_for_this_thread()
            try:
                future.set_result(todo.write())
            except Exception as exc:  # the spans are stored: the reconciler rebuilds these rows
                _log.error("writing the request rows of %d spans failed: %s", todo.spans, exc, exc_info=exc)
                future.set_exception(exc)
            finally:
                spent = time.thread_time() - started + self.process.worker_cpu_s_for_this_thread() - elsewhere
                todo.charge(spent)
