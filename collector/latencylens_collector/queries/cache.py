"""Cached and uncached requests apart: is prefix caching cutting prefill on this traffic?

Per group (any of the request dimensions), requests that read input from the provider's cache
(``cache_read_input_tokens > 0``), requests that read none (``= 0``) and requests whose counts were
not reported are counted apart; for the first two, p50/p95 of end-to-end time, TTFT and prefill,
the cached share of their input, and prefill time per 1k *uncached* input tokens (prefill time
summed over requests whose provider split prefill, over the uncached input tokens of the same
requests). Percentiles are exact (``quantileExact``), read from request rows through
:class:`RequestScope` (the hourly rollup does not keep the cache split).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from latencylens_collector.queries._common import FILTER_COLUMNS, MAX_GROUPS, QueryError, finite_int
from latencylens_collector.queries.cache_responses import P50P95, CacheClass, CacheGroup, CacheResponse
from latencylens_collector.queries.scope import NO_FILTERS, Filters, RequestScope
from latencylens_collector.queries.times import from_ns, window
from latencylens_collector.storage.store import Store

CLASSES: Final = {
    "cached": "cache_read_input_tokens > 0",
    "uncached": "cache_read_input_tokens = 0",
}
"""Class name → condition on a request row (rows with no count reported are in neither)."""
_SPLIT: Final = "prefill_ns > 0 AND input_tokens > cache_read_input_tokens"
"""Rows whose provider split prefill and that had uncached input: the rate's rows."""


def cache_stats(
    store: Store,
    project: str,
    *,
    now: datetime,
    since: str | None = None,
    until: str | None = None,
    filters: Filters = NO_FILTERS,
    by: Sequence[str] = (),
) -> CacheResponse:
    """Cached and uncached requests of [since, until) (default: the last 24 h), per group."""
    span = window(now, since, until)
    scope = RequestScope(project, [span], filters)
    keys = ", ".join(f"{FILTER_COLUMNS[field]} AS k_{field}" for field in by)
    inner, params = scope.collapsed(
        store,
        f"{keys + ', ' if keys else ''}e2e_ns, ttft_ns, prefill_ns, input_tokens, cache_read_input_tokens",
    )
    measures = [
        "count() AS n",
        "countIf(cache_read_input_tokens IS NULL OR input_tokens IS NULL) AS n_unknown",
    ]
    for name, condition in CLASSES.items():
        c = f"{condition} AND input_tokens IS NOT NULL"
        measures += [
            f"countIf({c}) AS {name}_n",
            f"quantilesExactIf(0.5, 0.95)(e2e_ns, {c}) AS {name}_e2e",
            f"countIf({c} AND ttft_ns IS NOT NULL) AS {name}_n_ttft",
            f"quantilesExactIf(0.5, 0.95)(ttft_ns, {c}) AS {name}_ttft",
            f"quantilesExactIf(0.5, 0.95)(prefill_ns, {c}) AS {name}_prefill",
            f"sumIf(input_tokens, {c}) AS {name}_in",
            f"sumIf(cache_read_input_tokens, {c}) AS {name}_cached",
            f"countIf({c} AND {_SPLIT}) AS {name}_n_rate",
            f"sumIf(prefill_ns, {c} AND {_SPLIT}) AS {name}_rate_ns",
            f"sumIf(input_tokens - cache_read_input_tokens, {c} AND {_SPLIT}) AS {name}_rate_tok",
        ]
    group = ", ".join(f"k_{field}" for field in by)
    sql = (
        f"SELECT {group + ', ' if group else ''}{', '.join(measures)} FROM ({inner})"
        f"{' GROUP BY ' + group if group else ''} ORDER BY n DESC{', ' + group if group else ''} "
        "LIMIT {limit:UInt32}"
    )
    params["limit"] = MAX_GROUPS + 1
    rows = store.query(sql, params)
    if len(rows) > MAX_GROUPS:
        raise QueryError(f"more than {MAX_GROUPS} groups: filter or group by fewer fields")
    return CacheResponse(
        since=from_ns(span.since_ns),
        until=from_ns(span.until_ns),
        by=list(by),
        groups=[_group(row, by) for row in rows if int(row["n"]) > 0],
    )


def _pair(values: Sequence[Any] | None, known: int) -> P50P95:
    found = list(values or []) if known > 0 else []
    if len(found) < 2:
        return P50P95(p50=None, p95=None)
    return P50P95(p50=finite_int(found[0]), p95=finite_int(found[1]))


def _class(row: Mapping[str, Any], name: str, total: int) -> CacheClass:
    count = int(row[f"{name}_n"])
    inputs = int(row[f"{name}_in"] or 0)
    rate_tokens = int(row[f"{name}_rate_tok"] or 0)
    return CacheClass(
        count=count,
        share_of_requests=count / total if total > 0 else 0.0,
        cached_input_share=int(row[f"{name}_cached"] or 0) / inputs if inputs > 0 else None,
        e2e_ns=_pair(row[f"{name}_e2e"], count),
        ttft_ns=_pair(row[f"{name}_ttft"], int(row[f"{name}_n_ttft"])),
        prefill_ns=_pair(row[f"{name}_prefill"], count),
        prefill_requests=int(row[f"{name}_n_rate"]),
        prefill_per_1k_uncached_tokens_ns=(
            round(int(row[f"{name}_rate_ns"]) * 1000 / rate_tokens) if rate_tokens > 0 else None
        ),
    )


def _group(row: Mapping[str, Any], by: Sequence[str]) -> CacheGroup:
    total = int(row["n"])
    return CacheGroup(
        key={field: str(row[f"k_{field}"]) for field in by},
        count=total,
        unknown=int(row["n_unknown"]),
        cached=_class(row, "cached", total),
        uncached=_class(row, "uncached", total),
    )


__all__ = [
    "CLASSES",
    "cache_stats",
]
