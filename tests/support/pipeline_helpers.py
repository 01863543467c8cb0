"""Helpers for the ingest-pipeline tests: gRPC port of a running collector, exact span counts."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import httpx

from latencylens_collector.storage.store import Store


def grpc_target(url: str) -> str:
    """``host:port`` of the collector's OTLP/gRPC receiver, as /readyz reports it."""
    status = httpx.get(f"{url}/readyz").json()["grpc"]
    match = re.fullmatch(r"listening on (.+)", status)
    assert match, status
    return match.group(1)


def span_counts(store: Store) -> dict[str, int]:
    """Rows in ``spans``: plain, FINAL and distinct (project, trace, span) keys."""
    db = store.database
    [row] = store.query(
        f"SELECT (SELECT count() FROM {db}.spans) AS plain, (SELECT count() FROM {db}.spans FINAL) AS final, "
        f"(SELECT uniqExact(project, trace_id, span_id) FROM {db}.spans) AS distinct_keys"
    )
    return {key: int(value) for key, value in row.items()}


def metric(name: str, **labels: str) -> float:
    from latencylens_collector.runtime.metrics import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


def wait_until(predicate: Callable[[], Any], timeout_s: float = 20.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it is truthy (a bounded wait for the writer thread)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
