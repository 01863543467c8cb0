"""The ingest pipeline as one object: receivers submit spans, it answers when they are durable."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final

from latencylens_collector.analysis.records import DEFAULT_PROJECT, SpanRow
from latencylens_collector.pipeline.admission import TraceCap
from latencylens_collector.pipeline.cpu_shares import CpuShares
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.pipeline.queue import (
    BoundedQueue,
    ExportTooLarge,
    Outcome,
    PipelineClosed,
    QueueFull,
    Ticket,
    rows_bytes,
)
from latencylens_collector.pipeline.row_processes import RowProcess
from latencylens_collector.pipeline.spool import Spool, SpoolCounts, SpoolError
from latencylens_collector.pipeline.writer import BODY_BATCH_MIN_BYTES, Writer
from latencylens_collector.settings import Settings
from latencylens_collector.storage.otlp_sql import BodyLimits

_log = logging.getLogger(__name__)

ENGINE_HOLD_S: Final = 1.0
"""With ``ingest_path = auto``, how long exports keep going to the engine after the exports in
flight last filled an INSERT. Under a steady load they fall short of it now and then, senders
being between an answer and their next export (at 8 senders of the benchmark's 310 kB exports,
7 in flight fill one): without the hold, many of them were decoded in Python between INSERTs.
The same rule without it (in a run whose writer also sent batches under 1 MiB back to Python)
served 1.04× the Python path at 8 senders where ``engine`` served 1.50×; with it, 1.40–1.44×
beside ``engine``'s 1.42–1.70× (``bench ingest_engine``, 2026-12-06)."""


@dataclass(frozen=True)
class PipelineStatus:
    """For /readyz: can an accepted batch be made durable now, and where."""

    running: bool
    storage_ok: bool | None
    storage_error: str
    spool: str
    """``writable``, ``disabled`` or, in a few words, why it cannot be used (``full``)."""
    spool_pending_spans: int
    queue_depth: int
    spool_failed_spans: int = 0
    spool_bytes: int = 0
    storage_refusal: str = ""
    """ClickHouse's error name while it turns every write away (see :class:`WriterState`)."""

    @property
    def spool_writable(self) -> bool:
        return self.spool == "writable"


