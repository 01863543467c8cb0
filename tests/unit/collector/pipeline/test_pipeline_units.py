"""The queue's bounds and batching, the spool's durability contract, attribute truncation."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pipeline_helpers import export

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.intake.otlp import truncate_utf8
from latencylens_collector.pipeline import PipelineClosed, QueueFull
from latencylens_collector.pipeline.ingest import RowsToWrite
from latencylens_collector.pipeline.queue import BoundedQueue
from latencylens_collector.pipeline.spool import QUARANTINE_DIR, Spool, SpoolError


def _spans(n: int, project: str = "default") -> list[SpanRow]:
    return [
        SpanRow(
            trace_id=b"\x01" * 16,
            span_id=i.to_bytes(8, "big"),
            parent_span_id=bytes(8),
            service="s",
            name=f"span {i} ✓",
            span_kind="internal",
            kind="other",
            start_ns=1_700_000_000_000_000_000 + i,
            duration_ns=5,
            attributes={"k": "v"},
            project=project,
        )
        for i in range(1, n + 1)
    ]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_queue_refuses_when_full_but_takes_one_oversized_export() -> None:
    queue = BoundedQueue(capacity_spans=10)
    queue.put(_spans(25))  # alone it fits: an export bigger than the queue is never refused forever
    with pytest.raises(QueueFull, match="25 of 10 spans"):
        queue.put(_spans(1))
    assert [len(t.spans) for t in queue.take(100, linger_s=0, idle_timeout_s=0)] == [25]
    queue.put(_spans(6))
    queue.put(_spans(4))
    with pytest.raises(QueueFull):
        queue.put(_spans(1))  # 6 + 4 + 1 > 10
    queue.close()
    with pytest.raises(PipelineClosed):
        queue.put(_spans(1))


def test_take_is_bounded_by_size_and_waits_for_the_oldest_to_linger() -> None:
    clock = FakeClock()
    queue = BoundedQueue(capacity_spans=100, monotonic=clock)
    for n in (3, 4, 5):
        queue.put(_spans(n))
    # Size bound reached (12 ≥ 7): no waiting; 3 + 4 = 7 fit, 5 more would exceed 7.
    assert [len(t.spans) for t in queue.take(7, linger_s=10, idle_timeout_s=0)] == [3, 4]
    # Below the size bound and the oldest (enqueued at 100.0) has waited 10 s already: flush now.
    clock.now = 110.0
    assert [len(t.spans) for t in queue.take(7, linger_s=10, idle_timeout_s=0)] == [5]
    assert queue.depth == 0
    assert queue.take(7, linger_s=10, idle_timeout_s=0) == []  # idle


def test_close_flushes_a_lingering_batch_at_once() -> None:
    queue = BoundedQueue(capacity_spans=100)
    queue.put(_spans(2))
    taken: list = []
    worker = threading.Thread(target=lambda: taken.extend(queue.take(100, linger_s=60, idle_timeout_s=60)))
    worker.start()
    queue.close()
    worker.join(10)
    assert not worker.is_alive()
    assert [len(t.spans) for t in taken] == [2]


def test_spool_round_trip_order_and_lock(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.open()
    (tmp_path / ".tmp-half-written").write_bytes(b"{")  # a crash mid-write: never acknowledged
    first = spool.write("a" * 32, _spans(3))
    second = spool.write("b" * 32, _spans(2, project="p2"))
    assert spool.pending() == [first, second]
    assert spool.pending_spans == 5
    batch = spool.read(first)
    assert (batch.batch_id, batch.spans) == ("a" * 32, _spans(3))
    assert spool.read(second).spans == _spans(2, project="p2")

    other = Spool(tmp_path)
    with pytest.raises(SpoolError, match="in use by another process"):
        other.open()
    spool.close()
    reopened = Spool(tmp_path)
    reopened.open()  # after a restart: same files, the stale temporary one removed
    assert reopened.pending() == [first, second]
    assert reopened.pending_spans == 5
    assert not list(tmp_path.glob(".tmp-*"))
    reopened.remove(first)
    moved = reopened.quarantine(second)
    assert moved.parent.name == QUARANTINE_DIR
    assert (reopened.pending(), reopened.pending_spans) == ([], 0)
    reopened.close()


def test_truncation_keeps_whole_characters() -> None:
    assert truncate_utf8("short", 10) == "short"
    # "€" is 3 bytes: 10 bytes hold 3 of them (9 bytes); 5 × 3 − 9 = 6 bytes dropped.
    assert truncate_utf8("€" * 5, 10) == "€€€…[truncated 6 bytes]"


def test_rows_to_write_split_by_each_projects_spans() -> None:
    """Heavy: a project whose traces hold more than the limit in all (1,500 + 1,200 = 2,700 >
    2,500); light: one at the limit or under (2,500; 10). Counts follow (2,510 and 2,700)."""
    traces = {
        "chain": {b"a": export("chain", 1, 1_500), b"b": export("chain", 2, 1_200)},
        "edge": {b"c": export("edge", 1, 2_500)},
        "normal": {b"d": export("normal", 1)},
    }
    light, heavy = RowsToWrite(traces, 5_210).split(2_500)
    assert (set(light.traces), light.spans) == ({"edge", "normal"}, 2_510)
    assert (set(heavy.traces), heavy.spans) == ({"chain"}, 2_700)
    assert heavy.traces["chain"] is traces["chain"]
