"""What the SLO API returns, and the plain functions that build it (routes only call these)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from latencylens_collector.queries.times import from_ns
from latencylens_collector.slo.definitions import SloDefinition
from latencylens_collector.slo.records import AlertRecord, SilenceRecord, SloRecord, SloStatusRecord
from latencylens_collector.slo.repository import SloRepository

MAX_ALERTS = 1000


class SloView(BaseModel):
    id: int
    name: str
    project: str
    source: str = Field(description="`api` or `file` (LATENCYLENS_SLO_FILE).")
    metric: str
    filter: dict[str, str]
    objective: dict[str, Any]
    min_requests: int
    status: str = Field(
        description="`ok`, `pending`, `firing` or `no_data` (never evaluated, or too few requests)."
    )
    budget_remaining: float | None = Field(
        description="Share of the error budget left; None without requests."
    )
    burn_rates: dict[str, float] = Field(description="Ratio SLOs: burn rate per window (1h, 5m, 6h, 30m).")
    value_ns: int | None = Field(description="Measured value: the objective's quantile of the metric.")
    evaluated_at: datetime | None


class SloList(BaseModel):
    slos: list[SloView]


class AlertView(BaseModel):
    id: int
    slo_id: int
    slo_name: str
    state: str
    started_at: datetime
    fired_at: datetime | None
    resolved_at: datetime | None
    value_ns: int | None
    burn_rate: float | None
    dominant_component: str | None
    dominant_delta_ns: int | None
    worst_trace_ids: list[str]


class AlertList(BaseModel):
    alerts: list[AlertView]


class TransitionView(BaseModel):
    state: str
    at: datetime
    note: str


class AlertHistory(BaseModel):
    transitions: list[TransitionView]


class SilenceCreate(BaseModel):
    slo_id: int = Field(ge=1, le=2**63 - 1, description="The SLO's id (ids are signed 64-bit).")
    until: datetime = Field(description="ISO-8601; naive means UTC.")
    reason: str = ""


class SilenceView(BaseModel):
    id: int
    slo_id: int
    until: datetime
    reason: str
    created_at: datetime
    active: bool


class SilenceList(BaseModel):
    silences: list[SilenceView]


def _maybe(ns: int | None) -> datetime | None:
    return None if ns is None else from_ns(ns)


def slo_view(record: SloRecord, status: SloStatusRecord | None) -> SloView:
    return SloView(
        id=record.id,
        name=record.name,
        project=record.project,
        source=record.source,
        metric=record.metric,
        filter=dict(record.filter),
        objective=dict(record.objective),
        min_requests=record.min_requests,
        status=status.status if status else "no_data",
        budget_remaining=status.budget_remaining if status else None,
        burn_rates=dict(status.burn_rates) if status else {},
        value_ns=status.value_ns if status else None,
        evaluated_at=from_ns(status.evaluated_at_ns) if status else None,
    )


def list_slos(repository: SloRepository, project: str) -> SloList:
    records = repository.slos(project)
    statuses = repository.statuses([r.id for r in records])
    return SloList(slos=[slo_view(r, statuses.get(r.id)) for r in records])


def get_slo(repository: SloRepository, project: str, slo_id: int) -> SloView | None:
    record = repository.get(project, slo_id)
    if record is None:
        return None
    return slo_view(record, repository.statuses([slo_id]).get(slo_id))


def create_slo(repository: SloRepository, project: str, definition: SloDefinition, now_ns: int) -> SloView:
    return slo_view(repository.create(project, definition, now_ns), None)


def alert_view(record: AlertRecord) -> AlertView:
    return AlertView(
        id=record.id,
        slo_id=record.slo_id,
        slo_name=record.slo_name,
        state=record.state,
        started_at=from_ns(record.started_at_ns),
        fired_at=_maybe(record.fired_at_ns),
        resolved_at=_maybe(record.resolved_at_ns),
        value_ns=record.value_ns,
        burn_rate=record.burn_rate,
        dominant_component=record.dominant_component,
        dominant_delta_ns=record.dominant_delta_ns,
        worst_trace_ids=list(record.worst_trace_ids),
    )


def list_alerts(repository: SloRepository, project: str, slo_id: int | None, limit: int) -> AlertList:
    records = repository.alerts(project, slo_id, max(1, min(limit, MAX_ALERTS)))
    return AlertList(alerts=[alert_view(r) for r in records])


def alert_history(repository: SloRepository, project: str, alert_id: int) -> AlertHistory | None:
    if repository.alert(project, alert_id) is None:
        return None
    return AlertHistory(
        transitions=[
            TransitionView(state=t.state, at=from_ns(t.at_ns), note=t.note)
            for t in repository.history(alert_id)
        ]
    )


def silence_view(record: SilenceRecord, now_ns: int) -> SilenceView:
    return SilenceView(
        id=record.id,
        slo_id=record.slo_id,
        until=from_ns(record.until_ns),
        reason=record.reason,
        created_at=from_ns(record.created_at_ns),
        active=record.until_ns > now_ns,
    )


def list_silences(repository: SloRepository, project: str, now_ns: int, active_only: bool) -> SilenceList:
    records = repository.silences(project, now_ns if active_only else None)
    return SilenceList(silences=[silence_view(r, now_ns) for r in records])
