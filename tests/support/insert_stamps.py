"""Insert stamps as another clock would have made them, for the rollup's freshness tests."""

from __future__ import annotations

from latencylens_collector.storage.store import Store


def move_insert_stamps_back(store: Store, seconds: int) -> None:
    """Every ``requests_touched`` stamp ``seconds`` earlier, the counts of inserted rows kept: what
    a server whose clock is that far behind the builder's would have stamped."""
    db = store.database
    store.command(
        f"CREATE TABLE {db}.touched_behind ENGINE = Memory AS SELECT project, hour, "
        f"max(last_insert) - toIntervalSecond({int(seconds)}) AS last_insert, "
        f"sum(inserted_rows) AS inserted_rows FROM {db}.requests_touched GROUP BY project, hour"
    )
    store.command(f"TRUNCATE TABLE {db}.requests_touched")
    store.command(f"INSERT INTO {db}.requests_touched SELECT * FROM {db}.touched_behind")
    store.command(f"DROP TABLE {db}.touched_behind")
