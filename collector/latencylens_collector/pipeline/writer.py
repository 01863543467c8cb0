"""The single writer thread: batches from the queue into ClickHouse, or into the spool.

One thread does every insert (one at a time keeps batches large; queries and the reconciler run
beside it, each statement on an engine handle of its own:
:data:`~latencylens_collector.storage.store.ENGINE_HANDLES`). Each flush is one spans insert plus
one read-back and one requests insert (:meth:`Ingestor.ingest`); the rows of a large insert are
built by :mod:`~latencylens_collector.pipeline.row_builder` while the writer goes on (rows of one
trace written in any order keep the most complete, by their versions). On the engine path a
batch's rows are built in the worker process while the writer inserts the next batch, and written
by the row builder's thread after that INSERT (:meth:`Writer._finish_body_rows`), except, while
another project sends, a project's large rows: the row builder's, as on the Python path
(:meth:`Writer._start_body_rows`).
Receivers are answered only after the batch is stored or fsync'ed in the spool: on the Python
path once its rows are written too; on the engine path, a batch of more than
:data:`BODY_ROWS_HERE` spans from a project sending alone, once its spans are (its rows follow
after the next INSERT). Each batch is one project's turn
(:meth:`BoundedQueue.take`), so another project's export never waits inside a large batch, only
for the one insert being written. While ClickHouse is unreachable, flushes go straight to the
spool and the oldest spooled batch is retried with exponential back-off; a batch is replayed one
file per loop, so new exports keep flowing while a large spool drains.

A spooled batch ClickHouse refuses is triaged (:mod:`~latencylens_collector.pipeline.refusals`):
refusals that say "not now" (read-only, too many parts, unreachable) pause writes with the same
back-off; any other refusal splits the batch, a few pieces per loop, until the spans ClickHouse
will not take are found; they are kept in the spool's ``failed/`` with their reasons and the rest
is stored. Nothing acknowledged is dropped.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final

from opentelemetry import context as otel_context

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.row_work import BuiltRows, ReadBack
from latencylens_collector.pipeline.cpu_shares import CpuShares
from latencylens_collector.pipeline.ingest import BodiesStored, Ingestor, RowsToWrite
from latencylens_collector.pipeline.queue import TURN_SHARE, BoundedQueue, Outcome, Ticket, WriteFailed
from latencylens_collector.pipeline.refusals import UNREACHABLE, Refusal, Triage, classify
from latencylens_collector.pipeline.replay import settle
from latencylens_collector.pipeline.row_builder import RowBuilder
from latencylens_collector.pipeline.row_processes import PendingRows, RowProcess
from latencylens_collector.pipeline.spool import FAILED_DIR, Spool, SpooledBatch, SpoolFull
from latencylens_collector.runtime import metrics
from latencylens_collector.storage.store import StorageUnavailable

_log = logging.getLogger(__name__)

RETRY_INITIAL_S: Final = 0.5
RETRY_MAX_S: Final = 30.0
MAX_WRITES_PER_STEP: Final = 16
"""Pieces of a spooled batch being split written per loop, so live exports flow between steps."""
SPOOL_REFRESH_S: Final = 2.0
"""How often the spool is recounted from its directory (``latencylens spool replay`` moves files)."""
_IDLE_WAKE_S: Final = 1.0
_BODY_ROWS_POLL_S: Final = 0.01
"""While the engine path's last batch has its rows built, how often the writer looks up from the
queue to see whether they are done (it inserts the next batch as soon as one comes)."""
BODY_BATCH_MIN_BYTES: Final = 2 * 1024 * 1024
"""The engine path's batches are not cut below this (≈ 3,400 spans of the benchmark's exports, ≈ 620
bytes a span): an INSERT costs ≈ 50 ms of planning before its first span, then ≈ 8 µs a span."""
BODY_FILL_S: Final = 0.025
"""How long the oldest queued export waits for others while export bodies are queued, but fewer
than :data:`BODY_BATCH_MIN_BYTES` of them: answered senders send again within milliseconds, and
an INSERT of twice the bodies costs little more (8 senders, 2026-12-02: 8,000 spans/s without
the wait, 8,790 with 10 ms, 9,330 with 25 ms, 8,290 with 50 ms and 7,330 with 100 ms). The
wait holds whatever batch comes next, decoded spans too (``ingest_path = auto`` queues both):
else a batch of spans taken first leaves the bodies behind it too few for an INSERT."""
_BODY_FILL: Final = (BODY_BATCH_MIN_BYTES, BODY_FILL_S)
BODY_ROWS_HERE: Final = 1_000
"""On the engine path, rows built from at most this many spans are built in the writer: the
worker's trip (pickling ≈ 4 µs a span, a few ms a call) pays when the build (≈ 28 µs a span)
runs beside an INSERT (≥ 50 ms), not for a few spans (nor, for a collector that only sees those,
a worker process)."""


@dataclass(frozen=True)
class WriterState:
    """What the writer last saw of ClickHouse, for /readyz."""

    storage_ok: bool | None
    """None until the first write."""
    storage_error: str
    """The last failure's full text: for the log, never for an HTTP answer."""
    retry_in_s: float
    refusal: str = ""
    """ClickHouse's error name while it turns every write away (``TOO_MANY_PARTS``, ``READONLY``,
    ``UNREACHABLE``), else empty."""


