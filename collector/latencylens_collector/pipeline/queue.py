"""The bounded hand-off between receivers and the writer, measured in spans and in bytes.

A receiver puts one :class:`Ticket` per export request and waits on its future; the writer takes
tickets in batches bounded by spans, by bytes and by how long the oldest has waited. When the queue
is full ``put`` refuses at once, so the receiver can answer 429 / RESOURCE_EXHAUSTED instead of
buffering without limit. Bytes are what the decoded spans weigh (:func:`rows_bytes`: their text,
resource included, plus a fixed cost per span and per attribute), so memory is bounded however
large the spans are, not only how many.

Projects are served fairly: each has its own FIFO of tickets, one project may hold at most
``project_share`` of the spans and of the bytes, so a project flooding the collector is refused
(429) while another still gets in, and each batch is one project's turn (:meth:`BoundedQueue.take`):
its tickets in order, at most a quarter of a batch while another project waits or sent an export
in the last :data:`ACTIVE_S` (a larger export is written in pieces of that size, one per turn, and
answered after its last), then the projects move on in turn. Other projects' tickets ride along
only while the batch stays within a quarter of the bounds, and only of projects whose whole queue
would fit so (light ones), so exports of many light projects still share an insert, while a
project's large batch (a burst, an 8,000-span chain) is never the insert another project's export
waits for: that export waits at most for the one bounded insert being written, then its own small
one (or rides the next).

Receivers also say while they decode an export, and whose (:meth:`BoundedQueue.decoding`): the
writer waits for a fuller batch only while more spans of the project first in turn are about to
arrive and no other project's exports are queued, so a lone sender is never held for the whole
linger, concurrent senders of a project still share one insert (group commit), and no export waits
for the linger on another project's behalf (while one project's large export was being decoded,
a second of the GIL, every other project's batch could wait out the whole linger).
"""

from __future__ import annotations

import builtins
import enum
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from sys import getsizeof
from typing import Any, Final

from latencylens_collector.analysis.records import DEFAULT_PROJECT, SpanRow
from latencylens_collector.runtime import metrics

DEFAULT_CAPACITY_BYTES: Final = 256 * 1024 * 1024
ROW_BYTES: Final = 500
"""Fixed cost of one span held in memory: the row object, its ids and small fields, its dict."""
SLOT_BYTES: Final = 40
"""Cost of one attribute beyond its two strings: its slot in the dict."""
EVENT_BYTES: Final = 150
"""Fixed cost of one span event (its tuple and attribute dict)."""
TURN_SHARE: Final = 4
"""While other projects wait, one project's turn takes at most 1/TURN_SHARE of a batch's bounds
(an export of more spans is written in pieces of that many, one piece per turn)."""
ACTIVE_S: Final = 10.0
"""A project that put an export this recently counts as waiting for a turn even when none of its
exports is queued now (they are being read or decoded): a flood's turn stays bounded meanwhile."""
RIDER_SHARE: Final = 4
"""Other projects' tickets join a turn's batch only while it stays within 1/RIDER_SHARE of the
bounds, and only of projects holding no more than that queued."""


def rows_bytes(rows: Sequence[SpanRow]) -> int:
    """What decoded spans weigh, in bytes: the size of each string they hold (``sys.getsizeof``:
    a text with one character outside Latin-1 takes 2 or 4 bytes per character) plus the fixed
    costs above. Checked against tracemalloc (tests/unit/collector/pipeline/test_limits_queue.py): never below
    what the spans hold. The resource counts once per span, as each span is inserted (and
    spooled) with it, so an export cannot weigh little in the queue and much in the writer."""
    total = 0
    resources: dict[int, int] = {}
    for row in rows:
        resource = row.resource_attributes
        weight = resources.get(id(resource))
        if weight is None:
            weight = resources[id(resource)] = _mapping_bytes(resource)
        total += ROW_BYTES + weight + _mapping_bytes(row.attributes) + getsizeof(row.name)
        for event in row.events:
            total += EVENT_BYTES + getsizeof(event.name) + _mapping_bytes(event.attributes)
    return total


