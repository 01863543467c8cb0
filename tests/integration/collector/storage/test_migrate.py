from __future__ import annotations

from collections.abc import Callable

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.analysis.records import REQUEST_COLUMNS, SPAN_COLUMNS
from latencylens_collector.settings import Settings
from latencylens_collector.storage.migrations import apply_migrations, load_migrations, migrations_dir
from latencylens_collector.storage.store import Store


def _columns(store: Store, table: str) -> list[str]:
    return [row["name"] for row in store.query(f"DESCRIBE TABLE {store.database}.{table}")]


def test_migration_files_are_found_in_order() -> None:
    migrations = load_migrations()
    assert migrations_dir().name in ("migrations", "_migrations")
    assert [(m.version, m.name) for m in migrations][:2] == [(1, "spans"), (2, "requests")]


def test_migrations_are_idempotent(make_settings: Callable[..., Settings]) -> None:
    store = Store(make_settings())
    first = apply_migrations(store)
    second = apply_migrations(store)
    assert [m.version for m in first] == [m.version for m in load_migrations()]
    assert second == []
    rows = store.query(
        f"SELECT version, count() AS n FROM {store.database}.schema_migrations "
        "GROUP BY version ORDER BY version"
    )
    assert [(row["version"], row["n"]) for row in rows] == [(m.version, 1) for m in load_migrations()]


def test_tables_match_the_row_shapes(store: Store) -> None:
    spans = _columns(store, "spans")
    assert set(SPAN_COLUMNS) <= set(spans)
    requests = _columns(store, "requests")
    assert set(REQUEST_COLUMNS) <= set(requests)
    for name in COMPONENTS:
        assert f"{name}_ns" in requests
        assert f"busy_{name}_ns" in requests
