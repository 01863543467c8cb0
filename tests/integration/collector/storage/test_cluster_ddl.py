"""DDL for a single server and for a cluster (pure rendering), and retention as TTL (real chdb)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from latencylens_collector.settings import Settings
from latencylens_collector.storage import otlp_sql
from latencylens_collector.storage.ddl import (
    Topology,
    current_ttl,
    render,
    retention_statement,
    rows_table,
    schema_migrations_table,
)
from latencylens_collector.storage.migrations import (
    apply_migrations,
    apply_retention,
    load_migrations,
    topology_of,
)
from latencylens_collector.storage.store import Store

GOLDEN = Path(__file__).resolve().parents[3] / "fixtures" / "cluster_migrations_0001_0003.sql"
CLUSTER_ENV = "LATENCYLENS_TEST_CLICKHOUSE_CLUSTER"


def rendered(topology: Topology, up_to: int | None = None) -> list[str]:
    return [
        statement
        for migration in load_migrations()
        if up_to is None or migration.version <= up_to
        for statement in migration.rendered(topology)
    ]


def test_single_server_statements_are_the_files_unchanged() -> None:
    topology = Topology("latencylens")
    for migration in load_migrations():
        assert migration.rendered(topology) == migration.statements("latencylens")
    assert "ENGINE = MergeTree\n" in schema_migrations_table(topology)
    assert "ON CLUSTER" not in schema_migrations_table(topology)


def test_cluster_statements_match_the_golden_file() -> None:
    topology = Topology("latencylens", "main")
    statements = [schema_migrations_table(topology), *rendered(topology, up_to=3)]
    assert "".join(statement + ";\n\n" for statement in statements) == GOLDEN.read_text()


def test_cluster_tables_are_replicated_locals_behind_distributed_fronts() -> None:
    statements = rendered(Topology("ll", "prod"), up_to=2)
    assert len(statements) == 4
    local, front = statements[0], statements[1]
    assert local.startswith("CREATE TABLE IF NOT EXISTS ll.spans_local ON CLUSTER prod\n(")
    assert (
        "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/ll/spans_local', '{replica}', "
        "inserted_at)\nPARTITION BY toYYYYMMDD(start_time)\nORDER BY (project, trace_id, span_id)"
    ) in local
    assert "--" not in local  # comments dropped
    assert front == (
        "CREATE TABLE IF NOT EXISTS ll.spans ON CLUSTER prod AS ll.spans_local\n"
        "ENGINE = Distributed(prod, ll, spans_local, cityHash64(trace_id))"
    )


def test_every_migration_renders_for_a_cluster() -> None:
    """A migration the cluster renderer cannot handle fails here, not on someone's cluster."""
    statements = rendered(Topology("latencylens", "main"))
    # The rollup's view reads and feeds local tables; its backfill runs once, through the fronts.
    view = next(s for s in statements if "requests_touched_mv" in s)
    assert "TO latencylens.requests_touched_local AS" in view
    assert "FROM latencylens.requests_local" in view
    backfill = next(s for s in statements if s.startswith("INSERT INTO"))
    assert backfill.startswith("INSERT INTO latencylens.requests_touched\nSELECT")
    assert "FROM latencylens.requests\n" in backfill


def test_inference_parts_migration_on_a_cluster() -> None:
    """0014's new components: columns on the local and the Distributed tables, codecs on the local
    ones only, and every hour marked touched through the front so its rollup is rebuilt."""
    topology = Topology("latencylens", "main")
    rendered(topology, up_to=13)  # learns which tables are distributed
    (migration,) = [m for m in load_migrations() if m.version == 14]
    statements = migration.rendered(topology)
    heads = [statement.split("\n")[0] for statement in statements]
    assert heads == [
        "ALTER TABLE latencylens.requests_local ON CLUSTER main ADD COLUMN IF NOT EXISTS inference_ns Int64 "
        "AFTER decode_ns,",
        "ALTER TABLE latencylens.requests ON CLUSTER main ADD COLUMN IF NOT EXISTS inference_ns Int64 "
        "AFTER decode_ns,",
        "ALTER TABLE latencylens.requests_local ON CLUSTER main MODIFY COLUMN inference_ns Int64 CODEC(T64),",
        "ALTER TABLE latencylens.requests_rollup_local ON CLUSTER main ADD COLUMN IF NOT EXISTS q_inference "
        "AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64) AFTER q_decode,",
        "ALTER TABLE latencylens.requests_rollup ON CLUSTER main ADD COLUMN IF NOT EXISTS q_inference "
        "AggregateFunction(quantilesBFloat16(0.5, 0.9, 0.95, 0.99), Int64) AFTER q_decode,",
        "INSERT INTO latencylens.requests_touched",
    ]
    for statement in statements[:5]:
        assert "server_other" in statement


