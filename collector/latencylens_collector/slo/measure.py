"""ClickHouse reads for SLOs over each trace's current request row (:class:`RequestScope`).

The metric column comes from :data:`METRIC_COLUMNS`, component columns from
:data:`attribution.COMPONENTS`, and every value a person supplies (project, filter, times,
thresholds) is a bound parameter. An empty filter value matches every row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.queries.scope import METRIC_COLUMNS, Filters, RequestScope
from latencylens_collector.queries.times import Window
from latencylens_collector.slo.burn import Counts
from latencylens_collector.storage.store import Store


@dataclass(frozen=True)
class Scope:
    """Which requests: a project and an SLO filter."""

    project: str
    metric: str
    filter: Mapping[str, str]

    @property
    def column(self) -> str:
        return METRIC_COLUMNS[self.metric]

    def current(self, store: Store, columns: str, since_ns: int, until_ns: int) -> tuple[str, dict[str, Any]]:
        """``SELECT columns, v`` (the metric) of the current row of each request in [since, until)."""
        scope = RequestScope(self.project, [Window(since_ns, until_ns)], Filters.of(self.filter))
        return scope.latest(store, f"{columns}, {self.column} AS v")


@dataclass(frozen=True)
class WindowStats:
    counts: dict[str, Counts]
    """Per window name: requests with the metric, and those above the threshold."""
    value_ns: int | None
    """The quantile of the metric over the value window."""
    value_total: int


def window_stats(
    store: Store,
    scope: Scope,
    *,
    now_ns: int,
    windows: Mapping[str, int],
    threshold_ns: int,
    quantile: float,
    value_window: str,
) -> WindowStats:
    """Counts per window ending at ``now`` and one quantile, in one pass over the longest window.

    The quantile is ``quantileExact``: the element at index ⌊q·n⌋ of the sorted values (0-based),
    an observed value, never an interpolation.
    """
    names = list(windows)
    starts = [now_ns - windows[name] for name in names]
    inner, params = scope.current(store, "toUnixTimestamp64Nano(start_time) AS start_ns", min(starts), now_ns)
    sql = f"""
    SELECT
        sumForEach(arrayMap(s -> toUInt64(start_ns >= s), {{starts:Array(Int64)}})) AS totals,
        sumForEach(
            arrayMap(s -> toUInt64(start_ns >= s AND v > {{threshold:Int64}}), {{starts:Array(Int64)}})
        ) AS bads,
        quantileExactIf({{quantile:Float64}})(v, start_ns >= {{value_since:Int64}}) AS value,
        countIf(start_ns >= {{value_since:Int64}}) AS value_total
    FROM ({inner}) WHERE v IS NOT NULL
    """
    params.update(
        starts=starts, threshold=threshold_ns, quantile=quantile, value_since=now_ns - windows[value_window]
    )
    row = store.query(sql, params)[0]
    totals, bads = list(row["totals"] or []), list(row["bads"] or [])
    counts = {
        name: Counts(total=int(totals[i]) if i < len(totals) else 0, bad=int(bads[i]) if i < len(bads) else 0)
        for i, name in enumerate(names)
    }
    total = int(row["value_total"])
    value = row["value"]
    return WindowStats(
        counts=counts, value_ns=int(value) if total and value is not None else None, value_total=total
    )


def component_means(store: Store, scope: Scope, since_ns: int, until_ns: int) -> dict[str, float] | None:
    """Mean critical-path ns per component of the SLO's requests in [since, until); None if none."""
    columns = ", ".join(f"{name}_ns" for name in COMPONENTS)
    means = ", ".join(f"avg({name}_ns) AS {name}" for name in COMPONENTS)
    inner, params = scope.current(store, columns, since_ns, until_ns)
    sql = f"SELECT count() AS n, {means} FROM ({inner}) WHERE v IS NOT NULL"
    row = store.query(sql, params)[0]
    if not row["n"]:
        return None
    return {name: float(row[name]) for name in COMPONENTS}


def worst_requests(
    store: Store, scope: Scope, since_ns: int, until_ns: int, limit: int = 5
) -> list[tuple[str, int]]:
    """(trace id hex, metric ns) of the slowest requests in [since, until), slowest first."""
    inner, params = scope.current(store, "trace_id", since_ns, until_ns)
    sql = f"""
    SELECT lower(hex(trace_id)) AS trace_hex, v FROM ({inner})
    WHERE v IS NOT NULL ORDER BY v DESC, trace_hex LIMIT {{limit:UInt32}}
    """
    params["limit"] = limit
    return [(row["trace_hex"], int(row["v"])) for row in store.query(sql, params)]


@dataclass(frozen=True)
class HistogramRow:
    """Cumulative bucket counts of one (project, service, model)."""

    project: str
    service: str
    model: str
    ttft_buckets: Sequence[int]
    ttft_count: int
    ttft_sum_ns: int
    e2e_buckets: Sequence[int]
    e2e_count: int
    e2e_sum_ns: int


def histograms(store: Store, bounds_ns: Sequence[int]) -> list[HistogramRow]:
    """TTFT and end-to-end histograms of every stored request, per project, service and model."""
    inner, params = RequestScope(project=None).latest(store, "project, service, model, ttft_ns, e2e_ns")
    sql = f"""
    SELECT project, service, model,
        sumForEachIf(arrayMap(b -> toUInt64(ifNull(ttft_ns, 0) <= b), {{bounds:Array(Int64)}}),
                     ttft_ns IS NOT NULL) AS ttft_buckets,
        countIf(ttft_ns IS NOT NULL) AS ttft_count,
        sumIf(ifNull(ttft_ns, 0), ttft_ns IS NOT NULL) AS ttft_sum,
        sumForEach(arrayMap(b -> toUInt64(e2e_ns <= b), {{bounds:Array(Int64)}})) AS e2e_buckets,
        count() AS e2e_count,
        sum(e2e_ns) AS e2e_sum
    FROM ({inner})
    GROUP BY project, service, model
    ORDER BY project, service, model
    """
    rows = store.query(sql, {**params, "bounds": list(bounds_ns)})
    n = len(bounds_ns)
    return [
        HistogramRow(
            project=row["project"],
            service=row["service"],
            model=row["model"],
            ttft_buckets=_pad(row["ttft_buckets"], n),
            ttft_count=int(row["ttft_count"]),
            ttft_sum_ns=int(row["ttft_sum"]),
            e2e_buckets=_pad(row["e2e_buckets"], n),
            e2e_count=int(row["e2e_count"]),
            e2e_sum_ns=int(row["e2e_sum"]),
        )
        for row in rows
    ]


def _pad(values: Sequence[int] | None, n: int) -> list[int]:
    """sumForEachIf over no matching rows gives an empty array: read it as zeros."""
    got = [int(v) for v in values or []]
    return got + [0] * (n - len(got))
