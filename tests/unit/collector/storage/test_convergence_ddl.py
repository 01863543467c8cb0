"""Migrations 0015 (requests versioned by spans), 0016 (touched traces) and 0019 (the rollup's
insert counts) on a cluster (pure)."""

from __future__ import annotations

from latencylens_collector.storage.ddl import Topology
from latencylens_collector.storage.migrations import load_migrations


def rendered(topology: Topology, version: int) -> list[str]:
    for migration in load_migrations():
        statements = migration.rendered(topology)  # earlier ones teach the topology its tables
        if migration.version == version:
            return statements
    raise AssertionError(version)


def test_the_requests_engine_is_swapped_under_its_name_on_every_node() -> None:
    topology = Topology("ll", "main")
    heads = [statement.split("\n")[0] for statement in rendered(topology, 15)]
    assert heads == [
        "CREATE TABLE IF NOT EXISTS ll.requests_0015_local ON CLUSTER main",
        "CREATE TABLE IF NOT EXISTS ll.requests_0015 ON CLUSTER main AS ll.requests_0015_local",
        "INSERT INTO ll.requests_0015 (",
        # The local tables change names; a Distributed table names its local one, so the fronts
        # are dropped (they hold no data) and made again over the renamed tables.
        "RENAME TABLE ll.requests_local TO ll.requests_before_0015_local, "
        "ll.requests_0015_local TO ll.requests_local ON CLUSTER main",
        "DROP TABLE IF EXISTS ll.requests ON CLUSTER main SYNC",
        "DROP TABLE IF EXISTS ll.requests_0015 ON CLUSTER main SYNC",
        "CREATE TABLE IF NOT EXISTS ll.requests_before_0015 ON CLUSTER main AS ll.requests_before_0015_local",
        "CREATE TABLE IF NOT EXISTS ll.requests ON CLUSTER main AS ll.requests_local",
        "DROP VIEW IF EXISTS ll.requests_touched_mv ON CLUSTER main",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS ll.requests_touched_mv ON CLUSTER main TO "
        "ll.requests_touched_local AS",
        "INSERT INTO ll.requests_touched",
    ]
    statements = rendered(Topology("ll", "main"), 15)
    assert (
        "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/ll/requests_0015_local', "
        "'{replica}', version, is_deleted)"
    ) in statements[0]
    assert statements[7].endswith("ENGINE = Distributed(main, ll, requests_local, cityHash64(trace_id))")
    assert "FROM ll.requests_local" in statements[9]


def test_touched_traces_are_fed_from_each_nodes_own_span_inserts() -> None:
    create_local, create_front, view = rendered(Topology("ll", "main"), 16)
    assert (
        "ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/ll/traces_touched_local'" in create_local
    )
    # Sharded by trace id like spans, so a node's view writes its touches where its spans are.
    assert create_front.endswith("ENGINE = Distributed(main, ll, traces_touched_local, cityHash64(trace_id))")
    assert "TO ll.traces_touched_local AS" in view and "FROM ll.spans_local" in view


def test_a_single_server_runs_the_files_as_written() -> None:
    topology = Topology("ll")
    assert rendered(topology, 15)[2] == (
        "RENAME TABLE ll.requests TO ll.requests_before_0015,\n    ll.requests_0015 TO ll.requests"
    )


def test_insert_counts_are_added_everywhere_and_counted_on_each_nodes_own_inserts() -> None:
    """0019: the new columns on the local and the Distributed tables; the view, made again, counts
    the rows each node's local table receives; every hour marked touched once, through the front."""
    heads = [statement.split("\n")[0] for statement in rendered(Topology("ll", "main"), 19)]
    assert heads == [
        "ALTER TABLE ll.requests_touched_local ON CLUSTER main ADD COLUMN IF NOT EXISTS inserted_rows "
        "SimpleAggregateFunction(sum, UInt64) AFTER last_insert",
        "ALTER TABLE ll.requests_touched ON CLUSTER main ADD COLUMN IF NOT EXISTS inserted_rows "
        "SimpleAggregateFunction(sum, UInt64) AFTER last_insert",
        "ALTER TABLE ll.requests_rollup_builds_local ON CLUSTER main ADD COLUMN IF NOT EXISTS inserted_rows "
        "UInt64 AFTER covers_until",
        "ALTER TABLE ll.requests_rollup_builds ON CLUSTER main ADD COLUMN IF NOT EXISTS inserted_rows "
        "UInt64 AFTER covers_until",
        "DROP VIEW IF EXISTS ll.requests_touched_mv ON CLUSTER main",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS ll.requests_touched_mv ON CLUSTER main TO "
        "ll.requests_touched_local AS",
        "INSERT INTO ll.requests_touched (project, hour, last_insert)",
    ]
    view = rendered(Topology("ll", "main"), 19)[5]
    assert "count() AS inserted_rows" in view and "FROM ll.requests_local" in view
