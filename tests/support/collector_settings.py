"""Settings of a collector under test: its own database in the session's chdb, its own metadata
file, free ports, no background reconciler unless asked. Shared by the ``make_settings`` fixture and
by module-scoped services that cannot use a function-scoped fixture."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from latencylens_collector.settings import Settings


def collector_settings(chdb_dsn: str, database: str, folder: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "clickhouse_dsn": chdb_dsn,
        "database": database,
        # Keys and SLOs of each test in its own SQLite file, never the working folder's.
        "metadata_url": f"sqlite:///{folder / 'metadata.db'}",
        "host": "127.0.0.1",
        "port": 0,
        "grpc_port": 0,  # OTLP/gRPC on a free port too, never the shared 4317
        # No background reconciler unless a test asks: some tests store request rows that
        # differ from their spans on purpose (the convergence tests drive reconcilers).
        "reconcile_interval_s": 0,
    }
    values.update(overrides)
    return Settings(**values, environ={})
