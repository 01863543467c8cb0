"""A real collector seeded with the advisor's known-truth workload, shared by a test module.

The advisor's tests only read, so one collector per module (its own database in the session's
chdb directory) serves all of them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from advice_workload import start_of_window, workload, workload_spans

from latencylens_collector.api.server import ServiceThread
from latencylens_collector.settings import Settings


@dataclass(frozen=True)
class SeededAdvice:
    url: str
    t0: int
    """Start of the workload's first hour (ns since the epoch)."""


@contextmanager
def seeded_collector(chdb_dsn: str, metadata_dir: Path, name: str) -> Iterator[SeededAdvice]:
    """A collector on database ``name`` holding :func:`advice_workload.workload`, stopped after."""
    settings = Settings(
        clickhouse_dsn=chdb_dsn,
        database=f"{name}_{os.getpid()}",
        metadata_url=f"sqlite:///{metadata_dir / 'metadata.db'}",
        host="127.0.0.1",
        port=0,
        grpc_port=0,
        reconcile_interval_s=0,
        environ={},
    )
    service = ServiceThread(settings).start()
    try:
        t0 = start_of_window(time.time_ns())
        service.store.upsert_requests(workload(t0))
        service.store.insert_spans(workload_spans(t0))
        yield SeededAdvice(url=service.url, t0=t0)
    finally:
        service.stop()
        service.store.close()
