"""ClickHouse DDL for one server or a cluster, rendered by pure functions (testable without either).

Single node: migration statements run as written. Cluster (``LATENCYLENS_CLICKHOUSE_CLUSTER``):
every table ``T`` of the migrations becomes

* ``T_local`` — the data, ``Replicated<Engine>('/clickhouse/tables/{shard}/<db>/T_local', '{replica}', ...)``
  on every node (``ON CLUSTER``);
* ``T`` — a ``Distributed`` table over ``T_local``, sharded by ``cityHash64(trace_id)`` so a trace's
  spans and its request row live on one shard (ReplacingMergeTree collapses duplicates per shard).

The service reads and writes ``T`` whichever the topology, so queries need no change. Column
changes (``ALTER TABLE ... ADD/DROP/MODIFY/RENAME/COMMENT COLUMN``) go to both tables, except
codec changes; other ``ALTER``s (TTL, settings, indexes, codecs) to the local one; materialized
views read and write local tables; ``INSERT … SELECT`` (a backfill) runs once, through the
Distributed tables; ``RENAME TABLE`` renames the local tables and puts new Distributed tables in
front of them (a Distributed table names its local table, so it cannot simply be renamed);
``DROP VIEW IF EXISTS`` drops a view everywhere; ``DROP TABLE IF EXISTS`` drops a table's front,
then its local table everywhere (``SYNC``, so a table created again under that name can take its
replication path). Any other statement is refused for a cluster, so a migration nobody taught this
module fails loudly instead of creating an unreplicated table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

LOCAL_SUFFIX: Final = "_local"
ZOOKEEPER_PREFIX: Final = "/clickhouse/tables/{shard}"
_COMMENT = re.compile(r"--[^\n]*")
_CREATE_DATABASE = re.compile(r"^CREATE DATABASE IF NOT EXISTS (\w+)$")
_CREATE_TABLE = re.compile(r"^CREATE TABLE IF NOT EXISTS (\w+)\.(\w+)\s*(\(.*)$", re.DOTALL)
_ENGINE = re.compile(r"ENGINE\s*=\s*(\w*MergeTree)\b(?:\(([^)]*)\))?")
_ORDER_BY = re.compile(r"\bORDER BY (.+?)\s*(?:\n|$)")
_ALTER_TABLE = re.compile(r"^ALTER TABLE (\w+)\.(\w+)\s+(.*)$", re.DOTALL)
_COLUMN_ACTION = re.compile(r"^(ADD|DROP|MODIFY|RENAME|COMMENT|CLEAR) COLUMN\b", re.IGNORECASE)
_CREATE_VIEW = re.compile(r"^CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+)\.(\w+)\s+(.*)$", re.DOTALL)
_INSERT_SELECT = re.compile(r"^INSERT INTO \w+\.\w+\s.*\bSELECT\b", re.DOTALL)
_RENAME_TABLE = re.compile(r"^RENAME TABLE (.+)$", re.DOTALL)
_RENAME_PAIR = re.compile(r"^(\w+)\.(\w+)\s+TO\s+(\w+)\.(\w+)$")
_DROP_VIEW = re.compile(r"^DROP VIEW IF EXISTS (\w+)\.(\w+)$")
_DROP_TABLE = re.compile(r"^DROP TABLE IF EXISTS (\w+)\.(\w+)$")


@dataclass
class Topology:
    """Where the tables live: one server (``cluster`` None) or a named cluster."""

    database: str
    cluster: str | None = None
    distributed: set[str] = field(default_factory=set)
    """Tables rendered so far as a local + Distributed pair (learnt while rendering, in order)."""
    shard_keys: dict[str, str] = field(default_factory=dict)
    """Sharding expression of each distributed table's front."""

    @property
    def on_cluster(self) -> str:
        return f" ON CLUSTER {self.cluster}" if self.cluster else ""

    def local(self, table: str) -> str:
        """Name of the table holding ``table``'s data on this topology."""
        return table + LOCAL_SUFFIX if self.cluster and table in self.distributed else table


