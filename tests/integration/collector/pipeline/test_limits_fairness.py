"""Issue 15, item 2: one project's load cannot starve another's. Two projects, one flooding: the
flood is refused at its share of the queue while the other project still gets in, and the writer
writes the other project's export in the second insert (the flood's turn is a quarter of a batch
while another project waits) rather than after the flood, with flood exports riding along only
while that insert stays small; one large export is written in pieces between the other's turns.

The real pipeline (queue, single writer thread, ingestor) on the session's chdb. The writer is
held the way a receiver holds it while it decodes an export of the project first in turn
(:meth:`Pipeline.decoding`, with a long linger), so that project's exports queue up; the other
project's export, once queued, lets it go (nobody waits for a linger on another's behalf).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

import pytest
from pipeline_helpers import export, row_spans_by_project, stored_spans_by_project

from latencylens_collector.pipeline import Outcome, Pipeline, QueueFull
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.settings import Settings
from latencylens_collector.storage.store import Store


def test_a_flooding_project_does_not_starve_another(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(
        max_queue_spans=2_000, queue_project_share=0.5, max_batch_spans=1_200, flush_interval_ms=60_000
    )
    store = Store(settings)
    store.migrate()
    pipeline = Pipeline(settings, Ingestor(store))
    pipeline.start()
    done: list[str] = []

    def track(future: Future[Outcome], name: str) -> Future[Outcome]:
        future.add_done_callback(lambda _: done.append(name))
        return future

    try:
        with pipeline.decoding("flood"):  # the writer lingers for this "export being decoded"
            accepted = []
            for number in range(12):
                try:
                    accepted.append(track(pipeline.submit(export("flood", number, 100)), f"flood {number}"))
                except QueueFull as exc:
                    assert "ingest queue full for project 'flood'" in str(exc)
                    break
            assert len(accepted) == 10  # its share: 1,000 of 2,000 spans
            with pytest.raises(QueueFull):
                pipeline.check_room("flood")
            quiet = track(pipeline.submit(export("quiet", 0)), "quiet")
            assert pipeline.queue.held("quiet") == (10, pipeline.queue.held("quiet")[1])
        outcomes = [future.result(timeout=60) for future in [*accepted, quiet]]
    finally:
        pipeline.stop()
    assert set(outcomes) == {Outcome.STORED}
    # Inserts: the flood's turn (300 of 1,200 spans: a quarter while "quiet" waits); "quiet" with
    # two flood exports riding along (10 + 100 + 100 ≤ 1,200 // 4 = 300); the rest of the flood.
    assert done == [f"flood {n}" for n in range(3)] + ["quiet"] + [f"flood {n}" for n in range(3, 10)]
    assert stored_spans_by_project(store) == {"flood": 1_000, "quiet": 10}
    store.close()


def test_a_large_export_is_written_in_pieces_around_another_projects(
    make_settings: Callable[..., Settings],
) -> None:
    """One 1,000-span trace and another project's 10-span export, batches of 1,200 spans: the
    trace goes in a 300-span piece (1,200 // 4), then the other export in its own insert, then
    the rest of the trace in pieces; it is answered once, after its last piece, and stored whole."""
    settings = make_settings(max_batch_spans=1_200, flush_interval_ms=60_000)
    store = Store(settings)
    store.migrate()
    ingestor = Ingestor(store)
    pipeline = Pipeline(settings, ingestor)
    pipeline.start()
    done: list[str] = []
    try:
        with pipeline.decoding("big"):
            big = pipeline.submit(export("big", 0, 1_000))
            big.add_done_callback(lambda _: done.append("big"))
            quiet = pipeline.submit(export("quiet", 0))
            quiet.add_done_callback(lambda _: done.append("quiet"))
        outcomes = [big.result(timeout=60), quiet.result(timeout=60)]
    finally:
        pipeline.stop()
    assert outcomes == [Outcome.STORED, Outcome.STORED]
    assert done == ["quiet", "big"]
    assert stored_spans_by_project(store) == {"big": 1_000, "quiet": 10}
    # The trace's row was built once, with its last piece, from the export's spans in memory:
    # nothing was read back (piece by piece it would have read 300 + 600 + 900 spans).
    assert ingestor.spans_read_back == 0
    assert row_spans_by_project(store) == {"big": 1_000, "quiet": 10}
    store.close()


def test_traces_cut_between_pieces_get_their_whole_rows(make_settings: Callable[..., Settings]) -> None:
    """Three traces of 400 spans in one export, written in 300-span pieces while another project
    waits: pieces end inside each trace (at spans 300, 600, 900), yet every trace's row counts its
    400 spans and no piece reads a trace back."""
    settings = make_settings(max_batch_spans=1_200, flush_interval_ms=60_000)
    store = Store(settings)
    store.migrate()
    ingestor = Ingestor(store)
    pipeline = Pipeline(settings, ingestor)
    pipeline.start()
    try:
        with pipeline.decoding("big"):
            big = pipeline.submit([span for n in range(3) for span in export("big", n, 400)])
            quiet = pipeline.submit(export("quiet", 0))
        assert [big.result(timeout=60), quiet.result(timeout=60)] == [Outcome.STORED, Outcome.STORED]
    finally:
        pipeline.stop()
    rows = store.query(
        f"SELECT trace_id, span_count FROM {store.database}.requests FINAL "
        "WHERE project = 'big' AND is_deleted = 0 ORDER BY trace_id"
    )
    assert [int(row["span_count"]) for row in rows] == [400, 400, 400]
    assert ingestor.spans_read_back == 0
    store.close()