def test_rollup_recreated_on_a_cluster() -> None:
    """0020 recreates the rollup with the build in its sorting key: every hour touched through the
    front first, then the front and the local tables dropped (SYNC: the new local table takes the
    same replication path) and both created again, sharded by the new key."""
    topology = Topology("latencylens", "main")
    rendered(topology, up_to=19)
    (migration,) = [m for m in load_migrations() if m.version == 20]
    statements = migration.rendered(topology)
    heads = [statement.split("\n")[0] for statement in statements]
    assert heads == [
        "INSERT INTO latencylens.requests_touched (project, hour, last_insert)",
        "DROP TABLE IF EXISTS latencylens.requests_rollup ON CLUSTER main SYNC",
        "DROP TABLE IF EXISTS latencylens.requests_rollup_local ON CLUSTER main SYNC",
        "CREATE TABLE IF NOT EXISTS latencylens.requests_rollup_local ON CLUSTER main",
        "CREATE TABLE IF NOT EXISTS latencylens.requests_rollup ON CLUSTER main AS "
        "latencylens.requests_rollup_local",
    ]
    assert (
        "ENGINE = ReplicatedReplacingMergeTree("
        "'/clickhouse/tables/{shard}/latencylens/requests_rollup_local', '{replica}')"
    ) in statements[3]
    assert statements[4].endswith(
        "Distributed(main, latencylens, requests_rollup_local, "
        "cityHash64(project, kept, hour, build, service, name, model, provider, has_ttft, has_itl))"
    )
    # Rows are deleted in place where they are stored: the local tables on every node.
    assert rows_table("latencylens", "requests_rollup", "main") == (
        "latencylens.requests_rollup_local ON CLUSTER main"
    )
    assert rows_table("latencylens", "requests_rollup", None) == "latencylens.requests_rollup"
    # A table that is not distributed (none is, before its CREATE) is dropped as named.
    assert render("DROP TABLE IF EXISTS db.gone", Topology("db", "c")) == [
        "DROP TABLE IF EXISTS db.gone ON CLUSTER c SYNC"
    ]


def test_alters_views_and_unknown_statements_on_a_cluster() -> None:
    topology = Topology("db", "c")
    render(
        "CREATE TABLE IF NOT EXISTS db.events\n(\n    id UInt64\n)\nENGINE = MergeTree\nORDER BY id", topology
    )
    assert render("ALTER TABLE db.events ADD COLUMN IF NOT EXISTS x UInt8", topology) == [
        "ALTER TABLE db.events_local ON CLUSTER c ADD COLUMN IF NOT EXISTS x UInt8",
        "ALTER TABLE db.events ON CLUSTER c ADD COLUMN IF NOT EXISTS x UInt8",
    ]
    # A codec concerns stored data, which only the local table holds.
    assert render("ALTER TABLE db.events MODIFY COLUMN id UInt64 CODEC(T64)", topology) == [
        "ALTER TABLE db.events_local ON CLUSTER c MODIFY COLUMN id UInt64 CODEC(T64)"
    ]
    assert render("ALTER TABLE db.events MODIFY TTL toDateTime(t) + toIntervalDay(1)", topology) == [
        "ALTER TABLE db.events_local ON CLUSTER c MODIFY TTL toDateTime(t) + toIntervalDay(1)"
    ]
    assert render(
        "CREATE MATERIALIZED VIEW IF NOT EXISTS db.events_mv TO db.events AS SELECT id FROM db.other",
        topology,
    ) == [
        "CREATE MATERIALIZED VIEW IF NOT EXISTS db.events_mv ON CLUSTER c "
        "TO db.events_local AS SELECT id FROM db.other"
    ]
    # No trace_id: sharded by the sorting key.
    created = render(
        "CREATE TABLE IF NOT EXISTS db.k\n(\n    a UInt8\n)\nENGINE = MergeTree\nORDER BY (a)", topology
    )
    assert created[1].endswith("Distributed(c, db, k_local, cityHash64(a))")
    with pytest.raises(ValueError, match="cannot render this statement for cluster c"):
        render("DROP TABLE db.events", topology)
    with pytest.raises(ValueError, match="not a MergeTree"):
        render("CREATE TABLE IF NOT EXISTS db.m\n(\n    a UInt8\n)\nENGINE = Memory", topology)


