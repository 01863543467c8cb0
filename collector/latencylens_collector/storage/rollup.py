"""Hourly pre-aggregates of request rows, so stats and compare merge hundreds of rows, not millions.

``requests_rollup`` holds, per project, hour and *grouping* (a set of at most two of the dimensions
service, route, model, provider), the request count, sums and ``quantilesBFloat16`` states of every
metric. The states merge without loss, so percentiles read from the rollup equal those computed
over the request rows (tests/integration/collector/storage/test_rollup.py checks it, query by query).

When a rollup may be trusted, with request rows rewritten whenever late spans arrive: the
materialized view ``requests_touched_mv`` records, per (project, hour), when rows were last inserted
and how many rows were ever inserted, whatever inserted them (the writer, a spool replay, a
backfill). A build of an hour starts only once that hour has been quiet for ``settle`` seconds,
reads the count, then ``requests FINAL``, and records both the count and ``covers_until`` = its
start − ``settle``. Readers use an hour's rollup only while its count is unchanged and no insert
into it is newer than ``covers_until``; otherwise the hour is read from the rows, and the next
refresh rebuilds it.

Two checks, because each covers what the other cannot. The count needs no clock: an insert stamped
by a server whose clock is behind the builder's, or after the clock stepped back, still changes it.
The stamp covers an insert whose count is already visible when its rows are not yet (a view's part
may commit before its source's): ``settle`` bounds how long an insert may take from stamping its
time to committing. Every time here is the store's clock (``now64``), like the insert stamps, and a
build's id is also above every earlier build's of its hour, so the newest build is the one read
even when the clock has stepped back.

Builds never replace one another: the build is in the rollup's sorting key, so neither a rebuild
whose record is not written yet nor a build cut between its two inserts can, in a merge, remove
the rows of the build the hour's record names (migration 0020). A build's rows are deleted once a
newer build of its hour was recorded and started :data:`SUPERSEDED_AFTER_S` ago: a query reads the
builds the records named when it planned, a moment before it reads their rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import combinations
from typing import Final

from opentelemetry import context as otel_context

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.analysis.records import REQUEST_DIMENSIONS
from latencylens_collector.storage.ddl import rows_table
from latencylens_collector.storage.store import Store

_log = logging.getLogger(__name__)

NS_PER_S: Final = 1_000_000_000
HOUR_S: Final = 3600
FIELD_BITS: Final = {"service": 8, "route": 4, "model": 2, "provider": 1}
"""Dimension → its bit in ``requests_rollup.kept`` (same order as the GROUP BY of a build)."""
MAX_KEPT_FIELDS: Final = 2
"""Groupings of up to two dimensions are built: 11 per hour. Finer ones would hold about as many
rows as there are requests per hour on most deployments, where merging states costs more than
reading rows."""
GROUPINGS: Final = tuple(
    frozenset(fields) for size in range(MAX_KEPT_FIELDS + 1) for fields in combinations(FIELD_BITS, size)
)
METRICS: Final = ("e2e", "ttft", "itl", *COMPONENTS)
"""Metrics with a percentile state (column ``q_<metric>``); every one but ttft/itl also has ``sum_``."""
LEVELS: Final = "0.5, 0.9, 0.95, 0.99"
"""Quantile levels of the stored states, in the order of ``queries._common.QUANTILES``; must match
the column types of migrations 0011 and 0018."""
MAX_HOURS_PER_REFRESH: Final = 48
SUPERSEDED_AFTER_S: Final = 600.0
"""How long after a newer build of its hour started a build's rows are deleted: far beyond any
query's run (a query plans with the builds recorded, then reads them) and any clock skew between
the servers of a cluster worth running (build ids are their store clock's start times)."""
MAX_DROPPED_PER_REFRESH: Final = 1000
"""Superseded builds deleted per refresh (one ``DELETE``); older ones wait for the next."""
DISTINCT_VALUES_CAP: Final = 512
"""A state holds at most about this many distinct values of one latency metric (8 significant
bits over the four binades most latencies span), however many requests it summarizes."""


def kept_mask(fields: Iterable[str]) -> int:
    """``requests_rollup.kept`` of the grouping that keeps exactly ``fields``."""
    mask = 0
    for field in fields:
        mask |= FIELD_BITS[field]
    return mask


def state_columns(metrics: Iterable[str] = METRICS) -> list[tuple[str, str]]:
    """(column name, aggregate over request rows) of each metric's percentile state."""
    return [(f"q_{m}", f"quantilesBFloat16State({LEVELS})({m}_ns)") for m in metrics]


def cost_columns() -> list[tuple[str, str]]:
    """(column name, aggregate over request rows) of the cost per request: its percentile state,
    its sum and how many requests have one (integer nano-dollars: exact in any order, so the
    rollup's sums equal the rows'). Requests without a price (NULL) are in none of them."""
    return [
        ("q_cost", f"quantilesBFloat16State({LEVELS})(cost_nano_usd)"),
        ("sum_cost", "coalesce(sum(cost_nano_usd), 0)"),
        ("priced", "count(cost_nano_usd)"),
    ]


def sum_columns() -> list[tuple[str, str]]:
    """(column name, aggregate over request rows) of the additive measures."""
    return [
        *((f"sum_{m}", f"sum({m}_ns)") for m in ("e2e", *COMPONENTS)),
        ("tps_sum", "coalesce(sum(decode_tokens_per_second), 0)"),
        ("tps_count", "count(decode_tokens_per_second)"),
        # The cached-token ratio reads requests whose input and cached counts are both known and
        # reported: an unknown count is not 0, an estimate is not a provider's count.
        ("input_tokens", f"coalesce(sumIf(input_tokens, {_TOKENS_REPORTED}), 0)"),
        ("cached_tokens", f"coalesce(sumIf(cache_read_input_tokens, {_TOKENS_REPORTED}), 0)"),
    ]


_TOKENS_REPORTED: Final = (
    # Qualified: ``input_tokens`` alone would name the aggregate aliased so in the same SELECT.
    "requests.input_tokens IS NOT NULL AND requests.cache_read_input_tokens IS NOT NULL"
    " AND requests.tokens_estimated = 0"
)


_DIMENSIONS = ", ".join(REQUEST_DIMENSIONS.values())
_GROUPING_SETS = ", ".join(
    "("
    + ", ".join(["project", "hour", "has_ttft", "has_itl", *(REQUEST_DIMENSIONS[f] for f in fields)])
    + ")"
    for fields in GROUPINGS
)
_MEASURES = [("requests", "count()"), *state_columns(), *sum_columns(), *cost_columns()]


def _build_sql(store: Store) -> str:
    """One hour of one project, every grouping in one pass. ``grouping(...)`` sets a bit for each
    dimension *not* in the grouping set (first argument = 8), so 15 − it is the mask of kept ones."""
    return f"""
INSERT INTO {store.table("requests_rollup")}
    (project, kept, hour, {_DIMENSIONS}, has_ttft, has_itl, build, {", ".join(n for n, _ in _MEASURES)})
SELECT project, 15 - grouping({_DIMENSIONS}) AS kept, toStartOfHour(start_time) AS hour, {_DIMENSIONS},
       ttft_ns IS NOT NULL AS has_ttft, itl_ns IS NOT NULL AS has_itl, {{build:UInt64}},
       {", ".join(expr for _, expr in _MEASURES)}
FROM {store.table("requests")} FINAL
WHERE project = {{project:String}}
  AND start_time >= toDateTime({{hour:UInt32}}, 'UTC')
  AND start_time < toDateTime({{hour:UInt32}} + {HOUR_S}, 'UTC')
GROUP BY GROUPING SETS ({_GROUPING_SETS})
"""


def _stale_sql(store: Store) -> str:
    """Hours inserted into since their last build, by count or by stamp. A missing build joins as
    covers = 1970 (join_use_nulls is off), so never-built hours are stale."""
    return f"""
SELECT t.project AS project, toUnixTimestamp(t.hour) AS hour_s
FROM (SELECT project, hour, max(last_insert) AS last, sum(inserted_rows) AS inserted
      FROM {store.table("requests_touched")} GROUP BY project, hour) AS t
LEFT JOIN (SELECT project, hour, argMax(covers_until, build) AS covers,
                  argMax(inserted_rows, build) AS inserted
           FROM {store.table("requests_rollup_builds")} GROUP BY project, hour) AS b
  ON t.project = b.project AND t.hour = b.hour
WHERE (t.last >= b.covers OR t.inserted != b.inserted)
  AND t.last < fromUnixTimestamp64Micro({{quiet_before:Int64}}, 'UTC')
ORDER BY hour_s DESC
LIMIT {{limit:UInt32}}
"""


def _build_start_sql(store: Store) -> str:
    """What a build starts from, read in one statement before the rows: the rows inserted into the
    hour so far, the store's clock, and the hour's newest build id."""
    hour = "project = {project:String} AND hour = toDateTime({hour:UInt32}, 'UTC')"
    return f"""
SELECT (SELECT sum(inserted_rows) FROM {store.table("requests_touched")} WHERE {hour}) AS inserted,
       toUnixTimestamp64Nano(now64(9)) AS now_ns,
       (SELECT max(build) FROM {store.table("requests_rollup_builds")} WHERE {hour}) AS newest
"""


def _build_record_sql(store: Store) -> str:
    """The build's record. An hour without rows still gets one (requests 0), so it is not rebuilt
    at every refresh."""
    return f"""
INSERT INTO {store.table("requests_rollup_builds")}
    (project, hour, build, covers_until, inserted_rows, requests, state_values)
SELECT {{project:String}}, toDateTime({{hour:UInt32}}, 'UTC'), {{build:UInt64}},
       fromUnixTimestamp64Micro({{covers:Int64}}, 'UTC'), {{inserted:UInt64}}, max(n),
       mapFromArrays(groupArray(kept), groupArray(v))
FROM (SELECT kept, sum(requests) AS n, sum(least(requests, {DISTINCT_VALUES_CAP})) AS v
      FROM {store.table("requests_rollup")}
      WHERE project = {{project:String}} AND hour = toDateTime({{hour:UInt32}}, 'UTC')
        AND build = {{build:UInt64}}
      GROUP BY kept)
"""


def _superseded_sql(store: Store) -> str:
    """(project, hour, build) of rollup rows whose hour has a newer recorded build, started before
    ``before`` (ns, store clock). Builds above the newest record (cut, or still running) stay."""
    return f"""
SELECT r.project AS project, toUnixTimestamp(r.hour) AS hour_s, r.build AS build
FROM (SELECT DISTINCT project, hour, build FROM {store.table("requests_rollup")}) AS r
INNER JOIN (SELECT project, hour, max(build) AS newest
            FROM {store.table("requests_rollup_builds")} GROUP BY project, hour) AS b
  ON r.project = b.project AND r.hour = b.hour
WHERE r.build < b.newest AND b.newest < {{before:UInt64}}
ORDER BY project, hour_s, build
LIMIT {{limit:UInt32}}
"""


@dataclass(frozen=True)
class Built:
    project: str
    hour_s: int


def stale_hours(
    store: Store, now_ns: int, settle_s: float, limit: int = MAX_HOURS_PER_REFRESH
) -> list[tuple[str, int]]:
    """(project, hour start in unix seconds) whose rollup is missing or older than their last
    insert, newest first, counting only hours quiet for ``settle_s`` at ``now_ns`` (store clock)."""
    quiet_before_us = (now_ns - int(settle_s * NS_PER_S)) // 1000
    rows = store.query(_stale_sql(store), {"quiet_before": quiet_before_us, "limit": limit})
    return [(str(row["project"]), int(row["hour_s"])) for row in rows]


def build_hour(store: Store, project: str, hour_s: int, settle_s: float) -> Built:
    """Roll up one hour of one project: every grouping in one pass over its rows, then the build
    record (written last, so readers never pick a build whose rows are not all in). Its start is
    the store's clock; its id is that start, or one more than the hour's newest build if the clock
    has stepped back since, so the newest build always has the highest id."""
    hour = {"project": project, "hour": hour_s}
    (start,) = store.query(_build_start_sql(store), hour)
    started_ns = int(start["now_ns"])
    build = max(started_ns, int(start["newest"]) + 1)
    params = {**hour, "build": build}
    store.command(_build_sql(store), params)
    covers_until_us = (started_ns - int(settle_s * NS_PER_S)) // 1000
    record = {**params, "covers": covers_until_us, "inserted": int(start["inserted"])}
    store.command(_build_record_sql(store), record)
    return Built(project, hour_s)


def drop_superseded(store: Store, now_ns: int, after_s: float = SUPERSEDED_AFTER_S) -> int:
    """Delete the rows of builds superseded by a build started ``after_s`` before ``now_ns`` (store
    clock) or earlier; returns how many builds' rows went."""
    before_ns = max(now_ns - int(after_s * NS_PER_S), 0)
    rows = store.query(_superseded_sql(store), {"before": before_ns, "limit": MAX_DROPPED_PER_REFRESH})
    if not rows:
        return 0
    gone = [(str(row["project"]), int(row["hour_s"]), int(row["build"])) for row in rows]
    target = rows_table(store.database, "requests_rollup", store.settings.clickhouse_cluster)
    store.command(
        f"DELETE FROM {target} WHERE (project, toUnixTimestamp(hour), build) "
        "IN {gone:Array(Tuple(String, UInt32, UInt64))}",
        {"gone": gone},
    )
    return len(gone)


def refresh(store: Store, settle_s: float) -> list[Built]:
    """Rebuild every stale hour (up to :data:`MAX_HOURS_PER_REFRESH`, newest first), then delete
    the rows of builds superseded long enough ago (:func:`drop_superseded`)."""
    now_ns = store.now_ns()
    built = [
        build_hour(store, project, hour_s, settle_s)
        for project, hour_s in stale_hours(store, now_ns, settle_s)
    ]
    drop_superseded(store, now_ns)
    return built


def refresh_in_service(store: Store, settle_s: float) -> None:
    """One refresh from the service's scheduler: quiet while migrations are pending, and a
    failure (storage down or busy) is only logged, since queries read rows meanwhile."""
    if not store.migrated:
        return
    # The collector's own ClickHouse calls must never be traced (and exported back to itself).
    token = otel_context.attach(otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        built = refresh(store, settle_s)
    except Exception as exc:
        _log.warning("rollup refresh failed, retrying at the next interval: %s", exc)
        return
    finally:
        otel_context.detach(token)
    if built:
        _log.info("rolled up %d hour(s)", len(built))
