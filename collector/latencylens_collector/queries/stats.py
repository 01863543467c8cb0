"""Aggregates over request rows: counts, percentiles and shares, grouped by dimensions and time.

Percentiles are computed in ClickHouse with ``quantilesBFloat16``: deterministic (no sampling),
bounded memory whatever the range (one counter per distinct 16-bit value), and on 1 M requests ×
11 metrics about twice as fast as ``quantilesTDigest`` and 1.5× faster than the exact variants
(docs/queries.md has the figures). Its cost is precision: values keep 8 significant bits, so a
reported percentile is at most 0.8 % below the true sample percentile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from latencylens_collector.attribution import (
    COMPONENTS,
    DECODE,
    MODEL_UNATTRIBUTED,
    NETWORK,
    PREFILL,
    QUEUE,
)
from latencylens_collector.models import ComponentStats, Quantiles, StatsGroup, StatsResponse
from latencylens_collector.queries._common import (
    MAX_GROUPS,
    NO_FILTERS,
    QUANTILES,
    WINDOW_SQL,
    Filters,
    QueryError,
    Window,
    finite_int,
    from_ns,
    group_key,
    key_select,
    window,
)
from latencylens_collector.storage import Store

METRIC_COLUMNS: Final = {"e2e": "e2e_ns", "ttft": "ttft_ns", "itl": "itl_ns"}
"""Metric name → request column (integer ns; TTFT and ITL are null without a streamed call)."""
METRIC_COMPONENTS: Final[dict[str, tuple[str, ...]]] = {
    "e2e": COMPONENTS,
    "ttft": (NETWORK, QUEUE, PREFILL, MODEL_UNATTRIBUTED),
    "itl": (DECODE,),
}
"""The critical-path components each metric is made of. TTFT is everything before the first token
(network, queue, prefill, and model time the provider did not split); ITL is decode spread over
the output tokens."""
BUCKETS: Final = {"1m": 60, "5m": 300, "1h": 3600, "1d": 86_400}
"""Time bucket name → seconds; buckets are aligned on the epoch (so days start at 00:00 UTC)."""

_LEVELS = ", ".join(str(level) for level in QUANTILES.values())
_Q = f"quantilesBFloat16({_LEVELS})"


def stats(
    store: Store,
    project: str,
    *,
    now: datetime,
    since: str | None = None,
    until: str | None = None,
    filters: Filters = NO_FILTERS,
    by: Sequence[str] = (),
    bucket: str | None = None,
) -> StatsResponse:
    """Aggregates of requests started in [since, until) (default: the last 24 h)."""
    span = window(now, since, until)
    if bucket is not None and bucket not in BUCKETS:
        raise QueryError(f"unknown bucket {bucket!r}; allowed: {', '.join(BUCKETS)}")
    bucket_s = BUCKETS[bucket] if bucket else None
    if bucket_s is not None:
        count = -(-(span.until_ns - span.since_ns) // (bucket_s * 1_000_000_000))
        if count > MAX_GROUPS:
            raise QueryError(f"{count} buckets of {bucket}: at most {MAX_GROUPS}; use a coarser bucket")
    rows = aggregate_rows(store, project, span, filters, by, bucket_s)
    groups = [stats_group(row, by) for row in rows if int(row["n"]) > 0]
    return StatsResponse(
        since=from_ns(span.since_ns), until=from_ns(span.until_ns), by=list(by), bucket=bucket, groups=groups
    )


def aggregate_rows(
    store: Store,
    project: str,
    span: Window,
    filters: Filters,
    by: Sequence[str],
    bucket_s: int | None,
) -> list[dict[str, Any]]:
    """One ClickHouse aggregation over ``requests FINAL``; refuses more than MAX_GROUPS groups."""
    filter_sql, params = filters.sql()
    params.update(span.params(), project=project, limit=MAX_GROUPS + 1)
    group_cols = [f"k_{field}" for field in by]
    bucket_sql = ""
    if bucket_s is not None:
        bucket_sql = (
            "intDiv(toUnixTimestamp(start_time), {bucket_s:UInt32}) * {bucket_s:UInt32} AS bucket_s, "
        )
        params["bucket_s"] = bucket_s
        group_cols.insert(0, "bucket_s")
    measures = [
        f"{_Q}(e2e_ns) AS q_e2e",
        f"{_Q}(ttft_ns) AS q_ttft",
        f"{_Q}(itl_ns) AS q_itl",
        *(f"{_Q}({name}_ns) AS q_{name}" for name in COMPONENTS),
        "sum(e2e_ns) AS sum_e2e",
        *(f"sum({name}_ns) AS sum_{name}" for name in COMPONENTS),
        "avg(decode_tokens_per_second) AS tps",
        "sum(input_tokens) AS input_tokens",
        "sum(cache_read_input_tokens) AS cached_tokens",
    ]
    group_sql = f"GROUP BY {', '.join(group_cols)}" if group_cols else ""
    order = ["bucket_s"] if bucket_s is not None else []
    order += ["n DESC", *(f"k_{field}" for field in by)]
    sql = (
        f"SELECT {key_select(by)}{bucket_sql}count() AS n, {', '.join(measures)} "
        f"FROM {store.database}.requests FINAL WHERE {WINDOW_SQL}{filter_sql} "
        f"{group_sql} ORDER BY {', '.join(order)} LIMIT {{limit:UInt32}}"
    )
    rows = store.query(sql, params)
    if len(rows) > MAX_GROUPS:
        raise QueryError(
            f"more than {MAX_GROUPS} groups: filter, group by fewer fields or use a coarser bucket"
        )
    return rows


def quantiles(values: Sequence[Any] | None) -> Quantiles:
    found = list(values or [])
    picked = [finite_int(found[i]) if i < len(found) else None for i in range(len(QUANTILES))]
    return Quantiles(**dict(zip(QUANTILES, picked, strict=True)))


def stats_group(row: Mapping[str, Any], by: Sequence[str]) -> StatsGroup:
    total = int(row["sum_e2e"])
    components = {
        name: ComponentStats(
            **quantiles(row[f"q_{name}"]).model_dump(),
            share=int(row[f"sum_{name}"]) / total if total > 0 else None,
        )
        for name in COMPONENTS
    }
    tps = row["tps"]
    input_tokens = int(row["input_tokens"])
    return StatsGroup(
        key=group_key(row, by),
        bucket_start=from_ns(int(row["bucket_s"]) * 1_000_000_000) if "bucket_s" in row else None,
        count=int(row["n"]),
        e2e_ns=quantiles(row["q_e2e"]),
        ttft_ns=quantiles(row["q_ttft"]),
        itl_ns=quantiles(row["q_itl"]),
        components=components,
        output_tokens_per_second=float(tps) if tps is not None and tps == tps else None,
        cached_token_ratio=int(row["cached_tokens"]) / input_tokens if input_tokens > 0 else None,
    )