class Pipeline:
    """Bounded queue → single writer → ClickHouse, with the disk spool as fallback."""

    def __init__(
        self, settings: Settings, ingestor: Ingestor, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self._monotonic = monotonic
        self._engine_until = float("-inf")
        """``auto``: until when exports go to the engine whatever is in flight (:data:`ENGINE_HOLD_S`)."""
        self.queue = BoundedQueue(
            settings.max_queue_spans, settings.max_queue_bytes, settings.queue_project_share
        )
        self.trace_cap = TraceCap(settings.max_trace_spans)
        self.cpu = CpuShares(settings.project_cpu_share)
        self.spool = (
            Spool(settings.spool_dir, settings.max_spool_bytes) if settings.spool_dir is not None else None
        )
        self._spool_problem = "disabled" if self.spool is None else "not open"
        self.writer = Writer(
            self.queue,
            ingestor,
            self.spool,
            max_batch_spans=settings.max_batch_spans,
            flush_interval_s=settings.flush_interval_ms / 1000,
            max_batch_bytes=settings.max_batch_bytes,
            cpu=self.cpu,
        )

    @property
    def row_process(self) -> RowProcess:
        """Builds request rows in a worker process (:mod:`.row_processes`), for the reconciler too."""
        return self.writer.row_process

    def start(self) -> None:
        """Open the spool (its batches are replayed by the writer) and start writing."""
        if self.spool is not None:
            try:
                requeued = self.spool.open()
                self._spool_problem = ""
                if requeued:
                    _log.warning("replaying %d spans ClickHouse refused before the restart", requeued)
                if self.spool.pending_spans:
                    _log.info(
                        "replaying %d spooled spans from %s", self.spool.pending_spans, self.spool.directory
                    )
            except SpoolError as exc:
                self._spool_problem = exc.reason
                _log.error("running without a spool: %s", exc)
        self.writer.start()

    def stop(self) -> None:
        """Refuse new exports, write (or spool) everything accepted, release the spool."""
        self.writer.stop()
        if self.spool is not None:
            self.spool.close()

    @contextmanager
    def decoding(self, project: str = DEFAULT_PROJECT) -> Iterator[None]:
        """Wrap a receiver's decode of one export of ``project`` up to its :meth:`submit` (or
        refusal): while one of the project first in turn is open (and no other project's exports
        wait) the writer lingers for their spans, and once none is it flushes at once."""
        with self.queue.decoding(project):
            yield

    def submit(self, spans: list[SpanRow]) -> Future[Outcome]:
        """Queue an export's spans (all of one project); the future resolves once they are stored
        or spooled (or fails with WriteFailed). Spans past their trace's cap are marked
        (:mod:`.admission`). Raises QueueFull, ExportTooLarge or PipelineClosed at once."""
        if not self.writer.running:
            raise PipelineClosed("the collector is not running its writer (starting or stopping)")
        nbytes = rows_bytes(spans)
        if nbytes > self.settings.max_batch_bytes:
            raise ExportTooLarge(
                f"export decodes to {nbytes} bytes, more than max_batch_bytes "
                f"({self.settings.max_batch_bytes} bytes) one insert may hold"
            )
        spans, undo = self.trace_cap.admit(spans)
        try:
            return self.queue.put(spans, nbytes).future
        except (QueueFull, PipelineClosed):
            undo()
            raise

    def engine_takes(self, body_bytes: int, project: str) -> bool:
        """Whether an OTLP/protobuf export of ``body_bytes`` from ``project`` goes to the engine:
        always with ``ingest_path = engine``; with ``auto``, while the exports in flight, counted at
        this one's size, would fill an INSERT (:data:`~.writer.BODY_BATCH_MIN_BYTES`) or did so
        within :data:`ENGINE_HOLD_S`, and no other project sends
        (:meth:`BoundedQueue.others_waiting`). Below that load, the INSERT's price per statement
        (≈ 70 ms before its first span) outweighs what the engine saves, and a lone export is
        answered sooner by the Python path. While another project sends, every batch is one
        project's turn of a quarter of the bounds, so that another project's export waits for at
        most one small insert; an INSERT of bodies cannot be cut so, so the Python path decodes
        them and cuts a large export into turns."""
        path = self.settings.ingest_path
        if path != "auto":
            return path == "engine"
        now = self._monotonic()
        if self.cpu.in_flight * body_bytes >= BODY_BATCH_MIN_BYTES:
            self._engine_until = now + ENGINE_HOLD_S
        elif now >= self._engine_until:
            return False
        return not self.queue.others_waiting(project)

    def submit_body(self, body: bytes, project: str, limits: BodyLimits) -> Ticket:
        """Queue an OTLP/protobuf export body for the engine (when :meth:`engine_takes` it); its
        future resolves STORED, SPOOLED never, or TAKE_PYTHON_PATH: the receiver then decodes the
        body itself and :meth:`submit` s its spans. Raises QueueFull or PipelineClosed at once."""
        if not self.writer.running:
            raise PipelineClosed("the collector is not running its writer (starting or stopping)")
        return self.queue.put([], len(body), project, body=body, limits=limits)

    def check_room(self, project: str) -> None:
        """Raise QueueFull (or PipelineClosed) when no export of ``project`` could be queued now, so
        a receiver can refuse it before reading and decoding its body; else the export is in
        flight until the receiver calls :meth:`done`."""
        if not self.writer.running:
            raise PipelineClosed("the collector is not running its writer (starting or stopping)")
        self.queue.check_room(project)
        self.cpu.admit(project)

    def done(self, project: str) -> None:
        """An export :meth:`check_room` let in was answered, stored or not (:mod:`.cpu_shares`
        counts it in flight until then)."""
        self.cpu.done(project)

    def charge(self, project: str, cpu_s: float) -> None:
        """Count ``cpu_s`` CPU-seconds a receiver spent decoding one of ``project``'s exports
        (:mod:`.cpu_shares`)."""
        self.cpu.charge(project, cpu_s)

    def status(self) -> PipelineStatus:
        state = self.writer.state()
        spool = self._spool_problem or (self.spool.problem() if self.spool else None) or "writable"
        counts = self.spool.counts if self.spool and self.spool.is_open else SpoolCounts()
        return PipelineStatus(
            running=self.writer.running,
            storage_ok=state.storage_ok,
            storage_error=state.storage_error,
            spool=spool,
            spool_pending_spans=counts.pending_spans,
            queue_depth=self.queue.depth,
            spool_failed_spans=counts.failed_spans,
            spool_bytes=counts.bytes,
            storage_refusal=state.refusal,
        )
