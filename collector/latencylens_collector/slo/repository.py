"""Reads and writes of the SLO tables. Every caller-facing read takes the caller's project.

Records are returned detached (``expire_on_commit=False``), so callers read them after the
session is gone without touching the database again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from latencylens_collector.slo.definitions import SloDefinition
from latencylens_collector.slo.lifecycle import FIRING, OPEN_STATES, PENDING, RESOLVED
from latencylens_collector.slo.records import (
    AlertRecord,
    SilenceRecord,
    SloRecord,
    SloStatusRecord,
    TransitionRecord,
)


class SloExists(Exception):
    """An SLO of this name already exists in the project."""


class SloRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def session(self) -> Session:
        return self._sessions()

    # --- definitions --------------------------------------------------------------------------
    def create(self, project: str, definition: SloDefinition, now_ns: int, source: str = "api") -> SloRecord:
        record = SloRecord(project=project, source=source, created_at_ns=now_ns, **_columns(definition))
        try:
            with self.session() as session, session.begin():
                session.add(record)
        except IntegrityError as exc:
            raise SloExists(f"an SLO named {definition.name!r} already exists") from exc
        return record

    def upsert(self, project: str, definition: SloDefinition, now_ns: int, source: str) -> SloRecord:
        """Create, or replace the definition of the SLO with the same name (status and alerts stay)."""
        with self.session() as session, session.begin():
            record = session.scalars(
                select(SloRecord).where(SloRecord.project == project, SloRecord.name == definition.name)
            ).one_or_none()
            if record is None:
                record = SloRecord(project=project, source=source, created_at_ns=now_ns)
                session.add(record)
            for key, value in _columns(definition).items():
                setattr(record, key, value)
            record.source = source
        return record

    def slos(self, project: str | None) -> list[SloRecord]:
        """SLOs of a project (None: of every project, for the evaluator), oldest first."""
        query = select(SloRecord).order_by(SloRecord.id)
        if project is not None:
            query = query.where(SloRecord.project == project)
        with self.session() as session:
            return list(session.scalars(query))

    def get(self, project: str, slo_id: int) -> SloRecord | None:
        with self.session() as session:
            return session.scalars(
                select(SloRecord).where(SloRecord.project == project, SloRecord.id == slo_id)
            ).one_or_none()

    def delete(self, project: str, slo_id: int, now_ns: int) -> bool:
        """Delete an SLO, its status and silences; its open alert is resolved, history is kept."""
        with self.session() as session, session.begin():
            record = session.scalars(
                select(SloRecord).where(SloRecord.project == project, SloRecord.id == slo_id)
            ).one_or_none()
            if record is None:
                return False
            alert = _open_alert(session, slo_id)
            if alert is not None:
                _transition(session, alert, RESOLVED, now_ns, "SLO deleted")
            session.execute(delete(SloStatusRecord).where(SloStatusRecord.slo_id == slo_id))
            session.execute(delete(SilenceRecord).where(SilenceRecord.slo_id == slo_id))
            session.delete(record)
        return True

    # --- status -------------------------------------------------------------------------------
    def statuses(self, slo_ids: Sequence[int]) -> dict[int, SloStatusRecord]:
        if not slo_ids:
            return {}
        with self.session() as session:
            rows = session.scalars(select(SloStatusRecord).where(SloStatusRecord.slo_id.in_(slo_ids)))
            return {row.slo_id: row for row in rows}

    def save_status(self, slo_id: int, **values: Any) -> None:
        with self.session() as session, session.begin():
            row = session.get(SloStatusRecord, slo_id)
            if row is None:
                if session.get(SloRecord, slo_id) is None:
                    return  # deleted while it was being evaluated
                row = SloStatusRecord(slo_id=slo_id)
                session.add(row)
            for key, value in values.items():
                setattr(row, key, value)

    # --- alerts -------------------------------------------------------------------------------
    def open_alert(self, slo_id: int) -> AlertRecord | None:
        with self.session() as session:
            return _open_alert(session, slo_id)

    def open_new_alert(self, slo: SloRecord, now_ns: int) -> AlertRecord:
        alert = AlertRecord(
            slo_id=slo.id,
            project=slo.project,
            slo_name=slo.name,
            state=PENDING,
            started_at_ns=now_ns,
            worst_trace_ids=[],
        )
        with self.session() as session, session.begin():
            session.add(alert)
        return alert

    def record_transition(self, alert_id: int, state: str, at_ns: int, note: str) -> AlertRecord:
        """Move an alert to ``state`` and store the transition (the first one is stored as-is)."""
        with self.session() as session, session.begin():
            alert = session.get_one(AlertRecord, alert_id)
            _transition(session, alert, state, at_ns, note)
            return alert

    def update_alert(self, alert_id: int, **values: Any) -> AlertRecord:
        with self.session() as session, session.begin():
            alert = session.get_one(AlertRecord, alert_id)
            for key, value in values.items():
                setattr(alert, key, value)
            return alert

    def add_note(self, alert_id: int, at_ns: int, note: str) -> None:
        """A history entry that keeps the current state (e.g. a notification outcome)."""
        with self.session() as session, session.begin():
            alert = session.get_one(AlertRecord, alert_id)
            session.add(TransitionRecord(alert_id=alert_id, state=alert.state, at_ns=at_ns, note=note))

    def alerts(self, project: str, slo_id: int | None, limit: int) -> list[AlertRecord]:
        """Newest first."""
        query = select(AlertRecord).where(AlertRecord.project == project)
        if slo_id is not None:
            query = query.where(AlertRecord.slo_id == slo_id)
        with self.session() as session:
            return list(session.scalars(query.order_by(AlertRecord.id.desc()).limit(limit)))

    def alert(self, project: str, alert_id: int) -> AlertRecord | None:
        with self.session() as session:
            return session.scalars(
                select(AlertRecord).where(AlertRecord.project == project, AlertRecord.id == alert_id)
            ).one_or_none()

    def history(self, alert_id: int) -> list[TransitionRecord]:
        with self.session() as session:
            return list(
                session.scalars(
                    select(TransitionRecord)
                    .where(TransitionRecord.alert_id == alert_id)
                    .order_by(TransitionRecord.id)
                )
            )

    def firing_slo_ids(self) -> set[int]:
        with self.session() as session:
            return set(session.scalars(select(AlertRecord.slo_id).where(AlertRecord.state == FIRING)))

    # --- silences -----------------------------------------------------------------------------
    def add_silence(
        self, project: str, slo_id: int, until_ns: int, reason: str, now_ns: int
    ) -> SilenceRecord | None:
        """None when the project has no such SLO."""
        with self.session() as session, session.begin():
            slo = session.scalars(
                select(SloRecord).where(SloRecord.project == project, SloRecord.id == slo_id)
            ).one_or_none()
            if slo is None:
                return None
            silence = SilenceRecord(
                slo_id=slo_id, project=project, until_ns=until_ns, reason=reason, created_at_ns=now_ns
            )
            session.add(silence)
        return silence

    def silences(self, project: str, active_at_ns: int | None = None) -> list[SilenceRecord]:
        query = select(SilenceRecord).where(SilenceRecord.project == project)
        if active_at_ns is not None:
            query = query.where(SilenceRecord.until_ns > active_at_ns)
        with self.session() as session:
            return list(session.scalars(query.order_by(SilenceRecord.id)))

    def active_silence(self, slo_id: int, now_ns: int) -> SilenceRecord | None:
        """The silence covering ``now`` that lasts longest, if any."""
        with self.session() as session:
            return session.scalars(
                select(SilenceRecord)
                .where(SilenceRecord.slo_id == slo_id, SilenceRecord.until_ns > now_ns)
                .order_by(SilenceRecord.until_ns.desc())
                .limit(1)
            ).one_or_none()


def _columns(definition: SloDefinition) -> dict[str, Any]:
    return {
        "name": definition.name,
        "metric": definition.metric,
        "filter": definition.filter.model_dump(exclude_none=True),
        "objective": definition.objective_json(),
        "min_requests": definition.min_requests,
    }


def _open_alert(session: Session, slo_id: int) -> AlertRecord | None:
    return session.scalars(
        select(AlertRecord)
        .where(AlertRecord.slo_id == slo_id, AlertRecord.state.in_(sorted(OPEN_STATES)))
        .order_by(AlertRecord.id.desc())
        .limit(1)
    ).one_or_none()


def _transition(session: Session, alert: AlertRecord, state: str, at_ns: int, note: str) -> None:
    alert.state = state
    if state == FIRING:
        alert.fired_at_ns = at_ns
    elif state == RESOLVED:
        alert.resolved_at_ns = at_ns
    session.add(TransitionRecord(alert_id=alert.id, state=state, at_ns=at_ns, note=note))
