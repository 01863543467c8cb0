"""Migration 0018 on a database with request rows: rows stored before it have no price (NULL, not
$0) and no price version, and every hour is marked touched so its rollup is rebuilt with costs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from migration_support import store_migrated_up_to

from latencylens_collector.settings import Settings
from latencylens_collector.storage.migrations import apply_migrations

START = "2026-09-21 10:20:00.000000001"


def test_rows_stored_before_0018_have_no_price(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    store = store_migrated_up_to(make_settings(), 17, tmp_path)
    db = store.database
    store.command(
        f"INSERT INTO {db}.requests (trace_id, start_time, e2e_ns, span_count, version) VALUES "
        f"(unhex('0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a'), '{START}', 1000, 4, 1)"
    )
    store.command(f"TRUNCATE TABLE {db}.requests_touched")

    assert 18 in [m.version for m in apply_migrations(store)]
    rows = store.query(f"SELECT cost_nano_usd, price_version FROM {db}.requests FINAL")
    assert rows == [{"cost_nano_usd": None, "price_version": ""}]
    touched = store.query(f"SELECT DISTINCT toString(hour) AS hour FROM {db}.requests_touched")
    assert touched == [{"hour": "2026-09-21 10:00:00"}]
    assert apply_migrations(store) == []
