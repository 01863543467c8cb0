"""Issue 15, items 1 and 2 in the queue: memory bounded in bytes as well as spans (counted from
what the queue holds), one project's load cannot starve another's, and a trace past the per-trace
cap is stored marked ``too_large``."""

from __future__ import annotations

import gc
import tracemalloc

import pytest
from otlp_builders import chat_trace, export_request, protobuf_body, span

from latencylens import semconv
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.intake import otlp
from latencylens_collector.pipeline.admission import TraceCap
from latencylens_collector.pipeline.queue import (
    ACTIVE_S,
    BoundedQueue,
    Outcome,
    QueueFull,
    Ticket,
    WriteFailed,
    rows_bytes,
)

BASE = 1_700_000_000_000_000_000
MIB = 1024 * 1024


def rows(count: int, project: str = "default", trace: int = 1, attribute_bytes: int = 10) -> list[SpanRow]:
    return [
        SpanRow(
            trace.to_bytes(16, "big"),
            (i + 1).to_bytes(8, "big"),
            bytes(8),
            "api",
            "step",
            "internal",
            "app",
            BASE + i,
            1,
            attributes={"payload": "x" * attribute_bytes},
            project=project,
        )
        for i in range(count)
    ]


def held_by(make: object) -> tuple[object, int]:
    """What ``make()`` returns and the bytes it holds (traced allocations still alive)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        made = make()  # type: ignore[operator]
        gc.collect()
        return made, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("shape", ["chat_traces", "one_large_attribute_per_span"])
def test_the_byte_count_is_what_the_spans_hold(shape: str) -> None:
    """rows_bytes is measured against tracemalloc: never below what decoded spans really hold, and
    at most 2.5× it (strings that repeat — keys, cached values, the resource — are shared in
    memory but counted per span, as each span is inserted and spooled with its own copies)."""
    if shape == "chat_traces":
        body = export_request(
            [s for i in range(100) for s in chat_trace(BASE + i * 10**9)]
        ).SerializeToString()
    else:
        body = protobuf_body(
            [span(f"s{i}", 7, i + 1, None, BASE, BASE + 1, {"big": f"{i}" * 50_000}) for i in range(40)]
        )
    otlp.decode(body, as_json=False, limits=otlp.Limits(now_ns=BASE))  # warm the caches
    batch, held = held_by(lambda: otlp.decode(body, as_json=False, limits=otlp.Limits(now_ns=BASE)))
    counted = rows_bytes(batch.spans)  # type: ignore[attr-defined]
    assert held <= counted <= 2.5 * held, (held, counted)


def test_the_queue_refuses_on_bytes_long_before_spans() -> None:
    queue = BoundedQueue(capacity_spans=100_000, capacity_bytes=4 * MIB)
    big = rows(3, attribute_bytes=1_000_000)  # 3 spans, ~3 MB
    queue.put(big)
    assert queue.depth == 3 and 3_000_000 < queue.bytes < 3_100_000
    with pytest.raises(QueueFull, match=r"ingest queue full \(3 of 100000 spans, 2\.9 MiB of 4\.0 MiB"):
        queue.put(rows(2, attribute_bytes=1_000_000))
    queue.put(rows(100))  # small spans still fit
    taken = queue.take(100_000, linger_s=0, idle_timeout_s=0)
    assert sum(len(t.spans) for t in taken) == 103 and queue.bytes == 0


def test_the_writers_batch_is_bounded_in_bytes() -> None:
    queue = BoundedQueue(capacity_spans=1000)
    for _ in range(5):
        queue.put(rows(1, attribute_bytes=1_000_000))
    batches = []
    while tickets := queue.take(1000, linger_s=0, idle_timeout_s=0, max_bytes=2_100_000):
        batches.append(len(tickets))
    assert batches == [2, 2, 1]
    queue.put(rows(1, attribute_bytes=3_000_000))  # over the batch bound: taken alone
    assert len(queue.take(1000, linger_s=0, idle_timeout_s=0, max_bytes=2_100_000)) == 1


def test_a_flooding_project_gets_429_while_another_gets_in() -> None:
    queue = BoundedQueue(capacity_spans=100, capacity_bytes=64 * MIB, project_share=0.5)
    for _ in range(5):
        queue.put(rows(10, project="flood"))
    with pytest.raises(QueueFull, match="ingest queue full for project 'flood'"):
        queue.put(rows(10, project="flood"))
    queue.check_room("quiet")
    with pytest.raises(QueueFull):
        queue.check_room("flood")
    queue.put(rows(10, project="quiet"))
    assert queue.held("flood")[0] == 50 and queue.held("quiet")[0] == 10
    # Bytes are shared out the same way.
    by_bytes = BoundedQueue(capacity_spans=1000, capacity_bytes=4 * MIB, project_share=0.5)
    by_bytes.put(rows(2, project="flood", attribute_bytes=900_000))
    with pytest.raises(QueueFull, match="for project 'flood'"):
        by_bytes.put(rows(1, project="flood", attribute_bytes=900_000))
    by_bytes.put(rows(1, project="quiet", attribute_bytes=900_000))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_writer_takes_projects_in_turn() -> None:
    """One project queued 6 exports before another's 1: each batch is one project's turn, at most
    a quarter of a batch (40 // 4 = 10 spans) while the other waits or sent an export within
    ACTIVE_S, so the other's export is the second insert, not the third. A project arriving later
    is served after the current turn."""
    clock = Clock()
    queue = BoundedQueue(capacity_spans=1000, monotonic=clock)
    flood = [queue.put(rows(10, project="flood")) for _ in range(6)]
    quiet = queue.put(rows(10, project="quiet"))
    take = lambda: queue.take(40, linger_s=0, idle_timeout_s=0)  # noqa: E731
    assert queue.exports == 7
    assert take() == [flood[0]]  # a quarter of 40 while "quiet" waits; 10 + 10 > 10: no rider
    assert take() == [quiet]
    assert queue.exports == 5
    assert take() == [flood[1]]  # "quiet" sent an export just now: still a quarter
    clock.now += ACTIVE_S + 1
    assert take() == flood[2:6]  # alone now: the whole batch bound
    late = queue.put(rows(10, project="late"))
    assert take() == [late]
    assert queue.depth == 0 and queue.exports == 0


def resolve_all(batch: list[Ticket], outcome: Outcome = Outcome.STORED) -> None:
    """What the writer does once a batch is stored (or spooled)."""
    for ticket in batch:
        assert ticket.future.set_running_or_notify_cancel()
        ticket.resolve(outcome)


def test_a_large_export_is_written_in_pieces_between_other_projects_turns() -> None:
    """A project's 80-span export (a deep chain) and 40-span burst pieces against another
    project's 5-span exports, batches of at most 100 spans: while the light project waits, the
    chain goes in a 25-span piece (100 // 4), the light exports in their own insert, and the chain
    is answered once its last part is written. Another project's rider joins a batch only while it
    stays within 25 spans."""
    clock = Clock()
    queue = BoundedQueue(capacity_spans=10_000, monotonic=clock)
    chain = queue.put(rows(80, project="hostile", trace=1))
    burst = [queue.put(rows(40, project="hostile", trace=2 + i)) for i in range(2)]
    light = [queue.put(rows(5, project="normal", trace=10 + i)) for i in range(3)]
    take = lambda: queue.take(100, linger_s=0, idle_timeout_s=0)  # noqa: E731
    first = take()
    assert len(first) == 1 and first[0] is not chain and first[0].spans == rows(25, "hostile", 1)
    resolve_all(first)
    assert not chain.future.done()  # 55 of its spans wait for the next turn
    assert take() == light  # 15 spans; the chain's next 55 would make 70 > 25
    resolve_all(light)
    clock.now += ACTIVE_S + 1
    second = take()  # alone now (nothing from "normal" for ACTIVE_S): the whole batch bound
    assert second == [chain, burst[0]] and len(chain.spans) == 55
    assert not chain.future.done()
    resolve_all(second)
    assert chain.future.result(timeout=0) is Outcome.STORED
    assert take() == [burst[1]]
    # Both waiting again: a light rider joins a small batch.
    small = queue.put(rows(10, project="hostile", trace=20))
    more = queue.put(rows(5, project="normal", trace=21))
    assert take() == [small, more]  # 10 + 5 ≤ 25
    assert queue.depth == 0 and queue.bytes == 0


def test_a_project_with_a_backlog_rides_no_other_turn() -> None:
    """A light project's 5-span export, then a flood of six 10-span exports (60 spans), batches of
    at most 100 spans, so a turn and the riders' room are 100 // 4 = 25 spans. The light export is
    its own turn, alone: the flood, holding 60 spans, more than 25, does not ride it (before, 10 +
    10 of them did, and the light project's turn cost as much as the flood's). The flood's turns
    then take 20 spans each (10 more would make 30 > 25), and a light export put meanwhile rides
    the next one (20 + 5 ≤ 25)."""
    queue = BoundedQueue(capacity_spans=1000)
    light = queue.put(rows(5, project="light", trace=10))
    flood = [queue.put(rows(10, project="flood", trace=1 + i)) for i in range(6)]
    take = lambda: queue.take(100, linger_s=0, idle_timeout_s=0)  # noqa: E731
    assert take() == [light]
    assert take() == flood[:2]
    later = queue.put(rows(5, project="light", trace=11))
    assert take() == [*flood[2:4], later]
    assert take() == flood[4:]


def test_an_export_in_pieces_is_answered_for_all_of_them() -> None:
    """A spooled piece makes the whole export spooled; a failed piece fails it (its receiver
    answers 503 and the sender retries the whole export: nothing acknowledged is lost)."""
    for piece_outcome, expected in ((Outcome.SPOOLED, Outcome.SPOOLED), (None, WriteFailed)):
        clock = Clock()
        queue = BoundedQueue(capacity_spans=10_000, monotonic=clock)
        big = queue.put(rows(30, project="big"))
        other = queue.put(rows(1, project="other"))
        piece = queue.take(40, linger_s=0, idle_timeout_s=0)  # 10 spans: a quarter of 40
        assert [len(t.spans) for t in piece] == [10]
        assert piece[0].future.set_running_or_notify_cancel()
        if piece_outcome is None:
            piece[0].future.set_exception(WriteFailed("storage unavailable"))
        else:
            piece[0].resolve(piece_outcome)
        assert queue.take(40, linger_s=0, idle_timeout_s=0) == [other]
        clock.now += ACTIVE_S + 1
        rest = queue.take(40, linger_s=0, idle_timeout_s=0)
        assert rest == [big] and len(big.spans) == 20
        resolve_all(rest)
        if expected is WriteFailed:
            with pytest.raises(WriteFailed):
                big.future.result(timeout=0)
        else:
            assert big.future.result(timeout=0) is expected


def test_light_projects_share_one_insert() -> None:
    """Twelve projects with one 2-span export each: one batch of up to a quarter of the bound
    (100 // 4 = 25 spans: the first project's turn, then one rider each in turn while it fits)."""
    queue = BoundedQueue(capacity_spans=10_000)
    tickets = [queue.put(rows(2, project=f"p{i}", trace=i + 1)) for i in range(12)]
    assert queue.take(100, linger_s=0, idle_timeout_s=0) == tickets  # 24 ≤ 25 spans
    bytes_bound = BoundedQueue(capacity_spans=10_000)
    heavy = [bytes_bound.put(rows(1, project=f"p{i}", attribute_bytes=300_000)) for i in range(3)]
    # 4 MiB per batch: a rider only while the batch stays within 1 MiB (300 KB each: 3 fit).
    assert bytes_bound.take(100, linger_s=0, idle_timeout_s=0, max_bytes=4 * MIB) == heavy
    mixed = BoundedQueue(capacity_spans=10_000)
    first = mixed.put(rows(1, project="a", attribute_bytes=300_000))
    second = mixed.put(rows(1, project="b", attribute_bytes=900_000))
    assert mixed.take(100, linger_s=0, idle_timeout_s=0, max_bytes=4 * MIB) == [first]
    assert mixed.take(100, linger_s=0, idle_timeout_s=0, max_bytes=4 * MIB) == [second]


def test_a_trace_past_the_cap_is_kept_and_marked_too_large() -> None:
    """A trace arriving in pieces: the first ``cap`` spans are plain, every later one is marked."""
    cap = TraceCap(cap=5)
    first, _ = cap.admit(rows(4, trace=9))
    second, undo = cap.admit(rows(4, trace=9) + rows(3, trace=10))
    assert not any(semconv.TRACE_TOO_LARGE in row.attributes for row in first)
    marks = [row.attributes.get(semconv.TRACE_TOO_LARGE) for row in second]
    assert marks == [None, "true", "true", "true", None, None, None]
    assert second[1].attributes["payload"] == "x" * 10  # the rest of the span as it was
    assert cap.count("default", (9).to_bytes(16, "big")) == 8
    undo()  # the export was refused: its spans do not count
    assert cap.count("default", (9).to_bytes(16, "big")) == 4
    other_project, _ = cap.admit(rows(6, project="other", trace=9))
    assert [row.attributes.get(semconv.TRACE_TOO_LARGE) for row in other_project][-2:] == [None, "true"]


def test_the_trace_cap_remembers_a_bounded_number_of_traces() -> None:
    cap = TraceCap(cap=1, remembered=3)
    for trace in range(1, 5):
        cap.admit(rows(1, trace=trace))
    assert cap.count("default", (1).to_bytes(16, "big")) == 0  # the least recently seen went
    assert cap.count("default", (4).to_bytes(16, "big")) == 1
