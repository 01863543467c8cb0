"""A large trace arriving in many pieces is not read back whole for every piece: what the write path
reads back is bounded by the span cap, whatever the number of pieces (the issue's 100,000 spans in
2,000-span pieces took 52 s against 3.5 s in one export). Counted in spans read, not timed."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from otlp_builders import new_span_id, new_trace_id, protobuf_body, recent_base_ns, span

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.row_work import ReadBack, build_rows
from latencylens_collector.intake import otlp
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.pipeline.reconciler import Reconciler
from latencylens_collector.pipeline.row_processes import RowProcess
from latencylens_collector.settings import Settings
from latencylens_collector.storage.otlp_sql import BodyLimits
from latencylens_collector.storage.store import Store

CAP = 10
PIECE = 4
TOOLS = 119
"""119 tool spans and the root: 120 spans in 30 pieces of 4, the root in the last."""


def _pieces() -> tuple[int, list[bytes]]:
    """OTLP/protobuf bodies of one trace: a root over ``TOOLS`` tool spans, ``PIECE`` spans a body,
    the root (it ends last) in the last."""
    base = recent_base_ns()
    trace, root = new_trace_id(), new_span_id()
    spans = [
        span(f"tool {i}", trace, new_span_id(), root, base + i * 1000, base + i * 1000 + 500)
        for i in range(TOOLS)
    ]
    spans.append(span("POST /agent", trace, root, None, base, base + TOOLS * 1000 + 1))
    return trace, [protobuf_body(spans[i : i + PIECE]) for i in range(0, len(spans), PIECE)]


@pytest.fixture
def store(make_settings: Callable[..., Settings]) -> Iterator[Store]:
    """A store whose traces are capped at ``CAP`` spans."""
    capped = Store(make_settings(max_trace_spans=CAP))
    capped.migrate()
    yield capped
    capped.close()


def _engine_limits() -> BodyLimits:
    return BodyLimits(recent_base_ns(), 64 * 1024, 1024 * 1024, False, 0)


def _row(store: Store, trace: int, reconcile: bool = True) -> dict[str, Any]:
    """The trace's live request row (after a reconciler pass, unless ``reconcile`` is False)."""
    if reconcile:
        Reconciler(store, settle_s=0, lookback_s=3600).run_once()
    sql = (
        f"SELECT span_count FROM {store.table('requests')} FINAL "
        "WHERE trace_id = unhex({t:String}) AND is_deleted = 0"
    )
    [row] = store.query(sql, {"t": f"{trace:032x}"})
    return row


def _rows_read(read: ReadBack) -> int:
    """Span rows a read-back got from the store, for all its projects."""
    return sum(len(json.loads(part.columns_json)[0]) for part in read.parts)


def _decoded(body: bytes) -> list[SpanRow]:
    limits = otlp.Limits.of(Settings(environ={}), now_ns=recent_base_ns())
    return otlp.decode(body, as_json=False, project="default", limits=limits).spans


def test_pieces_on_the_python_path_are_read_back_only_while_the_trace_is_under_the_cap(store: Store) -> None:
    # Spans without the too_large mark, as after a restart (the in-memory span counts are lost)
    # or when another collector took the earlier pieces: the store's count bounds the reads.
    trace, bodies = _pieces()
    ingestor = Ingestor(store)
    for body in bodies:
        ingestor.ingest(_decoded(body))
    # Piece 1 is the whole trace so far (no read). Pieces 2 and 3 had 4 and 8 spans stored
    # before them (≤ CAP) and are read back with theirs: 8 + 12 = 20 spans. From piece 4 on,
    # 12 or more were stored before (> CAP): no read. Read whole each time, it would be
    # 8 + 12 + ... + 120 = 4 × (2 + 3 + ... + 30) = 1,856 spans.
    assert ingestor.spans_read_back == 20
    assert _row(store, trace)["span_count"] == TOOLS + 1  # the reconciler's row, every span


def test_pieces_on_the_engine_path_are_read_back_only_while_the_trace_is_under_the_cap(store: Store) -> None:
    trace, bodies = _pieces()
    ingestor = Ingestor(store)
    reads: list[int] = []  # rows each piece's read-back got from the store
    for body in bodies:
        stored = ingestor.insert_bodies([("default", body, _engine_limits())], uuid.uuid4().hex)
        [verdict] = stored.verdicts
        assert verdict is not None and verdict.stored_all
        read = ingestor.read_back(stored)
        reads.append(_rows_read(read))
        ingestor.write_built(build_rows(read))
    # The engine path reads back every trace it touched (its spans are not in memory). Pieces 1,
    # 2 and 3 find 4, 8 and 12 spans stored (at most CAP before each): rows built from
    # 4 + 8 + 12 = 24 spans. Piece 4 finds 16, more than CAP + its 4: the read stops at
    # CAP + 4 + 1 = 15 rows, and the trace, past its cap, is read no more. Whole each time:
    # 4 × (1 + 2 + ... + 30) = 1,860 spans.
    assert reads == [4, 8, 12, 15] + [0] * (len(bodies) - 4)
    assert ingestor.spans_read_back == 24
    assert _row(store, trace)["span_count"] == TOOLS + 1


def test_a_trace_found_past_its_cap_is_read_again_by_a_new_ingestor(store: Store) -> None:
    """What a collector remembers of traces past their cap is its own: after a restart (a new
    :class:`Ingestor`) a trace is read once more, in part (``CAP`` + the piece's spans + 1)."""
    _, bodies = _pieces()
    before = Ingestor(store)
    for body in bodies[:-1]:
        before.ingest_bodies([("default", body, _engine_limits())], uuid.uuid4().hex)
    after = Ingestor(store)
    reads = []
    for _ in range(2):
        stored = after.insert_bodies([("default", bodies[-1], _engine_limits())], uuid.uuid4().hex)
        read = after.read_back(stored)
        reads.append(_rows_read(read))
        after.write_built(build_rows(read))
    assert reads == [CAP + PIECE + 1, 0]


def test_the_worker_process_names_the_trace_past_its_cap(store: Store) -> None:
    """The parse that leaves a trace out runs in the row-building process: what it names must
    reach the collector with the rows (laid out as a table there)."""
    trace, bodies = _pieces()
    ingestor = Ingestor(store)
    process = RowProcess()
    try:
        for body in bodies[:4]:  # the fourth finds 16 spans stored: past CAP + its 4
            stored = ingestor.insert_bodies([("default", body, _engine_limits())], uuid.uuid4().hex)
            built = process.start(ingestor.read_back(stored)).result()
            ingestor.write_built(built)
        assert process.fallbacks == 0 and isinstance(built.rows, pa.Table)
        assert built.past_cap == (("default", trace.to_bytes(16, "big")),) and built.spans == 0
        stored = ingestor.insert_bodies([("default", bodies[4], _engine_limits())], uuid.uuid4().hex)
        assert ingestor.read_back(stored).parts == ()
    finally:
        process.stop()


def test_a_trace_in_one_batch_is_still_rowed_at_once_whatever_its_size(store: Store) -> None:
    # Over the cap but arriving whole: nothing was stored before it, so its row is written at once.
    trace, bodies = _pieces()
    Ingestor(store).ingest_bodies([("default", body, _engine_limits()) for body in bodies], uuid.uuid4().hex)
    assert _row(store, trace, reconcile=False) == {"span_count": TOOLS + 1}
