"""Versioned ClickHouse DDL: find the ``NNNN_name.sql`` files, apply the pending ones, record each.

Safe to run twice and from several processes: every statement is ``IF NOT EXISTS`` and applied
versions are recorded in ``schema_migrations``. The statements are rendered for the store's
topology (one server, or a cluster: see :mod:`ddl`), then the configured retention is applied as
TTL whenever it differs from what the tables have. The runner works on anything that runs
statements (:class:`Target`; the store is one), so the store can call it without a circle.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from latencylens_collector.settings import Settings
from latencylens_collector.storage.ddl import (
    Topology,
    current_ttl,
    render,
    retention_statement,
    schema_migrations_table,
    ttl_expression,
)

_FILE_NAME = re.compile(r"^(\d{4})_([A-Za-z0-9_]+)\.sql$")
_STATEMENT_END = re.compile(r";\s*$", re.MULTILINE)
DATABASE_PLACEHOLDER = "{database}"
RETAINED_TABLES: dict[str, tuple[str, str]] = {
    "spans": ("spans_retention_days", "start_time"),
    "requests": ("requests_retention_days", "start_time"),
    "requests_touched": ("requests_retention_days", "hour"),
    "requests_rollup": ("requests_retention_days", "hour"),
    "requests_rollup_builds": ("requests_retention_days", "hour"),
}
"""Table → (the setting giving its retention in days, the time column it expires by). The hourly
rollups live as long as the request rows they summarize."""


class Target(Protocol):
    """Where migrations run: a database, the settings it was opened with, its tables' names in SQL
    (:meth:`Store.table`), and statements."""

    @property
    def database(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    def table(self, name: str) -> str: ...

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None: ...

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]: ...

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        dedup_token: str | None = None,
    ) -> None: ...


@dataclass(frozen=True)
class Migration:
    """One migration file."""

    version: int
    name: str
    path: Path

    def statements(self, database: str) -> list[str]:
        """The file's statements, ``{database}`` replaced, comment-only chunks dropped."""
        sql = self.path.read_text(encoding="utf-8").replace(DATABASE_PLACEHOLDER, database)
        chunks = (chunk.strip() for chunk in _STATEMENT_END.split(sql))
        return [chunk for chunk in chunks if _has_code(chunk)]

    def rendered(self, topology: Topology) -> list[str]:
        """The statements to run on ``topology`` (unchanged on a single server)."""
        statements = self.statements(topology.database)
        return [out for statement in statements for out in render(statement, topology)]


def _has_code(chunk: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in chunk.splitlines())


def migrations_dir() -> Path:
    """Package data when installed as a wheel, else the repository's ``migrations/``."""
    package = Path(__file__).resolve().parents[1]
    packaged = package / "_migrations"
    if packaged.is_dir():
        return packaged
    return package.parents[1] / "migrations"


def load_migrations(directory: Path | None = None) -> list[Migration]:
    """Migration files in version order; rejects two files with one version."""
    directory = directory or migrations_dir()
    if not directory.is_dir():
        raise FileNotFoundError(f"migrations directory not found: {directory}")
    found: dict[int, Migration] = {}
    for path in sorted(directory.iterdir()):
        match = _FILE_NAME.match(path.name)
        if not match:
            continue
        version = int(match.group(1))
        if version in found:
            raise ValueError(
                f"two migrations with version {version}: {found[version].path.name}, {path.name}"
            )
        found[version] = Migration(version, match.group(2), path)
    return [found[v] for v in sorted(found)]


def applied_versions(store: Target) -> set[int]:
    rows = store.query(f"SELECT DISTINCT version FROM {store.table('schema_migrations')}")
    return {int(row["version"]) for row in rows}


def topology_of(store: Target) -> Topology:
    return Topology(store.database, store.settings.clickhouse_cluster)


def apply_migrations(store: Target, directory: Path | None = None) -> list[Migration]:
    """Create the database and bookkeeping table, apply pending migrations in order, then the
    configured retention."""
    migrations = load_migrations(directory)
    topology = topology_of(store)
    for statement in render(f"CREATE DATABASE IF NOT EXISTS {store.database}", topology):
        store.command(statement)
    store.command(schema_migrations_table(topology))
    done = applied_versions(store)
    applied = []
    for migration in migrations:
        statements = migration.rendered(topology)  # rendered even when applied: learns the tables
        if migration.version in done:
            continue
        for statement in statements:
            store.command(statement)
        store.insert("schema_migrations", [[migration.version, migration.name]], ["version", "name"])
        applied.append(migration)
    apply_retention(store, topology)
    return applied


def apply_retention(store: Target, topology: Topology) -> list[str]:
    """Set, change or remove each table's TTL to match the settings; returns the statements run.

    Changing a TTL makes ClickHouse re-evaluate existing parts in the background."""
    run = []
    for table, (setting, column) in RETAINED_TABLES.items():
        days: int = getattr(store.settings, setting)
        rows = store.query(
            "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = {name:String}",
            {"db": store.database, "name": topology.local(table)},
        )
        if not rows or current_ttl(str(rows[0]["engine_full"])) == ttl_expression(days, column):
            continue
        statement = retention_statement(table, days, topology, column)
        store.command(statement)
        run.append(statement)
    return run
