"""Issue 18: on the engine path a batch's request rows are built in the worker process while the
writer inserts the next batch; its exports are answered once its spans are stored, so that their
senders send again meanwhile, and the rows follow.

A real collector pipeline (queue, writer, chdb, the spawned worker) fed OTLP/protobuf bodies as
the receivers queue them (:meth:`Pipeline.submit_body`).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future
from typing import Any

import pytest
from pipeline_helpers import (
    body_limits,
    chat_body,
    export,
    row_spans_by_project,
    stored_spans_by_project,
    wait_until,
)

from latencylens_collector.analysis.row_work import BuiltRows, ReadBack
from latencylens_collector.pipeline import Outcome, Pipeline
from latencylens_collector.pipeline.ingest import BodiesStored, Ingestor
from latencylens_collector.pipeline.writer import BODY_BATCH_MIN_BYTES, BODY_ROWS_HERE
from latencylens_collector.storage.otlp_sql import BodyLimits
from latencylens_collector.storage.store import StorageError, Store

SPANS_PER_TRACE = 4
"""chat_trace: the request, a retrieval, a model call and a tool call."""


def workers() -> list[multiprocessing.process.BaseProcess]:
    return [child for child in multiprocessing.active_children() if child.pid != os.getpid()]


class FailingRows(Ingestor):
    """ClickHouse refusing the requests insert after the spans insert went through."""

    def write_built(self, built: BuiltRows) -> None:
        raise RuntimeError("requests insert refused")


class HeldRows(Ingestor):
    """Holds every requests insert until released."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.release = threading.Event()
        self.writing = threading.Event()

    def write_built(self, built: BuiltRows) -> None:
        self.writing.set()
        self.release.wait(60)
        super().write_built(built)


@pytest.fixture
def engine(start_pipeline) -> Callable[..., tuple[Pipeline, Store]]:
    return lambda ingestor=Ingestor: start_pipeline(ingestor, ingest_path="engine", flush_interval_ms=50)


def test_large_batches_get_their_rows_built_in_the_worker(engine: Any) -> None:
    """Three bodies of 300 traces (1,200 spans each, over BODY_ROWS_HERE): when each export is
    answered its spans are stored; its rows, built in the worker, follow with every span counted
    (300 traces × 4 spans)."""
    pipeline, store = engine()
    assert SPANS_PER_TRACE * 300 > BODY_ROWS_HERE
    for expected in (1_200, 2_400, 3_600):
        ticket = pipeline.submit_body(chat_body(300), "default", body_limits())
        assert ticket.future.result(timeout=60) is Outcome.STORED
        assert stored_spans_by_project(store) == {"default": expected}
        rows = {"default": expected}
        wait_until(lambda rows=rows: row_spans_by_project(store) == rows, what=f"rows of {expected} spans")
    assert workers()  # the builds ran in the worker process


def test_an_export_is_answered_once_its_spans_are_stored_not_its_rows(engine: Any) -> None:
    """The requests insert is held: the export is answered all the same, its spans stored and its
    rows not yet; released, the rows are written. (Answered after its rows, the export would wait
    for the release and the first ``result`` would time out.)"""
    pipeline, store = engine(HeldRows)
    ingestor = pipeline.writer.ingestor
    assert isinstance(ingestor, HeldRows)
    try:
        ticket = pipeline.submit_body(chat_body(300), "default", body_limits())
        assert ticket.future.result(timeout=30) is Outcome.STORED
        assert stored_spans_by_project(store) == {"default": 1_200}
        assert ingestor.writing.wait(30)  # the rows are being written, held
        assert row_spans_by_project(store) == {}
    finally:
        ingestor.release.set()
    wait_until(lambda: row_spans_by_project(store) == {"default": 1_200}, what="the rows after the release")


def test_the_writer_goes_on_while_the_last_batchs_rows_are_written(engine: Any) -> None:
    """Every requests insert is held: the first batch's write is handed to the row builder's
    thread, so the writer goes on to insert (and answer) the next exports instead of waiting for
    it (written by the writer, 17–25 ms of each round at 8 senders). The third batch's rows find
    the second's waiting there and are written by the writer, which then waits for the release;
    released, every row is written."""
    pipeline, store = engine(HeldRows)
    ingestor = pipeline.writer.ingestor
    assert isinstance(ingestor, HeldRows)
    try:
        for sent in range(1, 4):
            ticket = pipeline.submit_body(chat_body(300), "default", body_limits())
            assert ticket.future.result(timeout=30) is Outcome.STORED
            assert stored_spans_by_project(store) == {"default": sent * 1_200}
        assert ingestor.writing.is_set()  # the first batch's write, held all along
        assert row_spans_by_project(store) == {}
    finally:
        ingestor.release.set()
    wait_until(lambda: row_spans_by_project(store) == {"default": 3 * 1_200}, what="every batch's rows")