def test_retention_statements() -> None:
    single, cluster = Topology("ll"), Topology("ll", "main", distributed={"spans"})
    assert retention_statement("spans", 30, single) == (
        "ALTER TABLE ll.spans MODIFY TTL toDateTime(start_time) + toIntervalDay(30)"
    )
    assert retention_statement("spans", 7, cluster) == (
        "ALTER TABLE ll.spans_local ON CLUSTER main MODIFY TTL toDateTime(start_time) + toIntervalDay(7)"
    )
    assert retention_statement("spans", 0, single) == "ALTER TABLE ll.spans REMOVE TTL"
    assert (
        current_ttl(
            "ReplacingMergeTree(inserted_at) PARTITION BY toYYYYMMDD(start_time) "
            "ORDER BY (project, trace_id, span_id) TTL toDateTime(start_time) + toIntervalDay(30) "
            "SETTINGS index_granularity = 8192"
        )
        == "toDateTime(start_time) + toIntervalDay(30)"
    )
    assert current_ttl("MergeTree ORDER BY v SETTINGS index_granularity = 8192") is None


def _ttl(store: Store, table: str) -> str | None:
    rows = store.query(
        "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = {name:String}",
        {"db": store.database, "name": table},
    )
    return current_ttl(str(rows[0]["engine_full"]))


def test_retention_is_applied_changed_and_removed(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(spans_retention_days=30, requests_retention_days=90)
    store = Store(settings)
    apply_migrations(store)
    assert _ttl(store, "spans") == "toDateTime(start_time) + toIntervalDay(30)"
    assert _ttl(store, "requests") == "toDateTime(start_time) + toIntervalDay(90)"
    # The hourly rollup lives as long as the request rows it summarizes.
    for table in ("requests_rollup", "requests_rollup_builds", "requests_touched"):
        assert _ttl(store, table) == "toDateTime(hour) + toIntervalDay(90)"
    assert apply_retention(store, topology_of(store)) == []  # unchanged: nothing to do

    changed = Store(Settings(**{**_same(settings), "spans_retention_days": 7, "requests_retention_days": 0}))
    assert apply_migrations(changed) == []  # no new migration, only the retention changes
    assert _ttl(changed, "spans") == "toDateTime(start_time) + toIntervalDay(7)"
    assert _ttl(changed, "requests") is None
    assert _ttl(changed, "requests_rollup") is None
    # Expired rows are dropped when ClickHouse applies the TTL (in background merges; forced here
    # by OPTIMIZE): an 8-day-old span (trace "1") goes, a fresh one ("2") stays.
    store.command(
        f"INSERT INTO {store.database}.spans (trace_id, span_id, start_time) "
        "SELECT toFixedString(toString(number), 16), toFixedString('s', 8), "
        "if(number = 1, now64(9) - toIntervalDay(8), now64(9)) FROM numbers(1, 2)"
    )
    store.command(f"OPTIMIZE TABLE {store.database}.spans FINAL")
    rows = store.query(f"SELECT trace_id FROM {store.database}.spans FINAL")
    assert [row["trace_id"].rstrip(b"\x00") for row in rows] == [b"2"]


def _same(settings: Settings) -> dict[str, object]:
    return {
        "clickhouse_dsn": settings.clickhouse_dsn,
        "database": settings.database,
        "host": settings.host,
        "port": settings.port,
        "environ": {},
    }


def test_migrations_and_retention_on_a_server(clickhouse_server_url: str) -> None:
    """Against a real server; with LATENCYLENS_TEST_CLICKHOUSE_CLUSTER also ON CLUSTER."""
    database = f"latencylens_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    cluster = os.environ.get(CLUSTER_ENV) or None
    settings = Settings(
        clickhouse_dsn=clickhouse_server_url,
        database=database,
        clickhouse_cluster=cluster,
        spans_retention_days=14,
        environ={},
    )
    store = Store.connect(settings)
    try:
        assert store.migrate()
        assert store.migrate() == []
        table = "spans_local" if cluster else "spans"
        assert _ttl(store, table) == "toDateTime(start_time) + toIntervalDay(14)"
    finally:
        suffix = f" ON CLUSTER {cluster}" if cluster else ""
        store.command(f"DROP DATABASE IF EXISTS {database}{suffix}")
        store.close()


def test_cluster_statements_parse_in_the_engine(make_settings: Callable[..., Settings]) -> None:
    """Every statement rendered for a cluster (the migrations' and the engine path's views) is
    parsed by ClickHouse's own parser (``formatQuery``, no cluster needed), which also puts
    ``ON CLUSTER`` back where it belongs: a misplaced one would not parse."""
    store = Store(make_settings())
    statements = [*rendered(Topology("latencylens", "main")), *otlp_sql.statements("latencylens", "main")]
    for statement in statements:
        [row] = store.query("SELECT formatQuery({sql:String}) AS formatted", {"sql": statement})
        assert " ON CLUSTER main" in row["formatted"] or statement.startswith("INSERT INTO")