_ASCII_STRING_BYTES: Final = getsizeof("")
"""An ASCII string's size beyond its characters (one byte each)."""


def _mapping_bytes(values: dict[str, str]) -> int:
    """Exact string sizes; all-ASCII text (the usual case) is measured by joining, one C call for
    the lot instead of one ``getsizeof`` per string."""
    keys, texts = "".join(values), "".join(values.values())
    if keys.isascii() and texts.isascii():
        return len(keys) + len(texts) + (2 * _ASCII_STRING_BYTES + SLOT_BYTES) * len(values)
    return sum(map(getsizeof, values)) + sum(map(getsizeof, values.values())) + SLOT_BYTES * len(values)


class Outcome(enum.Enum):
    """Where an acknowledged batch is, durably; or, for an export body the engine did not store
    whole (:mod:`latencylens_collector.storage.otlp_sql`), that it takes the Python path."""

    STORED = "stored"
    SPOOLED = "spooled"
    TAKE_PYTHON_PATH = "python"


class QueueFull(Exception):
    """No room for the export now; the sender should retry later."""


QUEUE_FULL_RETRY_S: Final = 1
"""How long a sender refused with :class:`QueueFull` waits (``Retry-After``, gRPC ``RetryInfo``): a
full queue drains within a flush or two."""


class ExportTooLarge(Exception):
    """The export can never be admitted (it weighs more than one insert may); do not retry it."""


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
    nbytes: int = 0
    """What the spans weigh (:func:`rows_bytes`)."""
    project: str = DEFAULT_PROJECT
    body: bytes | None = None
    """An OTLP/protobuf export body the engine decodes (``ingest_path = engine``); ``spans`` is
    then empty and ``nbytes`` the body's size."""
    limits: Any = None
    """What the engine checks the body against (:class:`~.storage.otlp_sql.BodyLimits`)."""
    stored_spans: int = 0
    """Spans the engine stored from ``body`` (set before the future resolves)."""
    trace_spans: dict[bytes, int] = field(default_factory=dict)
    """Those spans by trace (set with them), for the per-trace span cap."""
    pieces: list[Future[Outcome]] = field(default_factory=list)
    """Futures of the pieces already cut from this ticket and written before it (in turns)."""
    context: list[SpanRow] = field(default_factory=list)
    """Spans of this export's earlier pieces whose traces continue in this ticket: written already,
    they join its own in memory when the rows of those traces are built (once, with the last piece)."""
    rows_later: frozenset[bytes] = frozenset()
    """Traces of this piece that continue in a later piece of the same export: their rows are not
    built now but with that piece, from all the export's spans (not read back piece by piece)."""

    def resolve(self, outcome: Outcome) -> None:
        """Answer with ``outcome`` for what is left of the export, combined with its pieces': a
        failed piece fails the export, a spooled one makes it spooled. Pieces were taken before
        it, but one whose rows are still being built (:mod:`.row_builder`) is waited for."""
        waiting = next((piece for piece in self.pieces if not piece.done()), None)
        if waiting is not None:
            waiting.add_done_callback(lambda _: self.resolve(outcome))
            return
        for piece in self.pieces:
            failure = piece.exception(timeout=0)
            if failure is not None:
                self.future.set_exception(failure)
                return
            if piece.result(timeout=0) is Outcome.SPOOLED:
                outcome = Outcome.SPOOLED
        self.future.set_result(outcome)


