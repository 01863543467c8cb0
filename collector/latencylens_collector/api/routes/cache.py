"""Query API: cached and uncached requests apart, and what prefill costs on each."""

from __future__ import annotations

from fastapi import APIRouter

from latencylens_collector import queries
from latencylens_collector.api.deps import NowDep, ProjectDep, StoreDep
from latencylens_collector.api.params import FiltersDep, GroupByQuery, SinceQuery, UntilQuery
from latencylens_collector.queries.cache import cache_stats
from latencylens_collector.queries.cache_responses import CacheResponse

router = APIRouter(prefix="/api/stats/cache", tags=["stats"])


@router.get(
    "",
    summary="Cached and uncached requests",
    description="For requests started in [since, until) (default: the last 24 h), grouped by `by`: "
    "requests that read input from the provider's cache and requests that read none, apart (and how "
    "many did not report the counts), each with its count, cached share of input, p50/p95 of "
    "end-to-end time, TTFT and prefill, and prefill time per 1k uncached input tokens: whether prefix "
    "caching is cutting prefill on this traffic.",
)
def get_cache_stats(
    store: StoreDep,
    project: ProjectDep,
    now: NowDep,
    filters: FiltersDep,
    since: SinceQuery = None,
    until: UntilQuery = None,
    by: GroupByQuery = None,
) -> CacheResponse:
    return cache_stats(
        store, project, now=now, since=since, until=until, filters=filters, by=queries.parse_group_by(by)
    )
