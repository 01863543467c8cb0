"""Query API: the slowest requests and one request's breakdown and explanation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query

from latencylens_collector import queries
from latencylens_collector.api.deps import NowDep, ProjectDep, SettingsDep, StoreDep
from latencylens_collector.api.params import (
    FiltersDep,
    MinDurationMsQuery,
    SinceQuery,
    UntilQuery,
    limit_query,
)
from latencylens_collector.queries.explain import MAX_NESTING
from latencylens_collector.queries.requests import (
    MAX_PREFIX_MATCHES,
    TRACE_ID_PREFIX_PATTERN,
    trace_ids_with_prefix,
)
from latencylens_collector.queries.responses import RequestDetail, RequestList, TraceIdMatches

router = APIRouter(prefix="/api/requests", tags=["requests"])


@router.get(
    "",
    summary="Slowest requests",
    description="Requests started in [since, until) (default: the last 24 h, at most 90 days), slowest "
    "first, each with its end-to-end time split into components along the critical path. Pages are "
    "linked by an opaque cursor (next_cursor), never by offset.",
)
def list_requests(
    store: StoreDep,
    project: ProjectDep,
    now: NowDep,
    filters: FiltersDep,
    since: SinceQuery = None,
    until: UntilQuery = None,
    min_duration_ms: MinDurationMsQuery = None,
    limit: Annotated[int, limit_query(queries.MAX_LIMIT)] = 50,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page.")] = None,
) -> RequestList:
    return queries.list_requests(
        store,
        project,
        now=now,
        since=since,
        until=until,
        filters=filters,
        min_duration_ms=min_duration_ms,
        limit=limit,
        cursor=cursor,
    )


@router.get(
    "/lookup",
    summary="Trace ids by prefix",
    description="Stored trace ids (any time) that start with the given hex prefix, in order, at most "
    f"{MAX_PREFIX_MATCHES}: how a client turns the start of an id into the whole id, or lists the "
    "candidates when the prefix is ambiguous.",
)
def lookup_trace_ids(
    store: StoreDep,
    project: ProjectDep,
    prefix: Annotated[str, Query(pattern=TRACE_ID_PREFIX_PATTERN, description="1 to 32 hex characters.")],
) -> TraceIdMatches:
    return trace_ids_with_prefix(store, project, prefix)


@router.get(
    "/{trace_id}",
    summary="One request",
    description="The request's breakdown, busy view, explanation (dominant component, its provenance "
    "and a sentence) and span tree with each span's self time and share of the critical path. The "
    f"tree nests {MAX_NESTING} levels of children at most: a span at the last level lists all its "
    "descendants as its children, in tree order, each naming its own parent (parent_span_id), so any "
    "depth is answered and can be rebuilt exactly.",
    responses={404: {"description": "No request with this trace id."}},
)
def get_request(
    store: StoreDep,
    settings: SettingsDep,
    project: ProjectDep,
    trace_id: Annotated[str, Path(pattern=queries.TRACE_ID_PATTERN, description="32 hex characters.")],
) -> RequestDetail:
    detail = queries.request_detail(store, project, trace_id.lower(), prices=settings.prices)
    if detail is None:
        raise HTTPException(status_code=404, detail=f"no request with trace id {trace_id}")
    return detail