class BoundedQueue:
    """Per-project FIFOs of tickets holding at most ``capacity_spans`` spans and ``capacity_bytes``
    bytes in all, and at most ``project_share`` of each per project. A ticket over the limits fits
    when its project holds nothing and the queue is empty (it cannot be refused forever)."""

    def __init__(
        self,
        capacity_spans: int,
        capacity_bytes: int = DEFAULT_CAPACITY_BYTES,
        project_share: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity_spans = max(1, capacity_spans)
        self.capacity_bytes = max(1, capacity_bytes)
        self.share_spans = max(1, int(self.capacity_spans * project_share))
        self.share_bytes = max(1, int(self.capacity_bytes * project_share))
        self._monotonic = monotonic
        self._queues: dict[str, deque[Ticket]] = {}
        self._turns: deque[str] = deque()
        """Projects with tickets, the next to serve first."""
        self._held: dict[str, tuple[int, int]] = {}
        self._last_put: dict[str, float] = {}
        """When each project last put an export (forgotten after :data:`ACTIVE_S`)."""
        self._spans = 0
        self._bytes = 0
        self._body_bytes = 0
        """Of :attr:`_bytes`, what the queued export bodies weigh (the engine path's)."""
        self._decoding: dict[str, int] = {}
        """Exports being decoded now, by project (each about to be put, or refused)."""
        self._closed = False
        self._cond = threading.Condition()

    @property
    def depth(self) -> int:
        """Spans waiting for the writer."""
        return self._spans

    @property
    def bytes(self) -> int:
        """What the spans waiting for the writer weigh (:func:`rows_bytes`)."""
        return self._bytes

    @property
    def exports(self) -> int:
        """Exports (tickets) waiting for the writer."""
        with self._cond:
            return sum(map(len, self._queues.values()))

    def held(self, project: str) -> tuple[int, int]:
        """Spans and bytes ``project`` has waiting."""
        return self._held.get(project, (0, 0))

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def decoding_exports(self) -> int:
        """Exports being decoded now, each about to be put (or refused)."""
        with self._cond:
            return sum(self._decoding.values())

    @contextmanager
    def decoding(self, project: str = DEFAULT_PROJECT) -> Iterator[None]:
        """Mark one export of ``project`` as being decoded for the duration of the block, which
        should end once its spans are put (or refused, or failed to decode); the count is released
        on any exit."""
        with self._cond:
            self._decoding[project] = self._decoding.get(project, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                left = self._decoding[project] - 1
                if left:
                    self._decoding[project] = left
                else:
                    del self._decoding[project]
                    if self._turns:
                        self._cond.notify_all()

    def put(
        self,
        spans: list[SpanRow],
        nbytes: int | None = None,
        project: str | None = None,
        body: builtins.bytes | None = None,
        limits: Any = None,
    ) -> Ticket:
        """Enqueue (``nbytes``: :func:`rows_bytes` of ``spans``, computed when not given; ``project``:
        the spans' own; ``body`` and ``limits``: an export body for the engine, see :class:`Ticket`);
        raises :class:`QueueFull` or :class:`PipelineClosed` without waiting."""
        if nbytes is None:
            nbytes = rows_bytes(spans)
        if project is None:
            project = spans[0].project if spans else DEFAULT_PROJECT
        with self._cond:
            if self._closed:
                raise PipelineClosed("the collector is shutting down")
            self._check_room(project, len(spans), nbytes)
            ticket = Ticket(
                spans, enqueued_at=self._monotonic(), nbytes=nbytes, project=project, body=body, limits=limits
            )
            queue = self._queues.get(project)
            if queue is None:
                queue = self._queues[project] = deque()
                self._turns.append(project)
            queue.append(ticket)
            self._last_put[project] = ticket.enqueued_at
            held_spans, held_bytes = self._held.get(project, (0, 0))
            self._held[project] = (held_spans + len(spans), held_bytes + nbytes)
            self._spans += len(spans)
            self._bytes += nbytes
            if body is not None:
                self._body_bytes += nbytes
            metrics.QUEUE_DEPTH.set(self._spans)
            metrics.QUEUE_BYTES.set(self._bytes)
            self._cond.notify_all()
            return ticket

    def check_room(self, project: str) -> None:
        """Raise :class:`QueueFull` when no export of ``project`` could be put now (before its body
        is read and decoded: a flooding sender costs no decoding)."""
        with self._cond:
            self._check_room(project, 1, 1)

    def _check_room(self, project: str, spans: int, nbytes: int) -> None:
        if self._spans and (
            self._spans + spans > self.capacity_spans or self._bytes + nbytes > self.capacity_bytes
        ):
            raise QueueFull(
                f"ingest queue full ({self._spans} of {self.capacity_spans} spans, {_mib(self._bytes)} of "
                f"{_mib(self.capacity_bytes)} waiting); retry later"
            )
        held_spans, held_bytes = self._held.get(project, (0, 0))
        if held_spans and (held_spans + spans > self.share_spans or held_bytes + nbytes > self.share_bytes):
            raise QueueFull(
                f"ingest queue full for project {project!r}: it holds its share ({held_spans} of "
                f"{self.share_spans} spans, {_mib(held_bytes)} of {_mib(self.share_bytes)}); retry later"
            )

    def close(self) -> None:
        """Refuse new tickets; ``take`` still hands out what is queued."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def take(
        self,
        max_spans: int,
        linger_s: float,
        idle_timeout_s: float,
        max_bytes: int | None = None,
        fill: tuple[int, float] | None = None,
    ) -> list[Ticket]:
        """The next batch: waits up to ``idle_timeout_s`` for a first ticket, then only while more
        spans are about to arrive for it (:meth:`_lingers`) or, with ``fill = (bytes,
        seconds)``, while export bodies are queued but fewer than ``bytes`` of them and the oldest
        ticket has waited less than ``seconds``; and at most until ``max_spans`` spans or
        ``max_bytes`` bytes are queued or the oldest ticket has waited ``linger_s`` (closing
        flushes at once). The batch is the next project's turn (:meth:`_turn`). Returns [] on idle
        timeout or when closed and empty."""
        limit_bytes = self.capacity_bytes if max_bytes is None else max_bytes
        with self._cond:
            idle_until = self._monotonic() + idle_timeout_s
            while not self._turns and not self._closed:
                remaining = idle_until - self._monotonic()
                if remaining <= 0:
                    return []
                self._cond.wait(remaining)
            if not self._turns:
                return []
            oldest = min(queue[0].enqueued_at for queue in self._queues.values())
            flush_at = oldest + linger_s
            fill_bytes, fill_at = (0, oldest) if fill is None else (fill[0], oldest + min(fill[1], linger_s))
            while self._spans < max_spans and self._bytes < limit_bytes and not self._closed:
                now = self._monotonic()
                if self._lingers():
                    remaining = flush_at - now
                elif 0 < self._body_bytes < fill_bytes:
                    remaining = fill_at - now
                else:
                    break
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            batch = self._turn(max_spans, limit_bytes)
            spans, nbytes = sum(len(ticket.spans) for ticket in batch), sum(ticket.nbytes for ticket in batch)
            self._spans -= spans
            self._bytes -= nbytes
            self._body_bytes -= sum(ticket.nbytes for ticket in batch if ticket.body is not None)
            metrics.QUEUE_DEPTH.set(self._spans)
            metrics.QUEUE_BYTES.set(self._bytes)
            return batch

    def _lingers(self) -> bool:
        """Whether the next batch waits for spans being decoded: only the project first in turn's,
        and only while no other project has exports queued (they would wait for it too). Called
        with the lock held and a project waiting."""
        return self._turns[0] in self._decoding and len(self._queues) == 1

    def _turn(self, max_spans: int, max_bytes: int) -> list[Ticket]:
        """The project first in turn's tickets in order, within the bounds, or a quarter of them
        while another project waits or put an export within :data:`ACTIVE_S` (a first ticket over
        them is taken alone, or then a piece of it that fits); that project then goes last. Then the
        tickets of other projects light enough to ride (all they hold queued is within a quarter of
        the bounds), one each in turn, while the batch stays within a quarter of the bounds; they
        keep their place. A project with more queued takes its own turns: riding a light project's
        turn, it made that turn as long as its own (the hostile soak: a normal export waited for
        the writer's batch in progress, the flood's turn, then its own turn of 500 spans carrying
        1,500 of the flood's, ≈ 120 ms each). Called with the lock held and a project waiting."""
        project = self._turns.popleft()
        share = TURN_SHARE if self._others_waiting(project) else 1
        turn_spans = max(1, max_spans // share)
        if share > 1:
            self._cut_piece(project, turn_spans)
        batch = self._pop_while(project, turn_spans, max(1, max_bytes // share), [])
        if project in self._queues:
            self._turns.append(project)
        riders_spans, riders_bytes = max_spans // RIDER_SHARE, max_bytes // RIDER_SHARE
        riding = [
            other
            for other in self._turns
            if other != project and _within(self._held[other], riders_spans, riders_bytes)
        ]
        while riding:
            for other in list(riding):
                if not self._pop_while(other, riders_spans, riders_bytes, batch, limit=1):
                    riding.remove(other)  # its next ticket does not fit: done with it for this batch
                elif other not in self._queues:
                    riding.remove(other)
                    self._turns.remove(other)
        return batch

    def others_waiting(self, project: str) -> bool:
        """Whether a project other than ``project`` has exports queued or put one within
        :data:`ACTIVE_S`: its exports would wait for whatever holds up the writer for ``project``."""
        with self._cond:
            return self._others_waiting(project)

    def _others_waiting(self, project: str) -> bool:
        """:meth:`others_waiting`, with the lock held: also what bounds ``project``'s turn."""
        return any(other != project for other in self._queues) or self._others_active(project)

    def _others_active(self, project: str) -> bool:
        """Whether a project other than ``project`` put an export within :data:`ACTIVE_S`."""
        since = self._monotonic() - ACTIVE_S
        for other, at in list(self._last_put.items()):
            if at < since:
                del self._last_put[other]
        return any(other != project for other in self._last_put)

    def _cut_piece(self, project: str, max_spans: int) -> None:
        """Put a piece of ``max_spans`` spans of ``project``'s first ticket before it when the
        ticket holds more (not an engine body: it is inserted whole); the ticket keeps the rest
        and its receiver's future, and is answered after its pieces (:meth:`Ticket.resolve`).
        A trace split between pieces gets its row once, with its last piece, from the export's
        spans in memory (:attr:`Ticket.context`): reading it back for every piece would cost each
        piece the trace so far."""
        queue = self._queues[project]
        ticket = queue[0]
        if ticket.body is not None or len(ticket.spans) <= max_spans:
            return
        spans, rest = ticket.spans[:max_spans], ticket.spans[max_spans:]
        nbytes = min(ticket.nbytes, rows_bytes(spans))
        rest_traces = {span.trace_id for span in rest}
        piece_traces = {span.trace_id for span in spans}
        continuing = frozenset(piece_traces & rest_traces)
        ending = piece_traces - continuing
        piece = Ticket(
            spans,
            enqueued_at=ticket.enqueued_at,
            nbytes=nbytes,
            project=project,
            context=[span for span in ticket.context if span.trace_id in ending],
            rows_later=continuing,
        )
        ticket.context = [span for span in (*ticket.context, *spans) if span.trace_id in rest_traces]
        ticket.spans, ticket.nbytes = rest, ticket.nbytes - nbytes
        ticket.pieces.append(piece.future)
        queue.appendleft(piece)

    def _pop_while(
        self, project: str, max_spans: int, max_bytes: int, batch: list[Ticket], limit: int | None = None
    ) -> list[Ticket]:
        """Move ``project``'s tickets (at most ``limit``) onto ``batch`` while it stays within the
        bounds (the first ticket of an empty batch always); returns those moved. A project left
        with none is forgotten (its turn too is the caller's to drop)."""
        queue = self._queues[project]
        spans, nbytes = sum(len(ticket.spans) for ticket in batch), sum(ticket.nbytes for ticket in batch)
        moved: list[Ticket] = []
        while queue and (limit is None or len(moved) < limit):
            ticket = queue[0]
            if batch and (spans + len(ticket.spans) > max_spans or nbytes + ticket.nbytes > max_bytes):
                break
            queue.popleft()
            batch.append(ticket)
            moved.append(ticket)
            spans += len(ticket.spans)
            nbytes += ticket.nbytes
            held_spans, held_bytes = self._held[project]
            self._held[project] = (held_spans - len(ticket.spans), held_bytes - ticket.nbytes)
        if not queue:
            del self._queues[project], self._held[project]
        return moved


def _within(held: tuple[int, int], max_spans: int, max_bytes: int) -> bool:
    """Whether a project's queued ``(spans, bytes)`` are within these bounds."""
    return held[0] <= max_spans and held[1] <= max_bytes


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1024 * 1024):.1f} MiB"