def test_bodies_queued_together_all_get_their_rows(engine: Any) -> None:
    """Eight bodies submitted at once: inserted in one or more batches, each batch's rows built while
    the next is inserted; every export is answered STORED and every trace has its row."""
    pipeline, store = engine()
    tickets = [pipeline.submit_body(chat_body(100), "default", body_limits()) for _ in range(8)]
    assert [ticket.future.result(timeout=60) for ticket in tickets] == [Outcome.STORED] * 8
    expected = {"default": 8 * 100 * SPANS_PER_TRACE}
    wait_until(lambda: row_spans_by_project(store) == expected, what="every trace's row")


def test_small_batches_are_answered_after_their_rows_built_in_the_writer(engine: Any) -> None:
    """Batches of at most BODY_ROWS_HERE spans: rows built in the writer, no worker started, and
    each export answered once its rows are written, as on the Python path."""
    pipeline, store = engine()
    for sent in range(1, 4):
        ticket = pipeline.submit_body(chat_body(2), "default", body_limits())
        assert ticket.future.result(timeout=60) is Outcome.STORED
        assert row_spans_by_project(store) == {"default": sent * 2 * SPANS_PER_TRACE}
    assert not workers()


def test_rows_pending_when_the_pipeline_stops_are_written_first(engine: Any) -> None:
    pipeline, store = engine()
    ticket = pipeline.submit_body(chat_body(300), "default", body_limits())
    pipeline.stop()  # the queue closes: what it holds is written, rows and all
    assert ticket.future.result(timeout=0) is Outcome.STORED
    assert row_spans_by_project(store) == {"default": 1_200}
    assert not workers()