def render(statement: str, topology: Topology) -> list[str]:
    """The statements to run for one migration statement (``{database}`` already substituted)."""
    if not topology.cluster:
        return [statement]
    sql = _strip_comments(statement)
    if match := _CREATE_DATABASE.match(sql):
        return [f"CREATE DATABASE IF NOT EXISTS {match.group(1)}{topology.on_cluster}"]
    if match := _CREATE_TABLE.match(sql):
        return _create_table(match.group(1), match.group(2), match.group(3), topology)
    if match := _ALTER_TABLE.match(sql):
        return _alter_table(match.group(1), match.group(2), match.group(3), topology)
    if match := _CREATE_VIEW.match(sql):
        body = _local_references(match.group(3), match.group(1), topology)
        view = f"{match.group(1)}.{match.group(2)}{topology.on_cluster}"
        return [f"CREATE MATERIALIZED VIEW IF NOT EXISTS {view} {body}"]
    if _INSERT_SELECT.match(sql):
        return [sql]
    if match := _RENAME_TABLE.match(sql):
        return _rename_tables(match.group(1), topology)
    if match := _DROP_VIEW.match(sql):
        return [f"DROP VIEW IF EXISTS {match.group(1)}.{match.group(2)}{topology.on_cluster}"]
    if match := _DROP_TABLE.match(sql):
        return _drop_table(match.group(1), match.group(2), topology)
    raise ValueError(f"cannot render this statement for cluster {topology.cluster}: {sql[:120]!r}")


def _strip_comments(statement: str) -> str:
    lines = (_COMMENT.sub("", line).rstrip() for line in statement.splitlines())
    return "\n".join(line for line in lines if line.strip()).strip()


def _create_table(database: str, table: str, rest: str, topology: Topology) -> list[str]:
    engine = _ENGINE.search(rest)
    if engine is None:
        raise ValueError(f"cannot render {database}.{table} for a cluster: its engine is not a MergeTree")
    local = table + LOCAL_SUFFIX
    args = [f"'{ZOOKEEPER_PREFIX}/{database}/{local}'", "'{replica}'"]
    if engine.group(2):
        args.append(engine.group(2).strip())
    replicated = f"ENGINE = Replicated{engine.group(1)}({', '.join(args)})"
    local_rest = rest[: engine.start()] + replicated + rest[engine.end() :]
    topology.distributed.add(table)
    shard_key = "cityHash64(trace_id)" if re.search(r"\btrace_id\b", rest) else _order_key(rest)
    topology.shard_keys[table] = shard_key
    return [
        f"CREATE TABLE IF NOT EXISTS {database}.{local}{topology.on_cluster}\n{local_rest}",
        _front(database, table, topology),
    ]


def _front(database: str, table: str, topology: Topology) -> str:
    local = table + LOCAL_SUFFIX
    return (
        f"CREATE TABLE IF NOT EXISTS {database}.{table}{topology.on_cluster} AS {database}.{local}\n"
        f"ENGINE = Distributed({topology.cluster}, {database}, {local}, {topology.shard_keys[table]})"
    )


def _local_name(table: str, distributed: bool) -> str:
    return table + LOCAL_SUFFIX if distributed else table


def _rename_tables(pairs_sql: str, topology: Topology) -> list[str]:
    """Rename the local tables (one statement, in order), then replace the fronts: drop the old
    ones (they hold no data) and create one per new name over its local table."""
    pairs = []
    for pair in pairs_sql.split(","):
        match = _RENAME_PAIR.match(pair.strip())
        if match is None:
            raise ValueError(f"cannot render this rename for cluster {topology.cluster}: {pair.strip()!r}")
        pairs.append(match.groups())
    renames = [
        f"{db}.{topology.local(source)} TO {target_db}.{_local_name(target, source in topology.distributed)}"
        for db, source, target_db, target in pairs
    ]
    statements = [f"RENAME TABLE {', '.join(renames)}{topology.on_cluster}"]
    moved = [(db, source, target) for db, source, _, target in pairs if source in topology.distributed]
    keys = {source: topology.shard_keys.pop(source) for _, source, _ in moved}
    for db, source, _ in moved:
        topology.distributed.discard(source)
        statements.append(f"DROP TABLE IF EXISTS {db}.{source}{topology.on_cluster} SYNC")
    for db, source, target in moved:
        topology.distributed.add(target)
        topology.shard_keys[target] = keys[source]
        statements.append(_front(db, target, topology))
    return statements


