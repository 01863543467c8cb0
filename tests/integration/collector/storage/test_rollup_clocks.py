"""The rollup under clocks that disagree, over generated runs: request rows inserted (new traces and
recomputed ones), hours rebuilt, and the insert stamps moved back by up to an hour at random
moments, as a server whose clock is behind the builder's (or a clock stepped back) would have
stamped them. After every step, each hour the planner takes from the rollup holds exactly what the
rows of that hour hold; at the end, one refresh makes every hour usable again."""

from __future__ import annotations

import random
import time
from datetime import datetime, timezone

import pytest
from insert_stamps import move_insert_stamps_back
from queries_data import S, request_row

from latencylens_collector.queries._sources import plan
from latencylens_collector.queries.scope import NO_FILTERS
from latencylens_collector.queries.times import window
from latencylens_collector.storage import rollup
from latencylens_collector.storage.store import Store

HOUR = 3600 * S
STEPS = 30


def _rolled(store: Store, h0: int) -> tuple[int, ...]:
    """Hours the planner takes from the rollup, after checking each against the rows."""
    now = datetime.now(timezone.utc)
    source = plan(
        store,
        "default",
        [window(now, str(h0 / 1e9), str((h0 + 2 * HOUR) / 1e9))],
        [],
        NO_FILTERS,
        rollup="always",
    )
    db = store.database
    for hour_s in source.hours:
        params = {"h": hour_s, "builds": list(source.builds)}
        from_rollup = store.query(
            f"SELECT sum(requests) AS n, sum(sum_e2e) AS e2e FROM {db}.requests_rollup "
            "WHERE project = 'default' AND kept = 0 AND hour = toDateTime({h:UInt32}, 'UTC') "
            "AND build IN {builds:Array(UInt64)}",
            params,
        )
        from_rows = store.query(
            f"SELECT count() AS n, sum(e2e_ns) AS e2e FROM {db}.requests FINAL WHERE project = 'default' "
            "AND start_time >= toDateTime({h:UInt32}, 'UTC') "
            "AND start_time < toDateTime({h:UInt32} + 3600, 'UTC')",
            params,
        )
        assert from_rollup == from_rows, (hour_s, from_rollup, from_rows)
    return source.hours


@pytest.mark.parametrize("seed", range(4))
def test_no_stale_hour_is_read_from_the_rollup_whatever_the_stamps(store: Store, seed: int) -> None:
    rng = random.Random(seed)
    h0 = (time.time_ns() // HOUR - 5) * HOUR
    computed_us = time.time_ns() // 1000
    starts: dict[int, int] = {}  # trace → its start (a recomputed row keeps it)

    def insert(hour: int | None = None) -> None:
        nonlocal computed_us
        rows = []
        for _ in range(rng.randint(1, 3)):
            if hour is None and starts and rng.random() < 0.5:
                n = rng.choice(sorted(starts))  # a recomputed trace: a newer version, another e2e
            else:
                n = len(starts) + 1
                starts[n] = (
                    h0 + (hour if hour is not None else rng.randrange(2)) * HOUR + rng.randrange(3500) * S
                )
            computed_us += 1
            rows.append(
                request_row(n, starts[n], {"decode": rng.randint(10, 5000)}, computed_at_us=computed_us)
            )
        store.upsert_requests(rows)

    insert(0)
    insert(1)
    used: set[int] = set()
    for _ in range(STEPS):
        step = rng.random()
        if step < 0.45:
            insert()
        elif step < 0.8:
            rollup.refresh(store, settle_s=0)
        else:
            move_insert_stamps_back(store, rng.randint(1, 3600))
        used.update(_rolled(store, h0))
    assert used  # the runs do read the rollup, so the checks above compared something
    rollup.refresh(store, settle_s=0)
    assert _rolled(store, h0) == (h0 // S, (h0 + HOUR) // S)
