"""Query API: one metric's percentile in two time ranges and what changed it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from latencylens_collector import queries
from latencylens_collector.api.deps import NowDep, ProjectDep, StoreDep
from latencylens_collector.api.params import TIME_HELP, FiltersDep, GroupByQuery
from latencylens_collector.queries.responses import CompareResponse

_COMPONENTS_HELP = "; ".join(
    f"{metric} = {', '.join(names)}" for metric, names in queries.METRIC_COMPONENTS.items() if metric != "e2e"
)
router = APIRouter(prefix="/api/compare", tags=["compare"])


@router.get(
    "",
    summary="Compare two time ranges",
    description="The metric's percentile in range A and range B (default: B the last hour, A the "
    "hour before), the change of each of its components, per group, and a one-line summary. "
    f"Components: e2e = all; {_COMPONENTS_HELP}.",
)
def get_compare(
    store: StoreDep,
    project: ProjectDep,
    now: NowDep,
    filters: FiltersDep,
    a_since: Annotated[str | None, Query(description=f"Range A start. {TIME_HELP}")] = None,
    a_until: Annotated[str | None, Query(description="Range A end (default: B's start).")] = None,
    b_since: Annotated[str | None, Query(description=f"Range B start. {TIME_HELP}")] = None,
    b_until: Annotated[str | None, Query(description="Range B end (default: now).")] = None,
    by: GroupByQuery = None,
    metric: Annotated[str, Query(description="ttft, e2e or itl.")] = "ttft",
    quantile: Annotated[str, Query(description="p50, p90, p95 or p99.")] = "p95",
) -> CompareResponse:
    try:
        return queries.compare(
            store,
            project,
            now=now,
            a_since=a_since,
            a_until=a_until,
            b_since=b_since,
            b_until=b_until,
            filters=filters,
            by=queries.parse_group_by(by),
            metric=metric,
            quantile=quantile,
        )
    except queries.QueryError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc
