"""ClickHouse reads for SLOs over the ``requests`` table (FINAL, latest row per trace).

The SQL text is constant: the metric column comes from :data:`METRIC_COLUMNS`, component columns
from :data:`attribution.COMPONENTS`, the database name is a validated identifier, and every value
a person supplies (project, filter, times, thresholds) is a bound parameter. An empty filter
parameter matches every row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.slo.burn import Counts
from latencylens_collector.slo.definitions import METRIC_COLUMNS
from latencylens_collector.storage.store import Store

FILTER_FIELDS: Final = {"service": "service", "route": "name", "model": "model", "provider": "provider"}
"""SLO filter field → ``requests`` column."""

_FILTERS = " ".join(
    f"AND ({{f_{field}:String}} = '' OR {column} = {{f_{field}:String}})"
    for field, column in FILTER_FIELDS.items()
)


def _scoped(db: str, columns: str) -> str:
    """Latest row per trace of the SLO's requests started in [since, until)."""
    return f"""
        SELECT {columns} FROM {db}.requests FINAL
        WHERE project = {{project:String}}
          AND start_time >= fromUnixTimestamp64Nano({{since:Int64}}, 'UTC')
          AND start_time < fromUnixTimestamp64Nano({{until:Int64}}, 'UTC')
          {_FILTERS}
        ORDER BY computed_at DESC LIMIT 1 BY trace_id
    """


@dataclass(frozen=True)
class Scope:
    """Which requests: a project and an SLO filter."""

    project: str
    metric: str
    filter: Mapping[str, str]

    @property
    def column(self) -> str:
        return METRIC_COLUMNS[self.metric]

    def params(self, since_ns: int, until_ns: int) -> dict[str, Any]:
        values: dict[str, Any] = {"project": self.project, "since": since_ns, "until": until_ns}
        for field in FILTER_FIELDS:
            values[f"f_{field}"] = self.filter.get(field) or ""
        return values


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
    column = scope.column
    inner = _scoped(store.database, f"toUnixTimestamp64Nano(start_time) AS start_ns, {column} AS v, trace_id")
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
    params = scope.params(min(starts), now_ns)
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
    inner = _scoped(store.database, f"{columns}, {scope.column} AS v, trace_id")
    sql = f"SELECT count() AS n, {means} FROM ({inner}) WHERE v IS NOT NULL"
    row = store.query(sql, scope.params(since_ns, until_ns))[0]
    if not row["n"]:
        return None
    return {name: float(row[name]) for name in COMPONENTS}


def worst_requests(
    store: Store, scope: Scope, since_ns: int, until_ns: int, limit: int = 5
) -> list[tuple[str, int]]:
    """(trace id hex, metric ns) of the slowest requests in [since, until), slowest first."""
    inner = _scoped(store.database, f"trace_id, {scope.column} AS v")
    sql = f"""
    SELECT lower(hex(trace_id)) AS trace_hex, v FROM ({inner})
    WHERE v IS NOT NULL ORDER BY v DESC, trace_hex LIMIT {{limit:UInt32}}
    """
    params = scope.params(since_ns, until_ns)
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
    inner = f"""
        SELECT project, service, model, ttft_ns, e2e_ns, trace_id FROM {store.database}.requests FINAL
        ORDER BY computed_at DESC LIMIT 1 BY project, trace_id
    """
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
    rows = store.query(sql, {"bounds": list(bounds_ns)})
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
