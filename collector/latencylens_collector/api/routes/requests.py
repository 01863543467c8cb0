"""Query API: the slowest requests and one request's breakdown."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query

from latencylens_collector import query
from latencylens_collector.api.deps import NowDep, StoreDep
from latencylens_collector.models import RequestDetail, RequestList

router = APIRouter(prefix="/api/requests", tags=["requests"])

_TIME_HELP = "ISO-8601 (naive means UTC) or unix seconds."


@router.get(
    "",
    summary="Slowest requests",
    description="Requests started in [since, until) (default: the last 24 h), slowest first, "
    "each with its end-to-end time split into components along the critical path.",
)
def list_requests(
    store: StoreDep,
    now: NowDep,
    since: Annotated[str | None, Query(description=f"Window start. {_TIME_HELP}")] = None,
    until: Annotated[str | None, Query(description=f"Window end (exclusive). {_TIME_HELP}")] = None,
    service: Annotated[str | None, Query(description="Only requests whose root is in this service.")] = None,
    model: Annotated[str | None, Query(description="Only requests whose primary model is this.")] = None,
    min_duration_ms: Annotated[
        float | None, Query(ge=0, description="Only requests at least this long (ms).")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=query.MAX_LIMIT, description="At most this many rows.")] = 50,
) -> RequestList:
    try:
        return query.list_requests(
            store,
            now=now,
            since=since,
            until=until,
            service=service,
            model=model,
            min_duration_ms=min_duration_ms,
            limit=limit,
        )
    except ValueError as exc:
        raise HTTPException(status_code=422, detail=f"invalid since/until: {exc}") from exc


@router.get(
    "/{trace_id}",
    summary="One request",
    description="The request's breakdown, its busy view and its span tree.",
    responses={404: {"description": "No request with this trace id."}},
)
def get_request(
    store: StoreDep,
    trace_id: Annotated[str, Path(pattern=query.TRACE_ID_PATTERN, description="32 hex characters.")],
) -> RequestDetail:
    detail = query.request_detail(store, trace_id.lower())
    if detail is None:
        raise HTTPException(status_code=404, detail=f"no request with trace id {trace_id}")
    return detail
