"""Query API: aggregates of requests, grouped by dimensions and time buckets."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from latencylens_collector import queries
from latencylens_collector.api.deps import NowDep, ProjectDep, StoreDep
from latencylens_collector.api.params import FiltersDep, GroupByQuery, SinceQuery, UntilQuery
from latencylens_collector.queries.responses import StatsResponse

router = APIRouter(prefix="/api/stats", tags=["stats"])


@router.get(
    "",
    summary="Aggregates",
    description="For requests started in [since, until) (default: the last 24 h, at most 90 days): "
    "count, p50/p90/p95/p99 of end-to-end, TTFT, ITL and each component, each component's share "
    "of total time, output tokens per second and cached-token ratio; grouped by `by` and/or "
    "time `bucket`. Unknown group-by fields are refused with 422.",
)
def get_stats(
    store: StoreDep,
    project: ProjectDep,
    now: NowDep,
    filters: FiltersDep,
    since: SinceQuery = None,
    until: UntilQuery = None,
    by: GroupByQuery = None,
    bucket: Annotated[str | None, Query(description=f"Time bucket: {', '.join(queries.BUCKETS)}.")] = None,
) -> StatsResponse:
    return queries.stats(
        store,
        project,
        now=now,
        since=since,
        until=until,
        filters=filters,
        by=queries.parse_group_by(by),
        bucket=bucket,
    )
