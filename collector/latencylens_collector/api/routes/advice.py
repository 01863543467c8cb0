"""Query API: what to change first, per group of requests, with the evidence behind each lever."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from latencylens_collector import queries
from latencylens_collector.api.deps import NowDep, ProjectDep, SettingsDep, StoreDep
from latencylens_collector.api.params import FiltersDep, SinceQuery, UntilQuery
from latencylens_collector.queries.advice import DEFAULT_BY, DEFAULT_MIN_REQUESTS, MAX_MIN_REQUESTS, advice
from latencylens_collector.queries.advice_responses import AdviceResponse

router = APIRouter(prefix="/api/advice", tags=["advice"])


@router.get(
    "",
    summary="What to change first",
    description="For each group of requests started in [since, until) (default: the last 24 h; "
    "groups by route × model) with at least `min_requests` requests: the levers that would cut p95 "
    "end-to-end time or p95 TTFT by 5 % or more (shorter outputs, prefix caching, a provider/model "
    "that queues less, connection reuse, sibling tool calls at once, the faster model of the same "
    "route), ranked by the p95 "
    "saving, each with the estimated change to p50/p95 end-to-end and TTFT, the evidence, a "
    "confidence and its assumptions. Estimates replay the group's own stored rows with the change "
    "applied. With `all=true`, the levers that do not apply too, each saying why.",
)
def get_advice(
    store: StoreDep,
    settings: SettingsDep,
    project: ProjectDep,
    now: NowDep,
    filters: FiltersDep,
    since: SinceQuery = None,
    until: UntilQuery = None,
    by: Annotated[
        str | None,
        Query(
            description=f"Comma list of: {', '.join(queries.GROUP_FIELDS)} (default {','.join(DEFAULT_BY)})."
        ),
    ] = None,
    min_requests: Annotated[
        int, Query(ge=1, le=MAX_MIN_REQUESTS, description="Fewest requests a group needs to be advised on.")
    ] = DEFAULT_MIN_REQUESTS,
    all: Annotated[
        bool, Query(description="Also list the levers that do not apply, each saying why.")
    ] = False,
) -> AdviceResponse:
    fields = queries.parse_group_by(by) if by is not None else list(DEFAULT_BY)
    return advice(
        store,
        project,
        now=now,
        since=since,
        until=until,
        filters=filters,
        by=fields,
        min_requests=min_requests,
        include_all=all,
        prices=settings.prices,
    )
