"""SQLAlchemy tables of the SLO feature (all named ``slo_*``; the metadata database is shared).

Times are integer ns since the epoch, like everywhere else in LatencyLens, so no database's
time-zone handling can shift them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Integer, MetaData, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Explicit constraint names, so later migrations can alter them on every backend."""


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class SloRecord(Base):
    """One SLO definition, owned by a project."""

    __tablename__ = "slo_definitions"
    __table_args__ = (UniqueConstraint("project", "name", name="uq_slo_definitions_project_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project: Mapped[str] = mapped_column(String(200), index=True)
    name: Mapped[str] = mapped_column(String(200))
    metric: Mapped[str] = mapped_column(String(16))
    filter: Mapped[dict[str, Any]] = mapped_column(JSON)
    objective: Mapped[dict[str, Any]] = mapped_column(JSON)
    min_requests: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(16))
    """``api`` or ``file`` (loaded from LATENCYLENS_SLO_FILE)."""
    created_at_ns: Mapped[int] = mapped_column(BigInteger)


class SloStatusRecord(Base):
    """The latest evaluation of an SLO."""

    __tablename__ = "slo_status"

    slo_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("slo_definitions.id", ondelete="CASCADE"), primary_key=True
    )
    status: Mapped[str] = mapped_column(String(16))
    budget_remaining: Mapped[float | None] = mapped_column(Float, nullable=True)
    burn_rates: Mapped[dict[str, float]] = mapped_column(JSON)
    value_ns: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    total: Mapped[int] = mapped_column(BigInteger)
    evaluated_at_ns: Mapped[int] = mapped_column(BigInteger)


class AlertRecord(Base):
    """One alert: opened pending, maybe fired, finally resolved. Kept after its SLO is deleted."""

    __tablename__ = "slo_alerts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slo_id: Mapped[int] = mapped_column(Integer, index=True)
    project: Mapped[str] = mapped_column(String(200), index=True)
    slo_name: Mapped[str] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(16), index=True)
    started_at_ns: Mapped[int] = mapped_column(BigInteger)
    fired_at_ns: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    resolved_at_ns: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    value_ns: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    burn_rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    dominant_component: Mapped[str | None] = mapped_column(String(32), nullable=True)
    dominant_delta_ns: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    worst_trace_ids: Mapped[list[str]] = mapped_column(JSON)
    notified_state: Mapped[str | None] = mapped_column(String(16), nullable=True)
    """Last state people were told about, so a state is announced once."""


class TransitionRecord(Base):
    """Every state change of an alert, in order."""

    __tablename__ = "slo_alert_transitions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    alert_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("slo_alerts.id", ondelete="CASCADE"), index=True
    )
    state: Mapped[str] = mapped_column(String(16))
    at_ns: Mapped[int] = mapped_column(BigInteger)
    note: Mapped[str] = mapped_column(Text)


class SilenceRecord(Base):
    """No notifications for an SLO until ``until_ns``; alerts are still evaluated and stored."""

    __tablename__ = "slo_silences"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slo_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("slo_definitions.id", ondelete="CASCADE"), index=True
    )
    project: Mapped[str] = mapped_column(String(200), index=True)
    until_ns: Mapped[int] = mapped_column(BigInteger)
    reason: Mapped[str] = mapped_column(Text)
    created_at_ns: Mapped[int] = mapped_column(BigInteger)
