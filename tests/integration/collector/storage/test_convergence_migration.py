"""Migration 0015 on a database with request rows: they are kept, versioned by their span count
and computation time, and the rollup's view follows the table to its new engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from migration_support import store_migrated_up_to

from latencylens_collector.analysis.request_rows import row_version
from latencylens_collector.settings import Settings
from latencylens_collector.storage.migrations import apply_migrations

COMPUTED_AT_US = 1_790_000_000_123_456  # 2026-09-21, µs
START = "2026-09-21 10:00:00.000000001"


def test_rows_stored_before_0015_are_kept_and_versioned(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    store = store_migrated_up_to(make_settings(), 14, tmp_path)
    db = store.database
    store.command(
        f"INSERT INTO {db}.requests (trace_id, start_time, e2e_ns, span_count, computed_at) VALUES "
        f"(unhex('0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a'), '{START}', 1000, 4, "
        f"fromUnixTimestamp64Micro({COMPUTED_AT_US}))"
    )

    applied = apply_migrations(store)
    assert [m.version for m in applied if m.version <= 16] == [15, 16]
    [row] = store.query(
        f"SELECT e2e_ns, span_count, version, is_deleted, root_missing FROM {db}.requests FINAL"
    )
    # 4 spans in the high bits, the computation's ms since 2020-01-01 in the low 42.
    assert row == {
        "e2e_ns": 1000,
        "span_count": 4,
        "version": row_version(4, COMPUTED_AT_US),
        "is_deleted": 0,
        "root_missing": 0,
    }
    assert row_version(4, COMPUTED_AT_US) == (4 << 42) + (1_790_000_000_123 - 1_577_836_800_000)
    assert store.query(f"SELECT count() AS n FROM {db}.requests_before_0015") == [{"n": 1}]

    # The rollup's view was made again on the new table: an insert there marks its hour touched.
    store.command(f"TRUNCATE TABLE {db}.requests_touched")
    store.command(
        f"INSERT INTO {db}.requests (trace_id, start_time, version) VALUES "
        f"(unhex('0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b'), '{START}', 7)"
    )
    touched = store.query(f"SELECT toString(hour) AS hour FROM {db}.requests_touched")
    assert touched == [{"hour": "2026-09-21 10:00:00"}]
    assert apply_migrations(store) == []  # and a second run finds nothing to do
