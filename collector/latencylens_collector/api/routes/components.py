"""Query API: components over time (each part's share, mean and p95 per time bucket)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from latencylens_collector import queries
from latencylens_collector.api.deps import NowDep, ProjectDep, StoreDep
from latencylens_collector.api.params import FiltersDep, SinceQuery, UntilQuery
from latencylens_collector.queries.components import ComponentsResponse, components_over_time

router = APIRouter(prefix="/api/stats/components", tags=["stats"])


@router.get(
    "",
    summary="Components over time",
    description="For requests started in [since, until) (default: the last 24 h), per time `bucket`: "
    "each part's share of end-to-end time, its mean contribution per request (the means add up to the "
    "mean end-to-end time) and its p95 over the bucket's requests; filterable by service, route, model "
    "and provider. The overview's components-over-time chart draws it.",
)
def get_components(
    store: StoreDep,
    project: ProjectDep,
    now: NowDep,
    filters: FiltersDep,
    since: SinceQuery = None,
    until: UntilQuery = None,
    bucket: Annotated[str, Query(description=f"Time bucket: {', '.join(queries.BUCKETS)}.")] = "1h",
) -> ComponentsResponse:
    return components_over_time(
        store, project, now=now, since=since, until=until, filters=filters, bucket=bucket
    )
