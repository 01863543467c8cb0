"""On the engine path, a project's large rows do not hold another project's exports.

The engine path builds a large batch's rows in the worker while the writer inserts the next batch
and writes them after it: the writer waits for that build before the next batch. A hostile
project's 8,000-span chain made a normal project's export wait for its rows (≈ 0.5 s of build)
whether it rode in the same INSERT or came in the next one: the hostile soak's normal p99 went
from 1.7× a clean run's (Python path) to 8.6×. Now, while another project sends, rows from more
than a turn's spans are built and written by the row builder, as on the Python path, and the other
projects' rows are written at once.

A real pipeline (queue, writer, row builder, the spawned worker, chdb) fed OTLP/protobuf bodies as
the receivers queue them. To make "meanwhile" deterministic, writing rows from more than
``HELD_SPANS`` spans waits for the test's go-ahead (:class:`HeldRows`); the build itself is real.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

import pytest
from pipeline_helpers import body_limits, chat_body, row_spans_by_project, stored_spans_by_project, wait_until

from latencylens_collector.analysis.row_work import BuiltRows, ReadBack
from latencylens_collector.pipeline import Outcome, Pipeline
from latencylens_collector.pipeline.ingest import BodiesStored, Ingestor
from latencylens_collector.pipeline.writer import BODY_ROWS_HERE
from latencylens_collector.storage.otlp_sql import BodyLimits
from latencylens_collector.storage.store import StorageError, Store

WAIT_S = 60.0
MAX_BATCH_SPANS = 2_000
"""A turn, while another project sends, is a quarter of it: rows from more than 500 spans go aside."""
HEAVY_TRACES, LIGHT_TRACES = 200, 2
"""chat_body: four spans a trace, so 800 spans (over a turn) and 8."""
ALONE_TRACES = 300
"""1,200 spans: a batch whose rows are built in the worker."""
HELD_SPANS = 400


class HeldRows(Ingestor):
    """The real ingestor; writing rows built from more than HELD_SPANS spans waits for :attr:`go`,
    after saying so (:attr:`building`) and noting the thread that writes them."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.go, self.building = threading.Event(), threading.Event()
        self.held_in: list[str] = []
        self.inserts: list[set[str]] = []
        """The projects of each INSERT of bodies, in order."""

    def insert_bodies(self, bodies: Sequence[tuple[str, bytes, BodyLimits]], batch_id: str) -> BodiesStored:
        self.inserts.append({project for project, _, _ in bodies})
        return super().insert_bodies(bodies, batch_id)

    def write_built(self, built: BuiltRows) -> None:
        if built.spans > HELD_SPANS:
            self.held_in.append(threading.current_thread().name)
            self.building.set()
            assert self.go.wait(WAIT_S)
        super().write_built(built)


@pytest.fixture
def engine(
    start_pipeline: Callable[..., tuple[Pipeline, Store]],
) -> Iterator[tuple[Pipeline, Store, HeldRows]]:
    """An engine-path pipeline whose writer lingers while the test says exports are being decoded
    (``pipeline.decoding()``); held rows are let go at the end."""
    pipeline, store = start_pipeline(
        HeldRows, ingest_path="engine", max_batch_spans=MAX_BATCH_SPANS, flush_interval_ms=60_000
    )
    ingestor = pipeline.writer.ingestor
    assert isinstance(ingestor, HeldRows)
    try:
        yield pipeline, store, ingestor
    finally:
        ingestor.go.set()


def submit(pipeline: Pipeline, project: str, traces: int) -> Any:
    return pipeline.submit_body(chat_body(traces), project, body_limits()).future


def test_a_light_export_in_the_same_insert_is_answered_before_a_heavy_projects_rows(
    engine: tuple[Pipeline, Store, HeldRows],
) -> None:
    pipeline, store, ingestor = engine
    with pipeline.decoding("heavy"):  # the writer lingers until "light" is queued too: one INSERT
        heavy = submit(pipeline, "heavy", HEAVY_TRACES)
        light = submit(pipeline, "light", LIGHT_TRACES)
    assert ingestor.building.wait(WAIT_S)
    assert light.result(timeout=WAIT_S) is Outcome.STORED
    assert ingestor.inserts == [{"heavy", "light"}]
    assert row_spans_by_project(store) == {"light": 8}  # its rows written, the heavy ones held
    assert not heavy.done()
    assert ingestor.held_in == ["latencylens-rows"]  # the row builder, not the writer
    ingestor.go.set()
    assert heavy.result(timeout=WAIT_S) is Outcome.STORED
    assert row_spans_by_project(store) == {"heavy": 800, "light": 8}
    assert stored_spans_by_project(store) == {"heavy": 800, "light": 8}


