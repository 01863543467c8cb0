"""The single writer thread: batches from the queue into ClickHouse, or into the spool.

One thread does every insert (chdb holds the GIL for a whole statement, and request rows must be
rewritten in order). Each flush is one spans insert plus one read-back and one requests insert
(:meth:`Ingestor.ingest`); receivers are answered only after that or after the batch is fsync'ed in
the spool. While ClickHouse is unreachable, flushes go straight to the spool and the oldest spooled
batch is retried with exponential back-off; a batch is replayed one file per loop, so new exports
keep flowing while a large spool drains.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from opentelemetry import context as otel_context

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.pipeline.queue import BoundedQueue, Outcome, Ticket, WriteFailed
from latencylens_collector.pipeline.spool import Spool
from latencylens_collector.runtime import metrics
from latencylens_collector.storage.store import StorageUnavailable

_log = logging.getLogger(__name__)

RETRY_INITIAL_S: Final = 0.5
RETRY_MAX_S: Final = 30.0
MAX_REPLAY_FAILURES: Final = 5
"""A spooled batch ClickHouse refuses this many times (while reachable) is quarantined."""
_IDLE_WAKE_S: Final = 1.0


@dataclass(frozen=True)
class WriterState:
    """What the writer last saw of ClickHouse, for /readyz."""

    storage_ok: bool | None
    """None until the first write."""
    storage_error: str
    retry_in_s: float


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
    ) -> None:
        self.queue = queue
        self.ingestor = ingestor
        self.spool = spool
        self.max_batch_spans = max(1, max_batch_spans)
        self.flush_interval_s = flush_interval_s
        self._monotonic = monotonic
        self._thread: threading.Thread | None = None
        self._storage_ok: bool | None = None
        self._storage_error = ""
        self._storage_retry_at = 0.0
        self._replay_retry_at = 0.0
        self._backoff_s = 0.0
        self._replay_failures: Counter[Path] = Counter()

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
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
        return WriterState(self._storage_ok, self._storage_error, retry_in)

    # --- loop -----------------------------------------------------------------------------------
    def _run(self) -> None:
        # The collector's own ClickHouse calls must never be traced (and exported back to itself).
        otel_context.attach(otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True))
        while True:
            wait = 0.0 if self._replay_due() else self._idle_wait()
            tickets = self.queue.take(self.max_batch_spans, self.flush_interval_s, wait)
            if tickets:
                self._flush(tickets)
            elif self.queue.closed:
                return
            else:
                self._ensure_schema()
            if self._replay_due():
                try:
                    self._replay_oldest()
                except Exception:  # keep the writer alive; the file stays for the next attempt
                    _log.exception("replaying the spool failed")
                    self._replay_retry_at = self._monotonic() + RETRY_MAX_S

    def _idle_wait(self) -> float:
        if self.spool is not None and self.spool.pending_spans:
            retry_at = max(self._storage_retry_at, self._replay_retry_at)
            return min(_IDLE_WAKE_S, max(0.0, retry_at - self._monotonic()))
        return _IDLE_WAKE_S

    def _flush(self, tickets: list[Ticket]) -> None:
        spans = [span for ticket in tickets for span in ticket.spans]
        # From here a receiver can no longer cancel; a cancelled one (client gone) is written anyway.
        tickets = [ticket for ticket in tickets if ticket.future.set_running_or_notify_cancel()]
        try:
            outcome = self._store_or_spool(spans)
        except Exception as exc:
            if not isinstance(exc, WriteFailed):
                _log.exception("unexpected error while writing a batch")
            failure = exc if isinstance(exc, WriteFailed) else WriteFailed(f"internal error: {exc}")
            for ticket in tickets:
                ticket.future.set_exception(failure)
            return
        for ticket in tickets:
            ticket.future.set_result(outcome)

    def _store_or_spool(self, spans: list[SpanRow]) -> Outcome:
        batch_id = uuid.uuid4().hex
        if self._monotonic() >= self._storage_retry_at:
            try:
                self._write(spans, batch_id)
                metrics.SPANS_WRITTEN.labels(source="direct").inc(len(spans))
                return Outcome.STORED
            except Exception as exc:  # any failure: the batch must still land somewhere durable
                self._note_failure(exc)
        if self.spool is None:
            raise WriteFailed(f"storage unavailable: {self._storage_error}")
        try:
            self.spool.write(batch_id, spans)
        except OSError as exc:
            _log.error("could not spool %d spans: %s", len(spans), exc)
            raise WriteFailed(
                f"storage unavailable ({self._storage_error}) and spool not writable: {exc}"
            ) from exc
        metrics.SPANS_SPOOLED.inc(len(spans))
        return Outcome.SPOOLED

    def _write(self, spans: list[SpanRow], batch_id: str) -> None:
        started = time.perf_counter()
        self.ingestor.ingest(spans, dedup_token=batch_id)
        metrics.INSERT_DURATION.observe(time.perf_counter() - started)
        metrics.BATCH_SPANS.observe(len(spans))
        self._storage_ok, self._storage_error, self._backoff_s = True, "", 0.0
        self._storage_retry_at = 0.0

    def _note_failure(self, exc: Exception) -> None:
        """Unreachable storage pauses direct writes (back-off); other errors only cost this batch."""
        self._storage_error = str(exc) or type(exc).__name__
        if isinstance(exc, StorageUnavailable):
            self._storage_ok = False
            self._backoff_s = min(RETRY_MAX_S, self._backoff_s * 2 or RETRY_INITIAL_S)
            self._storage_retry_at = self._monotonic() + self._backoff_s
            _log.warning("ClickHouse unavailable, spooling for %.1f s: %s", self._backoff_s, exc)
        else:
            _log.error("writing a batch failed, spooling it: %s", exc, exc_info=exc)

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
        if self.spool is None or not self.spool.pending_spans or not self.spool.is_open:
            return False
        return self._monotonic() >= max(self._storage_retry_at, self._replay_retry_at)

    def _replay_oldest(self) -> None:
        assert self.spool is not None
        pending = self.spool.pending()
        if not pending:
            return
        path = pending[0]
        try:
            batch = self.spool.read(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _log.error("unreadable spool file %s, quarantined: %s", path.name, exc)
            self.spool.quarantine(path)
            return
        try:
            self._write(batch.spans, batch.batch_id)
        except Exception as exc:
            self._note_failure(exc)
            self._replay_failed(path, exc)
            return
        self.spool.remove(path)
        self._replay_failures.pop(path, None)
        self._replay_retry_at = 0.0
        metrics.SPANS_WRITTEN.labels(source="spool").inc(len(batch.spans))

    def _replay_failed(self, path: Path, exc: Exception) -> None:
        assert self.spool is not None
        if isinstance(exc, StorageUnavailable):
            return  # not the batch's fault: retried after the storage back-off
        self._replay_failures[path] += 1
        failures = self._replay_failures[path]
        if failures >= MAX_REPLAY_FAILURES:
            target = self.spool.quarantine(path)
            self._replay_failures.pop(path, None)
            _log.error("spooled batch failed %d times, moved to %s: %s", failures, target, exc)
            return
        self._replay_retry_at = self._monotonic() + min(RETRY_MAX_S, RETRY_INITIAL_S * 2**failures)
