"""Components over time: per time bucket, each part's share of end-to-end time and its mean and
p95 contribution per request (the aggregate form of one request's bar, drawn on the overview).

Read through :func:`queries.stats.aggregate_rows`, so whole hours come from the hourly rollup when
one is fresh and the numbers agree with ``GET /api/stats``. A part's mean is its critical-path time
summed over the bucket's requests / their count, so the means of a bucket add up to its mean
end-to-end time; its p95 is the 95th percentile of that part over the bucket's requests (p95s of
parts do not add up to the p95 of end-to-end time: the slowest requests differ per part).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.queries._common import MAX_GROUPS, QueryError, finite_int
from latencylens_collector.queries.scope import NO_FILTERS, Filters
from latencylens_collector.queries.stats import BUCKETS, aggregate_rows
from latencylens_collector.queries.times import NS_PER_S, from_ns, window
from latencylens_collector.storage.store import Store

_P95 = 2
"""Index of p95 in the rollup's levels (p50, p90, p95, p99)."""


class PartInBucket(BaseModel):
    """One part's contribution to the end-to-end time of a bucket's requests."""

    share: float | None = Field(description="Sum of this part / sum of end-to-end time (0–1).")
    mean_ns: int = Field(description="Sum of this part / the bucket's requests (ns per request).")
    p95_ns: int | None = Field(description="95th percentile of this part over the bucket's requests.")


class ComponentsBucket(BaseModel):
    bucket_start: datetime
    count: int
    e2e_mean_ns: int = Field(description="Mean end-to-end time; the parts' means add up to it.")
    e2e_p95_ns: int | None
    parts: dict[str, PartInBucket] = Field(description=f"Per part: {', '.join(COMPONENTS)}.")


class ComponentsResponse(BaseModel):
    """Each part's share, mean and p95 per time bucket, over requests started in [since, until)."""

    since: datetime
    until: datetime
    bucket: str
    buckets: list[ComponentsBucket] = Field(description="Buckets with requests, oldest first.")


def components_over_time(
    store: Store,
    project: str,
    *,
    now: datetime,
    since: str | None = None,
    until: str | None = None,
    filters: Filters = NO_FILTERS,
    bucket: str = "1h",
) -> ComponentsResponse:
    """Per ``bucket`` of [since, until) (default: the last 24 h), each part's share of end-to-end
    time and its mean and p95 per request."""
    span = window(now, since, until)
    if bucket not in BUCKETS:
        raise QueryError(f"unknown bucket {bucket!r}; allowed: {', '.join(BUCKETS)}")
    bucket_s = BUCKETS[bucket]
    count = -(-(span.until_ns - span.since_ns) // (bucket_s * NS_PER_S))
    if count > MAX_GROUPS:
        raise QueryError(f"{count} buckets of {bucket}: at most {MAX_GROUPS}; use a coarser bucket")
    rows = aggregate_rows(store, project, span, filters, (), bucket_s)
    return ComponentsResponse(
        since=from_ns(span.since_ns),
        until=from_ns(span.until_ns),
        bucket=bucket,
        buckets=[_bucket(row) for row in rows if int(row["n"]) > 0],
    )


def _p95(values: Any) -> int | None:
    found = list(values or [])
    return finite_int(found[_P95]) if len(found) > _P95 else None


def _bucket(row: Mapping[str, Any]) -> ComponentsBucket:
    n = int(row["n"])
    total = int(row["sum_e2e"])
    parts = {
        name: PartInBucket(
            share=int(row[f"sum_{name}"]) / total if total > 0 else None,
            mean_ns=round(int(row[f"sum_{name}"]) / n),
            p95_ns=_p95(row[f"q_{name}"]),
        )
        for name in COMPONENTS
    }
    return ComponentsBucket(
        bucket_start=from_ns(int(row["bucket_s"]) * NS_PER_S),
        count=n,
        e2e_mean_ns=round(total / n),
        e2e_p95_ns=_p95(row["q_e2e"]),
        parts=parts,
    )


__all__ = [
    "ComponentsBucket",
    "ComponentsResponse",
    "PartInBucket",
    "components_over_time",
]