def test_a_project_that_sends_is_answered_while_a_heavy_insert_before_it_has_its_rows_built(
    engine: tuple[Pipeline, Store, HeldRows],
) -> None:
    """The soak's case: the chain's body alone in an INSERT, the normal project's next export in
    the next one. The normal project sent a moment ago, so the heavy rows go aside."""
    pipeline, store, ingestor = engine
    assert submit(pipeline, "light", LIGHT_TRACES).result(timeout=WAIT_S) is Outcome.STORED
    heavy = submit(pipeline, "heavy", HEAVY_TRACES)
    assert ingestor.building.wait(WAIT_S)
    assert submit(pipeline, "light", LIGHT_TRACES).result(timeout=WAIT_S) is Outcome.STORED
    assert row_spans_by_project(store) == {"light": 16}
    assert not heavy.done()
    ingestor.go.set()
    assert heavy.result(timeout=WAIT_S) is Outcome.STORED
    assert ingestor.inserts == [{"light"}, {"heavy"}, {"light"}]
    assert row_spans_by_project(store) == {"heavy": 800, "light": 16}


def test_a_project_sending_alone_keeps_its_rows_built_beside_the_next_insert(
    engine: tuple[Pipeline, Store, HeldRows],
) -> None:
    """With no other project to protect, a large batch's rows (1,200 spans, over BODY_ROWS_HERE)
    stay beside the writer's next INSERT (built in the worker meanwhile, then handed to the row
    builder's thread to write while the writer goes on), which keeps its batches large; its export
    is answered once its spans are stored, before its rows (aside, it would wait for them)."""
    pipeline, store, ingestor = engine
    assert ALONE_TRACES * 4 > BODY_ROWS_HERE
    heavy = submit(pipeline, "heavy", ALONE_TRACES)
    assert heavy.result(timeout=WAIT_S) is Outcome.STORED
    assert stored_spans_by_project(store) == {"heavy": 1_200}
    assert ingestor.building.wait(WAIT_S)
    assert ingestor.held_in == ["latencylens-rows"]
    assert row_spans_by_project(store) == {}
    ingestor.go.set()
    wait_until(lambda: row_spans_by_project(store) == {"heavy": 1_200}, what="the heavy rows")


class HeavyReadBackFails(Ingestor):
    """ClickHouse refusing the read-back of the heavy project's traces, after their INSERT."""

    def read_back(self, stored: BodiesStored, projects: Collection[str] | None = None) -> ReadBack:
        if projects is not None and "heavy" in projects:
            raise StorageError("read-back refused")
        return super().read_back(stored, projects)


def test_rows_aside_that_cannot_be_read_back_lose_no_span_and_no_answer(
    start_pipeline: Callable[..., tuple[Pipeline, Store]], caplog: pytest.LogCaptureFixture
) -> None:
    pipeline, store = start_pipeline(
        HeavyReadBackFails, ingest_path="engine", max_batch_spans=MAX_BATCH_SPANS, flush_interval_ms=60_000
    )
    with caplog.at_level(logging.ERROR), pipeline.decoding("heavy"):
        heavy = submit(pipeline, "heavy", HEAVY_TRACES)
        light = submit(pipeline, "light", LIGHT_TRACES)
    assert light.result(timeout=WAIT_S) is Outcome.STORED
    assert heavy.result(timeout=WAIT_S) is Outcome.STORED
    assert stored_spans_by_project(store) == {"heavy": 800, "light": 8}
    assert row_spans_by_project(store) == {"light": 8}  # the heavy rows are the reconciler's to write
    assert any("read-back refused" in record.getMessage() for record in caplog.records)
