"""Query API: one metric's percentile in two time ranges and what changed it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from latencylens_collector import queries
from latencylens_collector.api.deps import NowDep, ProjectDep, StoreDep
from latencylens_collector.api.params import FiltersDep, GroupByQuery, time_query
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
    a_since: Annotated[str | None, time_query("Range A start (default: B's length before A's end).")] = None,
    a_until: Annotated[str | None, time_query("Range A end (default: B's start).")] = None,
    b_since: Annotated[str | None, time_query("Range B start (default: an hour before B's end).")] = None,
    b_until: Annotated[str | None, time_query("Range B end (default: now).")] = None,
    by: GroupByQuery = None,
    metric: Annotated[str, Query(description=f"{', '.join(queries.METRIC_COLUMNS)}.")] = "ttft",
    quantile: Annotated[str, Query(description="p50, p90, p95 or p99.")] = "p95",
) -> CompareResponse:
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