def test_rows_that_cannot_be_written_lose_no_span_and_no_answer(
    engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The spans are stored: the export is answered STORED (its rows are the reconciler's to write)."""
    pipeline, store = engine(FailingRows)
    with caplog.at_level(logging.ERROR):
        answers: list[Future[Outcome]] = [
            pipeline.submit_body(chat_body(300), "default", body_limits()).future for _ in range(2)
        ]
        assert [answer.result(timeout=60) for answer in answers] == [Outcome.STORED] * 2
        assert stored_spans_by_project(store) == {"default": 2_400}
        wait_until(lambda: _logged(caplog, "requests insert refused"), what="the failed write logged")
    assert row_spans_by_project(store) == {}


class FailingReadBack(Ingestor):
    """ClickHouse refusing the read-back after the INSERT of the bodies went through."""

    def read_back(self, stored: BodiesStored, projects: Collection[str] | None = None) -> ReadBack:
        raise StorageError("read-back refused")


def test_a_read_back_that_fails_loses_no_span_and_no_answer(
    engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The spans are stored: the export is answered STORED (its rows are the reconciler's to write)."""
    pipeline, store = engine(FailingReadBack)
    with caplog.at_level(logging.ERROR):
        answer = pipeline.submit_body(chat_body(300), "default", body_limits()).future
        assert answer.result(timeout=60) is Outcome.STORED
        assert stored_spans_by_project(store) == {"default": 1_200}
        wait_until(lambda: _logged(caplog, "read-back refused"), what="the failed read-back logged")
    assert row_spans_by_project(store) == {}


class HeldFirstInsert(Ingestor):
    """Holds its first INSERT until released (so exports queue meanwhile) and records how many
    bodies each INSERT took."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.release = threading.Event()
        self.bodies_per_insert: list[int] = []

    def insert_bodies(self, bodies: Sequence[tuple[str, bytes, BodyLimits]], batch_id: str) -> Any:
        if not self.bodies_per_insert:
            self.release.wait(60)
        self.bodies_per_insert.append(len(bodies))
        return super().insert_bodies(bodies, batch_id)


def bodies_per_insert(engine: Any, bodies: list[bytes]) -> list[int]:
    """How many bodies each INSERT took when the first body is being inserted while the others
    queue (every export answered STORED: a body sent again is stored once, answered each time)."""
    pipeline, _ = engine(HeldFirstInsert)
    ingestor = pipeline.writer.ingestor
    assert isinstance(ingestor, HeldFirstInsert)
    first = pipeline.submit_body(bodies[0], "default", body_limits())
    while pipeline.queue.bytes:  # until the writer took it
        time.sleep(0.01)
    rest = [pipeline.submit_body(b, "default", body_limits()) for b in bodies[1:]]
    ingestor.release.set()
    answers = [ticket.future.result(timeout=120) for ticket in [first, *rest]]
    assert answers == [Outcome.STORED] * len(bodies)
    return ingestor.bodies_per_insert


def test_while_a_batch_has_its_rows_built_the_next_takes_half_of_what_waits(engine: Any) -> None:
    """The next INSERT runs beside the last batch's build: batches of equal size keep both busy.
    One body (≈ 0.87 MB) is being inserted while eight more queue: the next batch takes half of
    the nine's bytes (≈ 3.9 MB, over BODY_BATCH_MIN_BYTES), so four bodies, then the other four."""
    bodies = [chat_body(900)] * 9
    assert 4 * len(bodies[0]) > BODY_BATCH_MIN_BYTES
    assert bodies_per_insert(engine, bodies) == [1, 4, 4]


def test_what_half_would_leave_behind_under_an_inserts_worth_goes_along(engine: Any) -> None:
    """One body (≈ 0.87 MB) is being inserted while four more queue (≈ 3.5 MB). Half of the five
    (≈ 2.2 MB) is two bodies; the two left (≈ 1.7 MB) are under BODY_BATCH_MIN_BYTES (2 MiB), too
    few for an INSERT of their own: they would only wait one INSERT more. So the next batch takes
    all four. (At 32 senders the bound was 31 of the 32 queued every round, and the one left made
    the p99.)"""
    bodies = [chat_body(900)] * 5
    size = len(bodies[0])
    assert 2 * size < max(BODY_BATCH_MIN_BYTES, 5 * size // 2) < 3 * size  # half: two bodies
    assert 2 * size < BODY_BATCH_MIN_BYTES  # what half leaves: under an INSERT's worth
    assert bodies_per_insert(engine, bodies) == [1, 4]


class StepsRecorded(HeldFirstInsert):
    """Records the order of the writer's read-backs and row writes."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.steps: list[str] = []

    def read_back(self, stored: BodiesStored, projects: Collection[str] | None = None) -> ReadBack:
        self.steps.append("read back")
        return super().read_back(stored, projects)

    def write_built(self, built: BuiltRows) -> None:
        self.steps.append(f"write {built.spans} spans' rows")
        super().write_built(built)


def test_the_next_batch_is_read_back_before_the_last_batchs_rows_are_written(engine: Any) -> None:
    """Two bodies, in two INSERTs (the second queued while the first is inserted): the second
    batch's read-back comes before the first batch's rows are written, so its build is queued in
    the worker behind the first and the worker goes from one to the next (reading back after the
    write left the worker idle a quarter of each round at 32 senders). Every row is written."""
    pipeline, store = engine(StepsRecorded)
    ingestor = pipeline.writer.ingestor
    assert isinstance(ingestor, StepsRecorded)
    first = pipeline.submit_body(chat_body(300), "default", body_limits())
    while pipeline.queue.bytes:  # until the writer took it
        time.sleep(0.01)
    second = pipeline.submit_body(chat_body(400), "default", body_limits())
    ingestor.release.set()
    assert [first.future.result(timeout=60), second.future.result(timeout=60)] == [Outcome.STORED] * 2
    expected = {"default": (300 + 400) * SPANS_PER_TRACE}
    wait_until(lambda: row_spans_by_project(store) == expected, what="both batches' rows")
    assert ingestor.bodies_per_insert == [1, 1]
    assert ingestor.steps == ["read back", "read back", "write 1200 spans' rows", "write 1600 spans' rows"]


def test_a_batch_waiting_for_its_rows_is_answered_while_span_exports_keep_coming(engine: Any) -> None:
    """After a batch of bodies, only decoded exports (OTLP/JSON takes the Python path) arrive, one
    every few ms, so the writer never finds the queue empty: the bodies' exports must still be
    answered at the next flush, not when that traffic stops."""
    pipeline, _ = engine()
    body_answer = pipeline.submit_body(chat_body(300), "default", body_limits()).future
    stop = threading.Event()

    def json_traffic() -> None:
        number = 0
        while not stop.is_set():
            pipeline.submit(export("json", number, 3))
            number += 1
            time.sleep(0.003)

    sender = threading.Thread(target=json_traffic, daemon=True)
    sender.start()
    try:
        assert body_answer.result(timeout=10) is Outcome.STORED
        assert sender.is_alive()  # answered while the traffic went on
    finally:
        stop.set()
        sender.join(10)


def _logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in record.getMessage() for record in caplog.records)
