"""Migration 0020 on a database whose rollup was built before it: no query trusts those builds
once it ran (the table is recreated empty), every hour is rebuilt, and from then on the rows of a
build without a record cannot replace, in a merge, those of the build its hour's record names."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from migration_support import store_migrated_up_to
from queries_data import S, request_row

from latencylens_collector import queries
from latencylens_collector.queries._sources import plan
from latencylens_collector.queries.scope import NO_FILTERS
from latencylens_collector.queries.times import window
from latencylens_collector.settings import Settings
from latencylens_collector.storage import rollup
from latencylens_collector.storage.migrations import apply_migrations
from latencylens_collector.storage.store import Store

HOUR = 3600 * S


def rolled_hours(store: Store, since_ns: int, until_ns: int) -> tuple[int, ...]:
    span = window(datetime.now(timezone.utc), str(since_ns / 1e9), str(until_ns / 1e9))
    return plan(store, "default", [span], ["model"], NO_FILTERS, rollup="always").hours


def model_counts(store: Store, since_ns: int, until_ns: int, rollup_use: str) -> dict[str, int]:
    result = queries.stats(
        store,
        "default",
        now=datetime.now(timezone.utc),
        since=str(since_ns / 1e9),
        until=str(until_ns / 1e9),
        by=["model"],
        rollup=rollup_use,  # type: ignore[arg-type]
    )
    return {g.key["model"]: g.count for g in result.groups}


def test_builds_before_0020_are_dropped_and_rebuilt_apart(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    store = store_migrated_up_to(make_settings(), 19, tmp_path)
    db = store.database
    h0 = (time.time_ns() // HOUR - 3) * HOUR  # two closed hours, h0 and h0 + 1 h
    # 30 requests: 15 in each hour, models m0, m1, m2 in turn (5 of each per hour).
    rows = [
        request_row(n + 1, h0 + (n % 2) * HOUR + n * 60 * S, {"decode": 100 + n}, model=f"m{n % 3}")
        for n in range(30)
    ]
    store.upsert_requests(rows)
    assert len(rollup.refresh(store, settle_s=0)) == 2
    until = h0 + 2 * HOUR
    assert len(rolled_hours(store, h0, until)) == 2
    assert model_counts(store, h0, until, "always") == {"m0": 10, "m1": 10, "m2": 10}

    assert 20 in [m.version for m in apply_migrations(store)]
    # The old builds' records remain, but every hour is touched after them: rows are read.
    assert store.query(f"SELECT count() AS n FROM {db}.requests_rollup") == [{"n": 0}]
    assert rolled_hours(store, h0, until) == ()
    assert model_counts(store, h0, until, "always") == {"m0": 10, "m1": 10, "m2": 10}

    assert len(rollup.refresh(store, settle_s=0)) == 2
    assert len(rolled_hours(store, h0, until)) == 2
    # A build of hour h0 cut between its two inserts: its rows (each count doubled) but no record.
    # Forced merges must leave the recorded build's rows in place.
    store.command(
        f"INSERT INTO {db}.requests_rollup SELECT * REPLACE (build + 1 AS build, requests * 2 AS requests) "
        f"FROM {db}.requests_rollup WHERE hour = toDateTime({{h:UInt32}}, 'UTC')",
        {"h": h0 // S},
    )
    store.command(f"OPTIMIZE TABLE {db}.requests_rollup FINAL")
    assert len(rolled_hours(store, h0, until)) == 2
    assert model_counts(store, h0, until, "always") == {"m0": 10, "m1": 10, "m2": 10}
    assert apply_migrations(store) == []
