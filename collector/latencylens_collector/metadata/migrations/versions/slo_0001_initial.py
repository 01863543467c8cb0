"""SLO definitions, latest status, alerts with their transitions, silences.

Revision ID: slo_0001
Revises:
Create Date: 2025-06-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "slo_0001"
down_revision: str | None = None
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "slo_definitions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("metric", sa.String(16), nullable=False),
        sa.Column("filter", sa.JSON(), nullable=False),
        sa.Column("objective", sa.JSON(), nullable=False),
        sa.Column("min_requests", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("created_at_ns", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_slo_definitions"),
        sa.UniqueConstraint("project", "name", name="uq_slo_definitions_project_name"),
    )
    op.create_index("ix_slo_definitions_project", "slo_definitions", ["project"])
    op.create_table(
        "slo_status",
        sa.Column("slo_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("budget_remaining", sa.Float(), nullable=True),
        sa.Column("burn_rates", sa.JSON(), nullable=False),
        sa.Column("value_ns", sa.BigInteger(), nullable=True),
        sa.Column("total", sa.BigInteger(), nullable=False),
        sa.Column("evaluated_at_ns", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["slo_id"],
            ["slo_definitions.id"],
            name="fk_slo_status_slo_id_slo_definitions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("slo_id", name="pk_slo_status"),
    )
    op.create_table(
        "slo_alerts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slo_id", sa.Integer(), nullable=False),
        sa.Column("project", sa.String(200), nullable=False),
        sa.Column("slo_name", sa.String(200), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("started_at_ns", sa.BigInteger(), nullable=False),
        sa.Column("fired_at_ns", sa.BigInteger(), nullable=True),
        sa.Column("resolved_at_ns", sa.BigInteger(), nullable=True),
        sa.Column("value_ns", sa.BigInteger(), nullable=True),
        sa.Column("burn_rate", sa.Float(), nullable=True),
        sa.Column("dominant_component", sa.String(32), nullable=True),
        sa.Column("dominant_delta_ns", sa.BigInteger(), nullable=True),
        sa.Column("worst_trace_ids", sa.JSON(), nullable=False),
        sa.Column("notified_state", sa.String(16), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_slo_alerts"),
    )
    op.create_index("ix_slo_alerts_slo_id", "slo_alerts", ["slo_id"])
    op.create_index("ix_slo_alerts_project", "slo_alerts", ["project"])
    op.create_index("ix_slo_alerts_state", "slo_alerts", ["state"])
    op.create_table(
        "slo_alert_transitions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("alert_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("at_ns", sa.BigInteger(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["alert_id"],
            ["slo_alerts.id"],
            name="fk_slo_alert_transitions_alert_id_slo_alerts",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_slo_alert_transitions"),
    )
    op.create_index("ix_slo_alert_transitions_alert_id", "slo_alert_transitions", ["alert_id"])
    op.create_table(
        "slo_silences",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slo_id", sa.Integer(), nullable=False),
        sa.Column("project", sa.String(200), nullable=False),
        sa.Column("until_ns", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at_ns", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["slo_id"],
            ["slo_definitions.id"],
            name="fk_slo_silences_slo_id_slo_definitions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_slo_silences"),
    )
    op.create_index("ix_slo_silences_slo_id", "slo_silences", ["slo_id"])
    op.create_index("ix_slo_silences_project", "slo_silences", ["project"])


def downgrade() -> None:
    op.drop_table("slo_silences")
    op.drop_table("slo_alert_transitions")
    op.drop_table("slo_alerts")
    op.drop_table("slo_status")
    op.drop_table("slo_definitions")
