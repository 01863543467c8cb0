"""The bounded hand-off between receivers and the writer, measured in spans.

A receiver puts one :class:`Ticket` per export request and waits on its future; the writer takes
tickets in batches bounded by size and by how long the oldest has waited. When the queue is full
``put`` refuses at once, so the receiver can answer 429 / RESOURCE_EXHAUSTED instead of buffering
without limit.

Receivers also say while they decode an export (:meth:`BoundedQueue.decoding`): the writer waits
for a fuller batch only while more spans are about to arrive, so a lone sender is never held for
the whole linger, and concurrent senders still share one insert (group commit).
"""

from __future__ import annotations

import enum
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.runtime import metrics


class Outcome(enum.Enum):
    """Where an acknowledged batch is, durably."""

    STORED = "stored"
    SPOOLED = "spooled"


class QueueFull(Exception):
    """No room for the export now; the sender should retry later."""


QUEUE_FULL_RETRY_S: Final = 1
"""How long a sender refused with :class:`QueueFull` waits (``Retry-After``, gRPC ``RetryInfo``): a
full queue drains within a flush or two."""


class PipelineClosed(Exception):
    """The pipeline is not running (starting up or shutting down)."""


class WriteFailed(Exception):
    """The batch is neither in ClickHouse nor in the spool; it was not acknowledged."""


@dataclass(eq=False)
class Ticket:
    """One export request's spans and the future its receiver waits on."""

    spans: list[SpanRow]
    enqueued_at: float = 0.0
    future: Future[Outcome] = field(default_factory=Future)


class BoundedQueue:
    """FIFO of tickets holding at most ``capacity_spans`` spans (one oversized ticket fits alone)."""

    def __init__(self, capacity_spans: int, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.capacity_spans = max(1, capacity_spans)
        self._monotonic = monotonic
        self._items: deque[Ticket] = deque()
        self._spans = 0
        self._decoding = 0
        self._closed = False
        self._cond = threading.Condition()

    @property
    def depth(self) -> int:
        """Spans waiting for the writer."""
        return self._spans

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def decoding_exports(self) -> int:
        """Exports being decoded now, each about to be put (or refused)."""
        return self._decoding

    @contextmanager
    def decoding(self) -> Iterator[None]:
        """Mark one export as being decoded for the duration of the block, which should end once
        its spans are put (or refused, or failed to decode); the count is released on any exit."""
        with self._cond:
            self._decoding += 1
        try:
            yield
        finally:
            with self._cond:
                self._decoding -= 1
                if not self._decoding and self._items:
                    self._cond.notify_all()

    def put(self, spans: list[SpanRow]) -> Ticket:
        """Enqueue; raises :class:`QueueFull` or :class:`PipelineClosed` without waiting."""
        with self._cond:
            if self._closed:
                raise PipelineClosed("the collector is shutting down")
            if self._spans and self._spans + len(spans) > self.capacity_spans:
                raise QueueFull(
                    f"ingest queue full ({self._spans} of {self.capacity_spans} spans waiting); retry later"
                )
            ticket = Ticket(spans, enqueued_at=self._monotonic())
            self._items.append(ticket)
            self._spans += len(spans)
            metrics.QUEUE_DEPTH.set(self._spans)
            self._cond.notify_all()
            return ticket

    def close(self) -> None:
        """Refuse new tickets; ``take`` still hands out what is queued."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def take(self, max_spans: int, linger_s: float, idle_timeout_s: float) -> list[Ticket]:
        """The next batch: waits up to ``idle_timeout_s`` for a first ticket, then only while an
        export is being decoded (more spans are about to arrive), and at most until ``max_spans``
        are queued or the oldest ticket has waited ``linger_s`` (closing flushes at once).
        Returns [] on idle timeout or when closed and empty."""
        with self._cond:
            idle_until = self._monotonic() + idle_timeout_s
            while not self._items and not self._closed:
                remaining = idle_until - self._monotonic()
                if remaining <= 0:
                    return []
                self._cond.wait(remaining)
            if not self._items:
                return []
            flush_at = self._items[0].enqueued_at + linger_s
            while self._decoding and self._spans < max_spans and not self._closed:
                remaining = flush_at - self._monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            batch: list[Ticket] = []
            taken = 0
            while self._items and (not batch or taken + len(self._items[0].spans) <= max_spans):
                ticket = self._items.popleft()
                batch.append(ticket)
                taken += len(ticket.spans)
            self._spans -= taken
            metrics.QUEUE_DEPTH.set(self._spans)
            return batch
