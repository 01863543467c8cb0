"""When the writer flushes: at once when no export of the project first in turn is being decoded
(nothing more is about to arrive for its batch) or another project's exports are queued, otherwise
once the decodes are queued, with ``max_spans`` and the linger as upper bounds.

Lingers here are an hour unless a test is about the linger itself, so a flush that waited for one
shows up as a hung thread (joined with a bound), never as a timing margin.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from otlp_builders import chat_trace, export_request, protobuf_body, recent_base_ns
from pipeline_helpers import grpc_target, metric

from latencylens_collector.analysis.records import DEFAULT_PROJECT, SpanRow
from latencylens_collector.pipeline import Outcome, Pipeline, PipelineClosed, QueueFull
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.pipeline.queue import BoundedQueue, Ticket
from latencylens_collector.pipeline.writer import Writer
from latencylens_collector.settings import Settings
from latencylens_collector.storage.store import Store

HOUR = 3600.0
BOUND_S = 20.0
"""How long a take that should return may block before the test calls it hung."""


def _spans(n: int, trace: int = 1, project: str = DEFAULT_PROJECT) -> list[SpanRow]:
    return [
        SpanRow(
            project=project,
            trace_id=trace.to_bytes(16, "big"),
            span_id=(trace * 1000 + i).to_bytes(8, "big"),
            parent_span_id=bytes(8),
            service="s",
            name=f"span {i}",
            span_kind="internal",
            kind="other",
            start_ns=time.time_ns() - 60_000_000_000 + i,
            duration_ns=5,
        )
        for i in range(1, n + 1)
    ]


class _Clock:
    """A frozen monotonic clock that tells when the taker is about to wait for the linger: ``take``
    reads it for the idle deadline, then for the linger left, and holds the queue's lock until it
    waits, so whatever the test does after :meth:`wait_for_reads` happens while ``take`` waits."""

    def __init__(self) -> None:
        self.reader: threading.Thread | None = None
        self._reads = 0
        self._cond = threading.Condition()

    def __call__(self) -> float:
        if threading.current_thread() is self.reader:
            with self._cond:
                self._reads += 1
                self._cond.notify_all()
        return 100.0

    def wait_for_reads(self, count: int) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: self._reads >= count, BOUND_S), "take never waited"


class _Taker:
    """``queue.take`` in its own thread, so a take that blocks for good fails the test instead."""

    def __init__(
        self,
        queue: BoundedQueue,
        max_spans: int,
        linger_s: float,
        clock: _Clock | None = None,
        fill: tuple[int, float] | None = None,
    ) -> None:
        self.batch: list[Ticket] | None = None
        self._thread = threading.Thread(
            target=self._run, args=(queue, max_spans, linger_s, fill), daemon=True
        )
        if clock is not None:
            clock.reader = self._thread
        self._thread.start()

    def _run(
        self, queue: BoundedQueue, max_spans: int, linger_s: float, fill: tuple[int, float] | None
    ) -> None:
        self.batch = queue.take(max_spans, linger_s=linger_s, idle_timeout_s=HOUR, fill=fill)

    def result(self) -> list[Ticket]:
        self._thread.join(BOUND_S)
        assert not self._thread.is_alive(), "take is still waiting"
        assert self.batch is not None
        return self.batch


def test_pipeline_one_ticket_and_no_decode_in_flight_is_taken_at_once() -> None:
    queue = BoundedQueue(capacity_spans=100)
    ticket = queue.put(_spans(3))
    assert _Taker(queue, max_spans=100, linger_s=HOUR).result() == [ticket]
    # A decode that ended (its spans put) leaves nothing to wait for either.
    with queue.decoding():
        second = queue.put(_spans(2))
    assert queue.decoding_exports == 0
    assert _Taker(queue, max_spans=100, linger_s=HOUR).result() == [second]


def test_pipeline_take_waits_for_the_decode_in_flight_and_takes_its_spans_too() -> None:
    clock = _Clock()
    queue = BoundedQueue(capacity_spans=100, monotonic=clock)
    with queue.decoding():
        first = queue.put(_spans(3))
        with queue.decoding():
            taker = _Taker(queue, max_spans=100, linger_s=HOUR, clock=clock)
            clock.wait_for_reads(2)  # waiting, with a ticket queued: it did not flush at once
            second = queue.put(_spans(4, trace=2))
        # One decode still open: its spans are about to arrive, so the writer keeps waiting.
        third = queue.put(_spans(5, trace=3))
    assert taker.result() == [first, second, third]
    assert queue.depth == 0


def test_pipeline_take_with_a_decode_in_flight_flushes_at_the_linger() -> None:
    queue = BoundedQueue(capacity_spans=100)
    linger_s = 0.2
    with queue.decoding():  # never put: e.g. a sender stalled mid-export
        ticket = queue.put(_spans(3))
        began = time.monotonic()
        batch = _Taker(queue, max_spans=100, linger_s=linger_s).result()
        waited = time.monotonic() - began
        assert batch == [ticket]
        assert waited >= linger_s - (began - ticket.enqueued_at)
        assert queue.decoding_exports == 1


def test_pipeline_take_with_a_decode_in_flight_flushes_at_max_spans() -> None:
    queue = BoundedQueue(capacity_spans=100)
    with queue.decoding():
        tickets = [queue.put(_spans(n, trace=n)) for n in (4, 4, 4)]
        # Size bound reached (12 ≥ 8): no waiting for the open decode; 4 + 4 fit the batch.
        assert _Taker(queue, max_spans=8, linger_s=HOUR).result() == tickets[:2]


def test_pipeline_decode_count_is_released_when_decoding_fails_or_the_put_is_refused() -> None:
    queue = BoundedQueue(capacity_spans=5)
    with pytest.raises(ValueError), queue.decoding():
        raise ValueError("not a protobuf")
    assert queue.decoding_exports == 0
    waiting = queue.put(_spans(5))
    with pytest.raises(QueueFull), queue.decoding():
        queue.put(_spans(1, trace=2))
    assert queue.decoding_exports == 0
    assert _Taker(queue, max_spans=100, linger_s=HOUR).result() == [waiting]
    queue.close()
    with pytest.raises(PipelineClosed), queue.decoding():
        queue.put(_spans(1))
    assert queue.decoding_exports == 0


def test_pipeline_ending_the_last_decode_wakes_a_waiting_take() -> None:
    """The waiting writer is woken by the decode ending without a put (a refused export), too."""
    clock = _Clock()
    queue = BoundedQueue(capacity_spans=100, monotonic=clock)
    ticket = queue.put(_spans(2))
    with pytest.raises(QueueFull), queue.decoding():
        taker = _Taker(queue, max_spans=100, linger_s=HOUR, clock=clock)
        clock.wait_for_reads(2)
        queue.put(_spans(200, trace=2))
    assert taker.result() == [ticket]


def test_pipeline_take_does_not_wait_for_another_projects_decode() -> None:
    """A flood's exports are nearly always being decoded: another project's batch, which they
    cannot join, is taken at once, not held for the (hour-long) linger."""
    queue = BoundedQueue(capacity_spans=100)
    with queue.decoding("flood"):
        normal = queue.put(_spans(3, trace=1, project="normal"), project="normal")
        assert _Taker(queue, max_spans=100, linger_s=HOUR).result() == [normal]


def test_pipeline_take_stops_waiting_once_another_project_has_exports_queued() -> None:
    """The project first in turn is decoding more, but another project's export is queued: that
    export would wait for the linger too, so the batch goes (the other one rides it)."""
    clock = _Clock()
    queue = BoundedQueue(capacity_spans=100, monotonic=clock)
    with queue.decoding("a"):
        first = queue.put(_spans(3, trace=1, project="a"), project="a")
        taker = _Taker(queue, max_spans=100, linger_s=HOUR, clock=clock)
        clock.wait_for_reads(2)  # waiting: "a" is first in turn and decoding, nobody else queued
        other = queue.put(_spans(2, trace=2, project="b"), project="b")
        assert taker.result() == [first, other]
        assert queue.decoding_exports == 1


def test_pipeline_writer_group_commits_exports_decoded_together(
    make_settings: Callable[..., Settings], store: Store
) -> None:
    """Real writer and ClickHouse: exports queued while another is decoded share one insert, and the
    insert follows as soon as the last decode ends (the linger is an hour)."""
    queue = BoundedQueue(capacity_spans=1000)
    writer = Writer(queue, Ingestor(store), None, max_batch_spans=1000, flush_interval_s=HOUR)
    inserts_before = metric("latencylens_batch_spans_count")
    writer.start()
    try:
        with queue.decoding():
            first = queue.put(_spans(3, trace=11))
            second = queue.put(_spans(4, trace=12))
        assert first.future.result(BOUND_S) == Outcome.STORED
        assert second.future.result(BOUND_S) == Outcome.STORED
        assert metric("latencylens_batch_spans_count") - inserts_before == 1
        lone = queue.put(_spans(2, trace=13))
        assert lone.future.result(BOUND_S) == Outcome.STORED
        assert metric("latencylens_batch_spans_count") - inserts_before == 2
    finally:
        writer.stop()
    rows = store.query(f"SELECT count() AS n FROM {store.database}.spans")
    assert rows == [{"n": 9}]


def test_pipeline_refused_submit_releases_the_decode(
    make_settings: Callable[..., Settings], store: Store
) -> None:
    pipeline = Pipeline(make_settings(), Ingestor(store))  # writer not started: submit refuses
    with pytest.raises(PipelineClosed), pipeline.decoding():
        pipeline.submit(_spans(1))
    assert pipeline.queue.decoding_exports == 0


def test_ingest_lone_exports_are_answered_without_the_linger_even_after_failed_ones(start_collector) -> None:
    """Real HTTP and gRPC, an hour-long linger: a lone export is written at once, and exports that
    fail to decode (HTTP 400, INVALID_ARGUMENT) or are refused leave nothing for the writer to wait
    for. Each answer is bounded by the client timeout, far below the linger."""
    collector = start_collector(flush_interval_ms=int(HOUR * 1000))
    stored_before = metric("latencylens_spans_written_total", source="direct")
    url = f"{collector.url}/v1/traces"
    protobuf, json = {"Content-Type": "application/x-protobuf"}, {"Content-Type": "application/json"}
    with httpx.Client(timeout=BOUND_S) as client:
        body = protobuf_body(chat_trace(recent_base_ns()))
        assert client.post(url, content=body, headers=protobuf).status_code == 200
        assert client.post(url, content=b"\x0a\xff\xff", headers=protobuf).status_code == 400
        assert client.post(url, content=b"[1]", headers=json).status_code == 400
        with grpc.insecure_channel(grpc_target(collector.url)) as channel:
            raw = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                request_serializer=lambda body: body,
                response_deserializer=ExportTraceServiceResponse.FromString,
            )
            with pytest.raises(grpc.RpcError) as refused:
                raw(b"\x0a\xff\xff\xff\xff\x0f", timeout=BOUND_S)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            TraceServiceStub(channel).Export(export_request(chat_trace(recent_base_ns())), timeout=BOUND_S)
        body = protobuf_body(chat_trace(recent_base_ns()))
        assert client.post(url, content=body, headers=protobuf).status_code == 200
    assert metric("latencylens_spans_written_total", source="direct") - stored_before == 12


def _body_ticket(queue: BoundedQueue, nbytes: int) -> Ticket:
    """An export body queued for the engine path (its bytes are what ``fill`` counts)."""
    return queue.put([], nbytes, "default", body=b"\x0a\x00", limits=None)


def test_pipeline_take_with_fill_waits_until_enough_bytes_are_queued() -> None:
    """The engine path's writer asks for a fuller batch: with 1 KB queued of the 3 KB asked for, it
    waits (the frozen clock never reaches the fill time), and takes all three once they are there."""
    clock = _Clock()
    queue = BoundedQueue(capacity_spans=100, monotonic=clock)
    first = _body_ticket(queue, 1000)
    taker = _Taker(queue, 100, HOUR, clock, fill=(3000, HOUR))
    clock.wait_for_reads(2)  # waiting, with a ticket queued
    second = _body_ticket(queue, 1000)
    third = _body_ticket(queue, 1000)
    assert taker.result() == [first, second, third]


def test_pipeline_take_with_fill_flushes_when_the_oldest_has_waited_the_fill_time() -> None:
    queue = BoundedQueue(capacity_spans=100)
    fill_s = 0.2
    ticket = _body_ticket(queue, 1000)
    began = time.monotonic()
    assert _Taker(queue, 100, HOUR, fill=(3000, fill_s)).result() == [ticket]
    assert time.monotonic() - began >= fill_s - (began - ticket.enqueued_at)
    # Enough queued already: no wait at all.
    full = [_body_ticket(queue, 1500), _body_ticket(queue, 1500)]
    assert _Taker(queue, 100, HOUR, fill=(3000, HOUR)).result() == full


def test_pipeline_take_with_fill_takes_decoded_spans_at_once_when_no_body_is_queued() -> None:
    """``ingest_path = auto`` queues decoded spans and bodies alike, and the writer asks every take to
    fill: with no body queued there is nothing to fill for, so spans go at once (an hour's fill,
    an hour's linger: a wait would hang the taker)."""
    queue = BoundedQueue(capacity_spans=100)
    ticket = queue.put(_spans(3), 1000)
    assert _Taker(queue, 100, HOUR, fill=(3000, HOUR)).result() == [ticket]


def test_pipeline_take_with_fill_counts_only_the_bodies_and_holds_spans_queued_beside_them() -> None:
    """A body of 1 KB beside 5 KB of decoded spans is still 2 KB short of the 3 KB asked for: the
    take waits (the frozen clock never reaches the fill time) and takes spans and bodies together
    once the bodies weigh enough; the bodies of that batch no longer count for the next take."""
    clock = _Clock()
    queue = BoundedQueue(capacity_spans=100, monotonic=clock)
    spans = queue.put(_spans(3), 5000)
    first = _body_ticket(queue, 1000)
    taker = _Taker(queue, 100, HOUR, clock, fill=(3000, HOUR))
    clock.wait_for_reads(2)  # waiting, with 6 KB queued of which 1 KB are bodies
    second = _body_ticket(queue, 2000)
    assert taker.result() == [spans, first, second]
    later = queue.put(_spans(2, trace=2), 100)
    assert _Taker(queue, 100, HOUR, fill=(3000, HOUR)).result() == [later]