def _drop_table(database: str, table: str, topology: Topology) -> list[str]:
    """Drop the front first (it holds no data), then the local table."""
    local = topology.local(table)
    topology.distributed.discard(table)
    topology.shard_keys.pop(table, None)
    names = [table] if local == table else [table, local]
    return [f"DROP TABLE IF EXISTS {database}.{name}{topology.on_cluster} SYNC" for name in names]


def _order_key(rest: str) -> str:
    """Shard by the sorting key, so a row and its replacement land on one shard."""
    match = _ORDER_BY.search(rest)
    if match is None:
        return "rand()"
    key = match.group(1).strip()
    return f"cityHash64{key}" if key.startswith("(") else f"cityHash64({key})"


def _alter_table(database: str, table: str, action: str, topology: Topology) -> list[str]:
    if table not in topology.distributed:
        return [f"ALTER TABLE {database}.{table}{topology.on_cluster} {action}"]
    local = f"ALTER TABLE {database}.{topology.local(table)}{topology.on_cluster} {action}"
    if _COLUMN_ACTION.match(action) and "CODEC(" not in action.upper():
        return [local, f"ALTER TABLE {database}.{table}{topology.on_cluster} {action}"]
    # Settings, TTL, indexes and codecs concern stored data: only the local tables hold any.
    return [local]


def _local_references(body: str, database: str, topology: Topology) -> str:
    """``db.T`` → ``db.T_local`` for every distributed table ``T`` (a view reads and feeds local data)."""

    def swap(match: re.Match[str]) -> str:
        return f"{database}.{topology.local(match.group(1))}"

    return re.sub(rf"\b{re.escape(database)}\.(\w+)\b", swap, body)


# --- retention -----------------------------------------------------------------------------------
def ttl_expression(days: int, column: str = "start_time") -> str | None:
    """The TTL of a table kept ``days`` days after ``column``, as ClickHouse prints it back; None
    keeps rows forever."""
    return f"toDateTime({column}) + toIntervalDay({days})" if days > 0 else None


def retention_statement(table: str, days: int, topology: Topology, column: str = "start_time") -> str:
    """``MODIFY TTL`` (or ``REMOVE TTL`` for 0 days) on the table that holds ``table``'s data."""
    target = f"{topology.database}.{topology.local(table)}{topology.on_cluster}"
    expression = ttl_expression(days, column)
    if expression is None:
        return f"ALTER TABLE {target} REMOVE TTL"
    return f"ALTER TABLE {target} MODIFY TTL {expression}"


def current_ttl(engine_full: str) -> str | None:
    """The TTL expression in ``system.tables.engine_full``, or None."""
    match = re.search(r"\bTTL (.+?)(?: SETTINGS |$)", engine_full)
    return match.group(1).strip() if match else None


def rows_table(database: str, table: str, cluster: str | None) -> str:
    """Where a statement that deletes stored rows in place runs: the table on one server; on a
    cluster, its local tables everywhere (a Distributed table takes no ``DELETE``)."""
    if cluster is None:
        return f"{database}.{table}"
    return f"{database}.{table}{LOCAL_SUFFIX} ON CLUSTER {cluster}"


# --- bookkeeping ---------------------------------------------------------------------------------
def schema_migrations_table(topology: Topology) -> str:
    """The table recording applied versions. On a cluster every node holds the same rows (one
    replication group across shards), so any node knows what was applied."""
    if topology.cluster:
        engine = (
            f"ReplicatedMergeTree('/clickhouse/tables/all/{topology.database}/schema_migrations', "
            "'{shard}-{replica}')"
        )
    else:
        engine = "MergeTree"
    return (
        f"CREATE TABLE IF NOT EXISTS {topology.database}.schema_migrations{topology.on_cluster}\n"
        "(\n"
        "    version UInt32,\n"
        "    name String,\n"
        "    applied_at DateTime64(6, 'UTC') DEFAULT now64(6)\n"
        ")\n"
        f"ENGINE = {engine}\n"
        "ORDER BY version"
    )
