"""Migration 0019 on a database with request rows and a rollup: builds made before it recorded no
count of inserted rows, so every hour is marked touched and rebuilt; rows inserted after it are
counted, and a build records the count it started from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from migration_support import store_migrated_up_to

from latencylens_collector.settings import Settings
from latencylens_collector.storage import rollup
from latencylens_collector.storage.migrations import apply_migrations

HOUR_S = 1_796_457_600  # 2026-12-05 08:00:00 UTC
START = "2026-12-05 08:20:00.000000001"
LATER = "2026-12-05 08:40:00.000000001"


def test_hours_built_before_0019_are_rebuilt_with_the_count(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    store = store_migrated_up_to(make_settings(), 18, tmp_path)
    db = store.database
    store.command(
        f"INSERT INTO {db}.requests (trace_id, start_time, e2e_ns, span_count, version) VALUES "
        f"(unhex('0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a'), '{START}', 1000, 4, 1)"
    )
    # The hour's build as the code before 0019 recorded it: no count, covering every insert so far.
    store.command(
        f"INSERT INTO {db}.requests_rollup_builds (project, hour, build, covers_until, requests) "
        f"SELECT 'default', toDateTime({HOUR_S}, 'UTC'), toUnixTimestamp64Nano(now64(9)), now64(6), 1"
    )
    covered = store.query(
        f"SELECT max(last_insert) < (SELECT max(covers_until) FROM {db}.requests_rollup_builds) AS yes "
        f"FROM {db}.requests_touched"
    )
    assert covered == [{"yes": 1}]

    assert 19 in [m.version for m in apply_migrations(store)]
    assert rollup.stale_hours(store, store.now_ns(), settle_s=0) == [("default", HOUR_S)]

    store.command(
        f"INSERT INTO {db}.requests (trace_id, start_time, e2e_ns, span_count, version) VALUES "
        f"(unhex('0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b'), '{LATER}', 2000, 3, 1),"
        f"(unhex('0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a'), '{START}', 1500, 5, 2)"
    )
    # Both rows of this insert are counted; the one stored before 0019 is not (nothing was then).
    assert store.query(f"SELECT sum(inserted_rows) AS n FROM {db}.requests_touched") == [{"n": 2}]
    assert [b.hour_s for b in rollup.refresh(store, settle_s=0)] == [HOUR_S]
    build = store.query(f"SELECT inserted_rows, requests FROM {db}.requests_rollup_builds FINAL")
    assert build == [{"inserted_rows": 2, "requests": 2}]
    assert rollup.stale_hours(store, store.now_ns(), settle_s=0) == []
    assert apply_migrations(store) == []