class Writer:
    """Drains a :class:`BoundedQueue` in one thread until the queue is closed and empty."""

    def __init__(
        self,
        queue: BoundedQueue,
        ingestor: Ingestor,
        spool: Spool | None,
        max_batch_spans: int,
        flush_interval_s: float,
        monotonic: Callable[[], float] = time.monotonic,
        max_batch_bytes: int | None = None,
        cpu: CpuShares | None = None,
    ) -> None:
        self.queue = queue
        self.ingestor = ingestor
        self.spool = spool
        self.max_batch_spans = max(1, max_batch_spans)
        self.max_batch_bytes = max(1, max_batch_bytes) if max_batch_bytes is not None else None
        """Most bytes of decoded spans per insert (:func:`~.queue.rows_bytes`); None: the queue's."""
        self.flush_interval_s = flush_interval_s
        self.cpu = cpu
        """Where each batch's CPU time is charged, to its projects by spans (:mod:`.cpu_shares`)."""
        self._monotonic = monotonic
        self._thread: threading.Thread | None = None
        self._storage_ok: bool | None = None
        self._storage_error = ""
        self._storage_retry_at = 0.0
        self._replay_retry_at = 0.0
        self._backoff_s = 0.0
        self._refusal = ""
        self._replaying: tuple[SpooledBatch, Triage] | None = None
        self.large_rows = max(1, self.max_batch_spans // TURN_SHARE)
        """Rows built from more spans than a turn's (:mod:`.row_builder`) are built aside."""
        self._rows = RowBuilder(ingestor, self._charge_rows, self.large_rows)
        """Builds the rows of large inserts while the writer goes on (:mod:`.row_builder`)."""
        self._body_rows: _BodyRows | None = None
        """The engine path's last batch, its rows being built in the worker while the writer
        inserts the next batch (written after it)."""

    @property
    def row_process(self) -> RowProcess:
        """The worker process the rows of large inserts are built in (the reconciler's too)."""
        return self._rows.process

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self._rows.start()
        self._thread = threading.Thread(target=self._run, name="latencylens-writer", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Close the queue, write what is in it, and wait for the thread."""
        self.queue.close()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                _log.error("the writer did not finish within %.0f s", timeout_s)
        self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def state(self) -> WriterState:
        retry_in = max(0.0, self._storage_retry_at - self._monotonic())
        return WriterState(self._storage_ok, self._storage_error, retry_in, self._refusal)

    # --- loop -----------------------------------------------------------------------------------
    def _run(self) -> None:
        # The collector's own ClickHouse calls must never be traced (and exported back to itself).
        otel_context.attach(otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True))
        while True:
            pending = self._body_rows
            if self._replay_due():
                wait = 0.0
            else:
                wait = self._idle_wait() if pending is None else min(_BODY_ROWS_POLL_S, self.flush_interval_s)
            tickets = self.queue.take(
                self.max_batch_spans, self.flush_interval_s, wait, self._batch_bytes(), _BODY_FILL
            )
            if tickets:
                started = time.thread_time()
                self._flush(tickets)
                if pending is not None and self._body_rows is pending:
                    # No INSERT of bodies took its place (spans only, storage refusing, a failed
                    # INSERT): its rows are written now, not after whatever comes next.
                    self._finish_body_rows()
                self._charge(tickets, time.thread_time() - started)
            elif pending is not None:
                if pending.rows.done() or self.queue.closed or self._replay_due():
                    self._finish_body_rows()  # built, and nothing to insert meanwhile
            elif self.queue.closed:
                self._rows.stop()
                return
            else:
                self._ensure_schema()
            if self._replay_due():
                try:
                    self._replay_oldest()
                except Exception:  # keep the writer alive; the file stays for the next attempt
                    _log.exception("replaying the spool failed")
                    self._replay_retry_at = self._monotonic() + RETRY_MAX_S

    def _batch_bytes(self) -> int | None:
        """Most bytes of the next batch. While the engine path's last batch has its rows built, at
        most half of what waits in all: the next INSERT and that
        build run side by side, so batches of equal size keep both busy. Without the bound, the
        exports answered after each INSERT make the next batch, and batches alternate between
        nearly all of them and the few left (28 and 4 bodies at 32 senders): the small INSERT
        waits for the large build. Never below :data:`BODY_BATCH_MIN_BYTES`, though: halving a few
        bodies would pay an INSERT's fixed cost for each couple. Nor leaving less than that behind:
        at 32 senders the bound was 31 of the 32 bodies queued, every round, and the one left waited
        a whole INSERT more (the p99 was that export's two rounds)."""
        pending = self._body_rows
        if pending is None:
            return self.max_batch_bytes
        queued = self.queue.bytes
        half = max(BODY_BATCH_MIN_BYTES, (pending.nbytes + queued) // 2)
        if half < queued < half + BODY_BATCH_MIN_BYTES:
            half = queued
        return half if self.max_batch_bytes is None else min(self.max_batch_bytes, half)

    def _charge(self, tickets: Sequence[Ticket], cpu_s: float) -> None:
        """Share a batch's CPU time among its projects by what each brought (spans, or body bytes)."""
        if self.cpu is None:
            return
        weights: dict[str, int] = {}
        for ticket in tickets:
            weights[ticket.project] = weights.get(ticket.project, 0) + (len(ticket.spans) or ticket.nbytes)
        total = sum(weights.values()) or 1
        for project, weight in weights.items():
            self.cpu.charge(project, cpu_s * weight / total)

    def _charge_rows(self, todo: RowsToWrite, cpu_s: float) -> None:
        """Share a row build's CPU time among its projects by the spans each brought."""
        if self.cpu is None:
            return
        total = todo.spans or 1
        for project, traces in todo.traces.items():
            self.cpu.charge(project, cpu_s * sum(len(spans) for spans in traces.values()) / total)

    def _idle_wait(self) -> float:
        if self.spool is not None and self.spool.counts.pending_batches:
            retry_at = max(self._storage_retry_at, self._replay_retry_at)
            return min(_IDLE_WAKE_S, max(0.0, retry_at - self._monotonic()))
        return _IDLE_WAKE_S

    def _flush(self, tickets: list[Ticket]) -> None:
        bodies = [ticket for ticket in tickets if ticket.body is not None]
        if bodies:
            self._flush_bodies(bodies)
            tickets = [ticket for ticket in tickets if ticket.body is None]
            if not tickets:
                return
        spans = [span for ticket in tickets for span in ticket.spans]
        pieces = _Pieces.of(tickets)
        # From here a receiver can no longer cancel; a cancelled one (client gone) is written anyway.
        tickets = [ticket for ticket in tickets if ticket.future.set_running_or_notify_cancel()]
        try:
            outcome, later = self._store_or_spool(spans, pieces)
        except Exception as exc:
            if not isinstance(exc, WriteFailed):
                _log.exception("unexpected error while writing a batch")
            failure = exc if isinstance(exc, WriteFailed) else WriteFailed("internal error while writing")
            for ticket in tickets:
                ticket.future.set_exception(failure)
            return
        if later is None:
            _resolve_all(tickets, outcome)
            return
        # The projects whose rows were written are answered now; the others once their rows are
        # built aside (a failure there loses no span: it is logged).
        _resolve_all([ticket for ticket in tickets if ticket.project not in later.traces], outcome)
        waiting = [ticket for ticket in tickets if ticket.project in later.traces]
        self._rows.submit(later).add_done_callback(lambda _: _resolve_all(waiting, outcome))

    def _store_or_spool(self, spans: list[SpanRow], pieces: _Pieces) -> tuple[Outcome, RowsToWrite | None]:
        """Where the batch went, and the rows left for :mod:`.row_builder` to build."""
        batch_id = uuid.uuid4().hex
        if self._monotonic() >= self._storage_retry_at:
            try:
                later = self._write(spans, batch_id, pieces, aside=True)
                metrics.SPANS_WRITTEN.labels(source="direct").inc(len(spans))
                return Outcome.STORED, later
            except Exception as exc:  # any failure: the batch must still land somewhere durable
                self._note_failure(exc)
        # Answers name no ClickHouse text nor paths (they may hold addresses or data): the log has them.
        if self.spool is None:
            raise WriteFailed("storage unavailable and no spool; retry later")
        try:
            self.spool.write(batch_id, spans)
        except OSError as exc:
            _log.error("could not spool %d spans: %s", len(spans), exc)
            why = "full" if isinstance(exc, SpoolFull) else "not writable"
            raise WriteFailed(f"storage unavailable and the spool is {why}; retry later") from exc
        metrics.SPANS_SPOOLED.inc(len(spans))
        return Outcome.SPOOLED, None

    # --- export bodies the engine decodes (ingest_path = engine) ------------------------------------
    def _flush_bodies(self, tickets: list[Ticket]) -> None:
        """One INSERT of the bodies; each ticket resolves STORED (the engine stored every span of
        its body) or TAKE_PYTHON_PATH (its receiver decodes it in Python, which answers precisely
        and stores or spools it). An insert that fails is split in halves until the failing
        bodies are alone (:meth:`Ingestor.insert_bodies`); ClickHouse refusing writes for now
        sends them all to the Python path (and so to the spool)."""
        tickets = [ticket for ticket in tickets if ticket.future.set_running_or_notify_cancel()]
        if not tickets:
            return
        if self._monotonic() < self._storage_retry_at:
            metrics.ENGINE_BODIES.labels(outcome="refused").inc(len(tickets))
            _resolve(tickets, Outcome.TAKE_PYTHON_PATH)
            return
        try:
            self._store_bodies(tickets)
        except Exception:  # never leave a receiver waiting
            _log.exception("unexpected error while writing export bodies")
            _resolve([ticket for ticket in tickets if not ticket.future.done()], Outcome.TAKE_PYTHON_PATH)

    def _store_bodies(self, tickets: list[Ticket]) -> None:
        started = time.perf_counter()
        batch = [(ticket.project, ticket.body or b"", ticket.limits) for ticket in tickets]
        try:
            inserted = self.ingestor.insert_bodies(batch, uuid.uuid4().hex)
        except Exception as exc:
            refusal = classify(exc)
            if refusal.transient:
                self._note_refusal(refusal)
                outcome = "refused"
            else:
                _log.error("writing export bodies failed (%s): %s", refusal.name, exc, exc_info=exc)
                outcome = "failed"
            metrics.ENGINE_BODIES.labels(outcome=outcome).inc(len(tickets))
            _resolve(tickets, Outcome.TAKE_PYTHON_PATH)
            return
        stored: list[Ticket] = []
        left: dict[str, list[Ticket]] = {"not_plain": [], "no_verdict": []}
        for ticket, verdict in zip(tickets, inserted.verdicts, strict=True):
            if verdict is not None and verdict.stored_all:
                ticket.stored_spans, ticket.trace_spans = verdict.spans, verdict.trace_spans
                stored.append(ticket)
            else:
                left["no_verdict" if verdict is None else "not_plain"].append(ticket)
        metrics.ENGINE_BODIES.labels(outcome="stored").inc(len(stored))
        for outcome, sent_back in left.items():
            # Counted before their receivers hear: whoever reads the metric after an answer sees it.
            metrics.ENGINE_BODIES.labels(outcome=outcome).inc(len(sent_back))
            _resolve(sent_back, Outcome.TAKE_PYTHON_PATH)
        spans = sum(ticket.stored_spans for ticket in stored)
        metrics.INSERT_DURATION.observe(time.perf_counter() - started)
        metrics.BATCH_SPANS.observe(spans)
        metrics.SPANS_WRITTEN.labels(source="direct").inc(spans)
        self._note_storage_ok()
        self._start_body_rows(stored, inserted)

    def _start_body_rows(self, stored: list[Ticket], inserted: BodiesStored) -> None:
        """Answer the exports whose bodies were just inserted, and have their rows read back and
        built. A batch of at most :data:`BODY_ROWS_HERE` spans has its rows built and written here
        and is answered after them, as on the Python path. A larger one, while its projects send
        alone, is answered now (its spans are stored) and has its rows built in the worker while
        the writer inserts the next batch (:meth:`_finish_body_rows`): its senders send again
        meanwhile, so the next INSERT has bodies to take (at 8 senders, 1.4–1.7× the spans/s of
        answering once the rows are written). Its read-back comes before the wait for the last
        batch's rows, and its build is queued behind that one: the worker goes from one build to
        the next without waiting for the writer's read-back and write between them (at 32
        senders they were a quarter of each round, and the worker idle meanwhile). While another
        project sends: :meth:`_start_body_rows_aside`."""
        stored_spans: dict[str, int] = {}
        for ticket in stored:
            stored_spans[ticket.project] = stored_spans.get(ticket.project, 0) + ticket.stored_spans
        aside = any(self.queue.others_waiting(project) for project in stored_spans)
        if not aside and sum(stored_spans.values()) > BODY_ROWS_HERE:
            _resolve(stored, Outcome.STORED)  # before the wait for the last batch's rows
            traces = self._read_back([], inserted)
            building = None if traces is None else self._rows.process.start(traces, BODY_ROWS_HERE)
            self._finish_body_rows()
            if building is not None:
                self._body_rows = _BodyRows(stored, building, answered=True)
            return
        self._finish_body_rows()
        if aside:
            self._start_body_rows_aside(stored, stored_spans, inserted)
            return
        traces = self._read_back(stored, inserted)
        if traces is not None:
            self._write_body_rows(
                _BodyRows(stored, self._rows.process.start(traces, BODY_ROWS_HERE), answered=False)
            )

    def _start_body_rows_aside(
        self, stored: list[Ticket], stored_spans: dict[str, int], inserted: BodiesStored
    ) -> None:
        """Have the rows of the bodies just inserted read back and built while another project
        sends. Its exports must not wait for a large read-back and build, neither the writer's wait
        before the next batch nor a turn in the worker behind it: a project's rows from more than
        a turn's spans are read back, built and written by the row builder, as on the Python path,
        its exports answered once they are written (so a heavy project's senders wait for their
        own rows, not the others), and the other projects' rows (at most a turn's spans each)
        here, answered now."""
        aside = {project for project, count in stored_spans.items() if count > self.large_rows}
        light = [ticket for ticket in stored if ticket.project not in aside]
        here = self._read_back(light, inserted, stored_spans.keys() - aside) if light else None
        if here is not None:
            rows = self._rows.process.start(here, sum(ticket.stored_spans for ticket in light))
            self._write_body_rows(_BodyRows(light, rows, answered=False))
        if aside:
            heavy = [ticket for ticket in stored if ticket.project in aside]
            read_back = partial(self.ingestor.read_back, inserted, aside)
            heavy_spans = sum(stored_spans[project] for project in aside)
            built = self._rows.submit_stored(read_back, heavy_spans, partial(self._charge, heavy))
            built.add_done_callback(lambda _: _resolve(heavy, Outcome.STORED))

    def _read_back(
        self, tickets: list[Ticket], inserted: BodiesStored, projects: Collection[str] | None = None
    ) -> ReadBack | None:
        """The stored traces of these projects' bodies; None when the read failed: their spans are
        stored, so ``tickets`` (the exports not answered yet) are answered as such (logged; the
        reconciler writes the rows)."""
        try:
            return self.ingestor.read_back(inserted, projects)
        except Exception as exc:
            _log.error("reading back the traces of an INSERT of export bodies failed: %s", exc)
            _resolve(tickets, Outcome.STORED)
            return None

    def _finish_body_rows(self) -> None:
        """Have the rows of the bodies last inserted written, once built: the engine path builds a
        batch's rows in the worker process while the writer inserts the next batch (the writer's
        next INSERT, not a wait, is what happens meanwhile), and the row builder's thread writes
        them while the writer goes on to the batch after (writing them here took 17–25 ms of each
        round at 8 senders, the next exports queued meanwhile), unless that thread has work
        waiting already (then they are written here: the writer never waits for that thread).
        Their exports were answered when their spans were stored: a build or write that fails is
        logged, and the reconciler writes the rows once the traces settle."""
        pending, self._body_rows = self._body_rows, None
        if pending is None:
            return
        if not pending.answered:
            self._write_body_rows(pending)
            return
        built = _built(pending)
        if built is None:
            return
        if self._rows.submit_built(built, partial(self._charge_built, pending.tickets, built)) is None:
            self._write_built(pending.tickets, built)

    def _charge_built(self, tickets: Sequence[Ticket], built: BuiltRows, writing_cpu_s: float) -> None:
        self._charge(tickets, built.cpu_s + writing_cpu_s)

    def _write_body_rows(self, pending: _BodyRows) -> None:
        """Write these exports' rows (waiting for their build) and answer them, if not yet."""
        built = _built(pending)
        if built is not None:
            self._write_built(pending.tickets, built)
        if not pending.answered:
            _resolve(pending.tickets, Outcome.STORED)

    def _write_built(self, tickets: Sequence[Ticket], built: BuiltRows) -> None:
        try:
            self.ingestor.write_built(built)
            self._charge(tickets, built.cpu_s)
        except Exception as exc:
            _log.error("writing the request rows of %d export bodies failed: %s", len(tickets), exc)

    def _write(
        self, spans: Sequence[SpanRow], batch_id: str, pieces: _Pieces | None = None, aside: bool = False
    ) -> RowsToWrite | None:
        """Insert the spans and write their rows; with ``aside``, return unwritten the rows of
        each project built from more than :attr:`large_rows` spans, for :mod:`.row_builder`."""
        started = time.perf_counter()
        pieces = pieces or _NO_PIECES
        todo = self.ingestor.insert(
            spans, dedup_token=batch_id, context=pieces.context, rows_later=pieces.rows_later
        )
        self._note_storage_ok()
        metrics.BATCH_SPANS.observe(len(spans))
        later = None
        if aside and todo.spans > self.large_rows:
            todo, later = todo.split(self.large_rows)
        if todo.traces:
            self.ingestor.write_rows(todo)
        metrics.INSERT_DURATION.observe(time.perf_counter() - started)
        return later if later is not None and later.traces else None

    def _write_now(self, spans: Sequence[SpanRow], batch_id: str) -> None:
        """Insert the spans and write their rows (a spooled batch's replay)."""
        self._write(spans, batch_id)

    def _note_failure(self, exc: Exception) -> None:
        """A refusal for now pauses writes (back-off); any other only sends this batch to the spool,
        where its replay finds the spans ClickHouse refuses."""
        refusal = classify(exc)
        if refusal.transient:
            self._note_refusal(refusal)
        else:
            self._storage_error = refusal.message
            _log.error("writing a batch failed (%s), spooling it: %s", refusal.name, exc, exc_info=exc)

    def _note_storage_ok(self) -> None:
        """A write went through: storage is healthy again, and the backoff starts over."""
        self._storage_ok, self._storage_error, self._backoff_s = True, "", 0.0
        self._storage_retry_at, self._refusal = 0.0, ""

    def _note_refusal(self, refusal: Refusal) -> None:
        self._storage_ok, self._storage_error, self._refusal = False, refusal.message, refusal.name
        self._backoff_s = min(RETRY_MAX_S, self._backoff_s * 2 or RETRY_INITIAL_S)
        self._storage_retry_at = self._monotonic() + self._backoff_s
        metrics.STORAGE_REFUSALS.labels(reason=refusal.name).inc()
        what = "unavailable" if refusal.name == UNREACHABLE else f"refusing writes ({refusal.name})"
        _log.warning("ClickHouse %s, spooling for %.1f s: %s", what, self._backoff_s, refusal.message)

    def _ensure_schema(self) -> None:
        """While idle, apply migrations that could not be applied at start-up (storage was down)."""
        store = self.ingestor.store
        if store.migrated or self._monotonic() < self._storage_retry_at:
            return
        try:
            store.ensure_ready()
        except StorageUnavailable as exc:
            self._note_failure(exc)
        except Exception as exc:  # reachable but refusing the schema: an operator's problem
            _log.error("applying migrations failed, retrying in %.0f s: %s", RETRY_MAX_S, exc)
            self._storage_ok, self._storage_error = False, str(exc)
            self._storage_retry_at = self._monotonic() + RETRY_MAX_S

    # --- spool replay ---------------------------------------------------------------------------
    def _replay_due(self) -> bool:
        if self.spool is None or not self.spool.is_open:
            return False
        self.spool.refresh_if_older_than(SPOOL_REFRESH_S)
        if self._replaying is None and not self.spool.counts.pending_batches:
            return False
        return self._monotonic() >= max(self._storage_retry_at, self._replay_retry_at)

    def _replay_oldest(self) -> None:
        """One step of the oldest spooled batch: the whole batch, or a few of its pieces while it is
        being split; once every span is stored or refused, the refused are kept and the file goes."""
        assert self.spool is not None
        if self._replaying is None:
            pending = self.spool.pending()
            if not pending:
                return
            path = pending[0]
            try:
                batch = self.spool.read(path)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                _log.error("unreadable spool file %s moved to %s/: %s", path.name, FAILED_DIR, exc)
                self.spool.quarantine(path)
                return
            self._replaying = (batch, Triage(batch.batch_id, batch.spans))
        batch, triage = self._replaying
        refusal = triage.step(self._write_now, MAX_WRITES_PER_STEP)
        if refusal is not None:
            self._note_refusal(refusal)  # retried, from the same piece, after the back-off
            return
        if not triage.done:
            return
        # Counted before the file goes, so whoever sees the spool empty also sees its spans counted.
        metrics.SPANS_WRITTEN.labels(source="spool").inc(triage.stored)
        settle(self.spool, batch, triage)
        self._replaying = None
        self._replay_retry_at = 0.0


@dataclass(frozen=True)
class _BodyRows:
    """Exports the engine stored, and their rows in the making (:meth:`Writer._write_body_rows`)."""

    tickets: list[Ticket]
    rows: PendingRows
    answered: bool
    """Whether the exports were answered when their spans were stored (rows beside the next
    INSERT), or wait for their rows (a project's light rows while another project sends)."""

    @property
    def nbytes(self) -> int:
        return sum(ticket.nbytes for ticket in self.tickets)


@dataclass(frozen=True)
class _Pieces:
    """What a batch holding pieces of large exports tells the row builder (:meth:`Ingestor.ingest`)."""

    context: tuple[SpanRow, ...] = ()
    rows_later: frozenset[tuple[str, bytes]] = frozenset()

    @classmethod
    def of(cls, tickets: Sequence[Ticket]) -> _Pieces:
        context = tuple(span for ticket in tickets for span in ticket.context)
        later = frozenset((ticket.project, trace_id) for ticket in tickets for trace_id in ticket.rows_later)
        return cls(context, later)


_NO_PIECES: Final = _Pieces()
"""A batch of whole exports (the usual case; a spooled batch's replay too)."""


def _built(pending: _BodyRows) -> BuiltRows | None:
    """The exports' rows once built (waiting for the build); None when it failed (logged)."""
    try:
        return pending.rows.result()
    except Exception as exc:
        _log.error("building the request rows of %d export bodies failed: %s", len(pending.tickets), exc)
        return None


def _resolve_all(tickets: Sequence[Ticket], outcome: Outcome) -> None:
    """Answer each export with ``outcome`` combined with its pieces' (:meth:`Ticket.resolve`)."""
    for ticket in tickets:
        ticket.resolve(outcome)


def _resolve(tickets: Sequence[Ticket], outcome: Outcome) -> None:
    for ticket in tickets:
        ticket.future.set_result(outcome)
