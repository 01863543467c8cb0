"""Issue 15, item 2: rows of a large insert are built beside the writer, not in it.

Building the request rows of a trace of thousands of spans takes the writer close to a second;
another project's export arriving meanwhile used to wait for it. Now the writer hands such rows to
the row builder (:mod:`latencylens_collector.pipeline.row_builder`) and goes on; the large export
is answered only once its rows are written, as before.

The real pipeline (queue, writer thread, row builder thread) and the real ingestor on the
session's chdb. To make "meanwhile" deterministic, the ingestor's large row builds wait for the
test's go-ahead (:class:`HeldRows`); everything else is the real path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from pipeline_helpers import export, row_spans_by_project, stored_spans_by_project, wait_until

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.row_work import BuiltRows, RowBuild, TraceToBuild, build_rows
from latencylens_collector.pipeline import Outcome, Pipeline
from latencylens_collector.pipeline.ingest import Ingestor, RowsToWrite
from latencylens_collector.pipeline.row_builder import RowBuilder
from latencylens_collector.settings import Settings
from latencylens_collector.storage.store import StorageError, Store

WAIT_S = 60.0
HELD_ROWS = 1_500
"""Builds from more spans than this wait for the test (the writer hands aside builds from more
than a quarter of a batch: 2,500 spans by default, 1,200 with batches of 4,800)."""


class HeldRows(Ingestor):
    """The real ingestor; a build of more than HELD_ROWS spans waits for :attr:`go` (or fails
    with ``fail``), after saying it started (:attr:`building`)."""

    def __init__(self, store: Store, fail: bool = False) -> None:
        super().__init__(store)
        self.go, self.building, self.fail = threading.Event(), threading.Event(), fail

        self.inserts: list[set[str]] = []
        """The projects of each insert, in order."""

    def insert(self, spans: Sequence[SpanRow], *args: Any, **kwargs: Any) -> RowsToWrite:
        self.inserts.append({span.project for span in spans})
        return super().insert(spans, *args, **kwargs)

    def write_rows(self, todo: RowsToWrite, build: RowBuild = build_rows) -> int:
        if todo.spans > HELD_ROWS:
            self.building.set()
            assert self.go.wait(WAIT_S)
            if self.fail:
                raise StorageError("refused for the test")
        return super().write_rows(todo, build)


@contextmanager
def running(settings: Settings, ingestor: HeldRows) -> Iterator[Pipeline]:
    """A started pipeline writing through ``ingestor``; its held builds are let go at the end."""
    pipeline = Pipeline(settings, ingestor)
    pipeline.start()
    try:
        yield pipeline
    finally:
        ingestor.go.set()
        pipeline.stop()


@pytest.fixture
def held(make_settings: Callable[..., Settings]) -> tuple[Store, Settings]:
    settings = make_settings(flush_interval_ms=20)
    store = Store(settings)
    store.migrate()
    return store, settings


@pytest.fixture
def in_turns(make_settings: Callable[..., Settings]) -> tuple[Store, Settings]:
    """Batches of 4,800 spans (turns of 1,200 while another project waits); the writer lingers
    until the test lets it (``pipeline.decoding()``), so both exports are queued first."""
    settings = make_settings(max_batch_spans=4_800, flush_interval_ms=60_000)
    store = Store(settings)
    store.migrate()
    return store, settings


def test_another_projects_export_is_written_while_a_large_inserts_rows_are_built(
    held: tuple[Store, Settings],
) -> None:
    store, settings = held
    ingestor = HeldRows(store)
    with running(settings, ingestor) as pipeline:
        big = pipeline.submit(export("big", 0, 3_000))  # one trace: rows from 3,000 spans
        assert ingestor.building.wait(WAIT_S)
        quiet = pipeline.submit(export("quiet", 0))
        assert quiet.result(timeout=WAIT_S) is Outcome.STORED
        assert not big.done()  # its spans are stored, its row is not written yet
        assert stored_spans_by_project(store) == {"big": 3_000, "quiet": 10}
        assert row_spans_by_project(store) == {"quiet": 10}
        ingestor.go.set()
        assert big.result(timeout=WAIT_S) is Outcome.STORED
    assert row_spans_by_project(store) == {"big": 3_000, "quiet": 10}
    store.close()


def test_an_export_waits_for_a_piece_whose_rows_are_still_being_built(
    in_turns: tuple[Store, Settings],
) -> None:
    """Trace A (2,100 spans) then trace B (1,000) in one export, batches of 4,800 spans, written
    in 1,200-span pieces (4,800 // 4) while another project waits: the first piece holds A's
    first 1,200 spans (no row yet: A continues); the second ends A, whose row is built from
    1,200 + 900 = 2,100 spans (more than a 1,200-span turn: by the row builder, held here) and starts B; the
    export's last part ends B (300 + 700 spans, built by the writer). The export is answered only
    after the held piece's rows, although its last part was written before them."""
    store, settings = in_turns
    ingestor = HeldRows(store)
    with running(settings, ingestor) as pipeline:
        with pipeline.decoding():  # the writer lingers until both are queued
            big = pipeline.submit([*export("big", 1, 2_100), *export("big", 2, 1_000)])
            quiet = pipeline.submit(export("quiet", 0))
        assert quiet.result(timeout=WAIT_S) is Outcome.STORED
        assert ingestor.building.wait(WAIT_S)
        # The writer goes on: the export's last part and B's row.
        wait_until(lambda: row_spans_by_project(store).get("big") == 1_000, WAIT_S, "B's row")
        assert stored_spans_by_project(store)["big"] == 3_100
        assert row_spans_by_project(store) == {"big": 1_000, "quiet": 10}  # B's row; A's is being built
        assert not big.done()
        ingestor.go.set()
        assert big.result(timeout=WAIT_S) is Outcome.STORED
    assert row_spans_by_project(store) == {"big": 3_100, "quiet": 10}
    store.close()


def test_a_light_export_in_the_same_insert_is_answered_before_a_heavy_projects_rows(
    in_turns: tuple[Store, Settings],
) -> None:
    """A 2,000-span trace, batches of 4,800 spans: while another project waits it is written in
    1,200-span turns (4,800 // 4), so 1,200 spans, then its last 800 with the other project's
    10-span export riding along (810 ≤ 1,200). That insert's rows: the trace's from 1,200 + 800 =
    2,000 spans (more than a turn's: built aside, held here) and the light export's from 10. The
    light export is answered with its own row written, without waiting for the held build."""
    store, settings = in_turns
    ingestor = HeldRows(store)
    with running(settings, ingestor) as pipeline:
        with pipeline.decoding():  # the writer lingers until both are queued
            big = pipeline.submit(export("big", 1, 2_000))
            quiet = pipeline.submit(export("quiet", 0))
        assert ingestor.building.wait(WAIT_S)
        assert quiet.result(timeout=WAIT_S) is Outcome.STORED
        assert {"big", "quiet"} in ingestor.inserts  # they did share the insert whose rows are held
        assert row_spans_by_project(store) == {"quiet": 10}
        assert not big.done()
        ingestor.go.set()
        assert big.result(timeout=WAIT_S) is Outcome.STORED
    assert row_spans_by_project(store) == {"big": 2_000, "quiet": 10}
    store.close()


def test_rows_that_fail_to_build_lose_no_span(held: tuple[Store, Settings]) -> None:
    """The spans are stored before the rows are built: a failed build is answered as stored (the
    reconciler rebuilds the row once the trace settles) and the writer goes on."""
    store, settings = held
    ingestor = HeldRows(store, fail=True)
    ingestor.go.set()
    with running(settings, ingestor) as pipeline:
        big = pipeline.submit(export("big", 0, 3_000))
        assert big.result(timeout=WAIT_S) is Outcome.STORED
        after = pipeline.submit(export("after", 0))
        assert after.result(timeout=WAIT_S) is Outcome.STORED
    assert stored_spans_by_project(store) == {"big": 3_000, "after": 10}
    assert row_spans_by_project(store) == {"after": 10}
    store.close()


class HeldWrites(Ingestor):
    """The real ingestor; each write of built rows waits for :attr:`go`, after saying it started."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.go, self.writing = threading.Event(), threading.Event()

    def write_built(self, built: BuiltRows) -> None:
        self.writing.set()
        assert self.go.wait(WAIT_S)
        super().write_built(built)


def test_rows_built_elsewhere_are_handed_over_only_when_no_work_waits(held: tuple[Store, Settings]) -> None:
    """The engine path's writer hands the rows its worker built to the row builder's thread and
    goes on; when a hand-over already waits there, it is told so (None) and writes them itself,
    never waiting for that thread."""
    store, _ = held
    ingestor = HeldWrites(store)
    builder = RowBuilder(ingestor, lambda todo, cpu_s: None)
    builder.start()
    charged: list[float] = []
    try:
        first, second, third = (build_rows([_trace(project, 0)]) for project in ("first", "second", "third"))
        written = builder.submit_built(first, charged.append)
        assert written is not None
        assert ingestor.writing.wait(WAIT_S)  # the thread writes the first and waits for the test
        waiting = builder.submit_built(second, charged.append)
        assert waiting is not None  # queued behind it
        handed: list[object] = []  # the third hand-over, from a thread of its own: it must not wait
        handing = threading.Thread(target=lambda: handed.append(builder.submit_built(third, charged.append)))
        handing.start()
        handing.join(WAIT_S)
        assert handed == [None]  # nothing handed over
        ingestor.go.set()
        assert written.result(timeout=WAIT_S) == first.live == 1
        assert waiting.result(timeout=WAIT_S) == second.live == 1
    finally:
        ingestor.go.set()
        builder.stop()
    assert len(charged) == 2
    assert row_spans_by_project(store) == {"first": 10, "second": 10}
    store.close()


def _trace(project: str, number: int) -> TraceToBuild:
    spans = export(project, number)
    return TraceToBuild(spans, max(span.start_ns for span in spans) // 1_000)


class RefusedWrites(Ingestor):
    """The real ingestor; its first write of built rows is refused, as by a ClickHouse that is down."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.refusals = 1

    def write_built(self, built: BuiltRows) -> None:
        if self.refusals:
            self.refusals -= 1
            raise StorageError("refused for the test")
        super().write_built(built)


def test_rows_handed_over_that_fail_to_write_are_logged_and_the_thread_goes_on(
    held: tuple[Store, Settings], caplog: pytest.LogCaptureFixture
) -> None:
    """A write of handed-over rows that fails loses no span (they are stored before): the failure
    is logged, its CPU time still charged, and the next hand-over is written."""
    store, _ = held
    builder = RowBuilder(RefusedWrites(store), lambda todo, cpu_s: None)
    builder.start()
    charged: list[float] = []
    try:
        refused = builder.submit_built(build_rows([_trace("refused", 0)]), charged.append)
        assert refused is not None
        with pytest.raises(StorageError):
            refused.result(timeout=WAIT_S)
        written = builder.submit_built(build_rows([_trace("written", 0)]), charged.append)
        assert written is not None and written.result(timeout=WAIT_S) == 1
    finally:
        builder.stop()
    assert len(charged) == 2
    assert "writing the request rows of 10 spans failed" in caplog.text
    assert row_spans_by_project(store) == {"written": 10}
    store.close()
