"""Versioned ClickHouse DDL: find the ``NNNN_name.sql`` files, apply the pending ones, record each.

Safe to run twice and from several processes: every statement is ``IF NOT EXISTS`` and applied
versions are recorded in ``schema_migrations``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from latencylens_collector.storage import Store

_FILE_NAME = re.compile(r"^(\d{4})_([A-Za-z0-9_]+)\.sql$")
_STATEMENT_END = re.compile(r";\s*$", re.MULTILINE)
DATABASE_PLACEHOLDER = "{database}"

_SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS {database}.schema_migrations
(
    version UInt32,
    name String,
    applied_at DateTime64(6, 'UTC') DEFAULT now64(6)
)
ENGINE = MergeTree
ORDER BY version
"""


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


def _has_code(chunk: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in chunk.splitlines())


def migrations_dir() -> Path:
    """Package data when installed as a wheel, else the repository's ``migrations/``."""
    here = Path(__file__).resolve().parent
    packaged = here / "_migrations"
    if packaged.is_dir():
        return packaged
    return here.parents[1] / "migrations"


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


def applied_versions(store: Store) -> set[int]:
    rows = store.query(f"SELECT DISTINCT version FROM {store.database}.schema_migrations")
    return {int(row["version"]) for row in rows}


def apply_migrations(store: Store, directory: Path | None = None) -> list[Migration]:
    """Create the database and bookkeeping table, apply pending migrations in order."""
    migrations = load_migrations(directory)
    store.command(f"CREATE DATABASE IF NOT EXISTS {store.database}")
    store.command(_SCHEMA_MIGRATIONS.format(database=store.database))
    done = applied_versions(store)
    applied = []
    for migration in migrations:
        if migration.version in done:
            continue
        for statement in migration.statements(store.database):
            store.command(statement)
        store.insert("schema_migrations", [[migration.version, migration.name]], ["version", "name"])
        applied.append(migration)
    return applied
