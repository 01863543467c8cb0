"""SLO API: definitions with their status and budget, alerts with their history, silences.

Everything is scoped to the caller's project. Durations are integer ns; times are ISO-8601 UTC.

A project's key may create SLOs, never notification targets: webhooks come only from the server's
settings (an SLO body naming one is refused as an unknown field), and the names an SLO carries are
escaped by every notification format (:mod:`latencylens_collector.slo.notifier`).
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response

from latencylens_collector.api.deps import ProjectDep
from latencylens_collector.api.params import AlertIdPath, SloIdPath, SloIdQuery, limit_query
from latencylens_collector.queries.times import MAX_NS, to_ns
from latencylens_collector.slo import views
from latencylens_collector.slo.definitions import SloDefinition
from latencylens_collector.slo.repository import SloExists
from latencylens_collector.slo.service import SloService, SloUnavailable
from latencylens_collector.storage.store import RETRY_AFTER_SECONDS

_log = logging.getLogger(__name__)
router = APIRouter(tags=["slos"])


def get_slo_service(request: Request) -> SloService:
    service: SloService | None = getattr(request.app.state, "slo", None)
    if service is None:
        raise HTTPException(status_code=503, detail="SLO service not started")
    try:
        service.ensure_ready()
    except SloUnavailable as exc:
        _log.warning("SLO API unavailable: %s", exc)  # the database URL and its error: log only
        raise HTTPException(
            status_code=503,
            detail="SLO metadata database unavailable; retry later",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        ) from exc
    return service


SloServiceDep = Annotated[SloService, Depends(get_slo_service)]


@router.post(
    "/api/slos",
    status_code=201,
    summary="Create an SLO",
    responses={409: {"description": "An SLO of this name exists in the project."}},
)
def create_slo(definition: SloDefinition, service: SloServiceDep, project: ProjectDep) -> views.SloView:
    try:
        return views.create_slo(service.repository, project, definition, service.clock())
    except SloExists as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from exc


@router.get("/api/slos", summary="SLOs with their status, budget and burn rates")
def list_slos(service: SloServiceDep, project: ProjectDep) -> views.SloList:
    return views.list_slos(service.repository, project)


@router.get("/api/slos/{slo_id}", summary="One SLO", responses={404: {"description": "No such SLO."}})
def get_slo(slo_id: SloIdPath, service: SloServiceDep, project: ProjectDep) -> views.SloView:
    view = views.get_slo(service.repository, project, slo_id)
    if view is None:
        raise HTTPException(status_code=404, detail=f"no SLO {slo_id}")
    return view


@router.delete(
    "/api/slos/{slo_id}",
    status_code=204,
    summary="Delete an SLO (its open alert is resolved; alert history is kept)",
    responses={404: {"description": "No such SLO."}},
)
def delete_slo(slo_id: SloIdPath, service: SloServiceDep, project: ProjectDep) -> Response:
    if not service.repository.delete(project, slo_id, service.clock()):
        raise HTTPException(status_code=404, detail=f"no SLO {slo_id}")
    return Response(status_code=204)


@router.get("/api/alerts", summary="Alerts, newest first")
def list_alerts(
    service: SloServiceDep,
    project: ProjectDep,
    slo_id: SloIdQuery = None,
    limit: Annotated[int, limit_query(views.MAX_ALERTS)] = 100,
) -> views.AlertList:
    return views.list_alerts(service.repository, project, slo_id, limit)


@router.get(
    "/api/alerts/{alert_id}/history",
    summary="Every transition of an alert, oldest first",
    responses={404: {"description": "No such alert."}},
)
def alert_history(alert_id: AlertIdPath, service: SloServiceDep, project: ProjectDep) -> views.AlertHistory:
    history = views.alert_history(service.repository, project, alert_id)
    if history is None:
        raise HTTPException(status_code=404, detail=f"no alert {alert_id}")
    return history


@router.post(
    "/api/silences",
    status_code=201,
    summary="Silence an SLO's notifications until a time",
    responses={
        404: {"description": "No such SLO."},
        422: {"description": "`until` is not in the future (or past 2262)."},
    },
)
def create_silence(
    body: views.SilenceCreate, service: SloServiceDep, project: ProjectDep
) -> views.SilenceView:
    now_ns = service.clock()
    until_ns = to_ns(body.until)
    if not now_ns < until_ns <= MAX_NS:
        raise HTTPException(status_code=422, detail="until must be in the future, before 2262")
    record = service.repository.add_silence(project, body.slo_id, until_ns, body.reason, now_ns)
    if record is None:
        raise HTTPException(status_code=404, detail=f"no SLO {body.slo_id}")
    return views.silence_view(record, now_ns)


@router.get("/api/silences", summary="Silences of the project")
def list_silences(
    service: SloServiceDep,
    project: ProjectDep,
    active: Annotated[bool, Query(description="Only silences still in force.")] = False,
) -> views.SilenceList:
    return views.list_silences(service.repository, project, service.clock(), active)
