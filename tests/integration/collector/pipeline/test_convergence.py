"""Request rows converge whatever the collectors saw: generated interleavings over one real store.

Each seed is one deterministic run of three collectors (clocks 60 s ahead, 60 s behind, and one
that steps back a second mid-run) ingesting split traces (plain chat requests, vLLM traces whose
server span arrives last, traces whose upstream root is never exported, traces whose root is
replaced by a longer parentless span) in random batches, with inserts that become visible only
steps later (to their own collector too), collectors that die between the span insert and the row
write, batches replayed with or without their deduplication token, and reconciler passes and rollup
builds at random points. Once everything is visible and each collector's reconciler has run, every
trace has exactly one row, equal to the row of all its spans computed at once, versioned by all of
them; and the rollup is fresh and equals the statistics of the rows.

The deployment guarantee the harness keeps: a row write is visible before the next reconciler pass
(in production: within the settle delay, docs/deployment.md). Span inserts may stay invisible for
any number of steps.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from convergence_support import (
    SHAPES,
    Collector,
    S,
    SharedStore,
    Trace,
    check_converged,
    check_rollup_equals_rows,
    chunks,
    process_clock,
)

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.settings import Settings
from latencylens_collector.storage import rollup
from latencylens_collector.storage.store import Store

SEEDS = range(20)
TRACES_PER_RUN = 5
MINUTE = 60 * S


@pytest.fixture(scope="module")
def shared_store(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One migrated database for every run; runs are apart by project."""
    metadata = Path(tmp_path_factory.mktemp("convergence")) / "metadata.db"
    settings = Settings(
        clickhouse_dsn=chdb_dsn, database="convergence", metadata_url=f"sqlite:///{metadata}", environ={}
    )
    store = Store(settings)
    store.migrate()
    yield store
    store.close()


def interleaved(rng: random.Random, traces: list[Trace]) -> list[list[SpanRow]]:
    """Export batches: every trace's pieces in its own order, traces interleaved at random, one or
    two pieces (of different traces) per batch."""
    queues = [chunks(rng, trace) for trace in traces]
    pieces: list[list[SpanRow]] = []
    while any(queues):
        queue = rng.choice([q for q in queues if q])
        pieces.append(queue.pop(0))
    batches: list[list[SpanRow]] = []
    while pieces:
        take = 2 if len(pieces) > 1 and rng.random() < 0.3 else 1
        batches.append([row for piece in pieces[:take] for row in piece])
        del pieces[:take]
    return batches


@pytest.mark.parametrize("seed", SEEDS)
def test_rows_converge_over_interleavings(shared_store: Store, seed: int) -> None:
    rng = random.Random(seed)
    project = f"run{seed}"
    shared = SharedStore(shared_store)
    collectors = [
        Collector.on(shared, "ahead", 60 * S),
        Collector.on(shared, "behind", -60 * S),
        Collector.on(shared, "stepping", 0),
    ]
    base = time.time_ns() - 30 * MINUTE
    shapes = sorted(SHAPES)
    traces = [
        SHAPES[rng.choice(shapes)](rng, base + index * 7 * S, project) for index in range(TRACES_PER_RUN)
    ]
    batches = interleaved(rng, traces)
    step_back_at = rng.randrange(len(batches))
    # A rollup build costs ~0.5 s of chdb: half the runs check the rollup, half of those build
    # one mid-run too.
    check_rollup = seed % 2 == 0
    build_at = rng.randrange(len(batches)) if seed % 4 == 0 else None
    replays: list[tuple[list[SpanRow], str | None]] = []

    for index, batch in enumerate(batches):
        if index == step_back_at:
            collectors[2].clock_offset_ns -= S  # its clock steps back one second
        collector = rng.choice(collectors)
        collector.store.span_delay = rng.choice([0, 0, 1, 2, 4])
        collector.store.row_delay = rng.choice([0, 0, 1])
        collector.store.die_before_rows = rng.random() < 0.15
        token = uuid.uuid4().hex
        delivered = collector.ingest(batch, token)
        collector.store.die_before_rows = False
        if not delivered and rng.random() < 0.5:
            replays.append((batch, token))  # the exporter retries (same token), maybe elsewhere
        elif rng.random() < 0.15:
            replays.append((batch, rng.choice([token, None])))  # delivered twice
        if replays and rng.random() < 0.4:
            again, again_token = replays.pop(0)
            rng.choice(collectors).ingest(again, again_token)
        shared.advance()
        if rng.random() < 0.3:
            shared.release("rows")
            rng.choice(collectors).reconcile()
        if index == build_at:  # a rollup built mid-run by the collector whose clock is ahead
            with process_clock(collectors[0].clock_offset_ns):
                rollup.refresh(collectors[0].store, settle_s=0)

    for again, again_token in replays:
        rng.choice(collectors).ingest(again, again_token)
    shared.release()
    for collector in collectors:
        collector.reconcile()
    shared.release()  # the last passes' own writes

    check_converged(shared_store, project, traces)
    if check_rollup:
        with process_clock(collectors[0].clock_offset_ns):  # the clock 60 s ahead builds the rollup
            rollup.refresh(shared_store, settle_s=0)
        check_rollup_equals_rows(shared_store, project)
