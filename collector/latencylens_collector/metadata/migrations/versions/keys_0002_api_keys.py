"""API keys join the metadata history; an ``api_keys`` table made by an older release is adopted.

Releases before this one created ``api_keys`` with SQLAlchemy's ``create_all`` outside Alembic, with
the same columns, primary key and index as below. Such a table is kept as it is, keys included.

Revision ID: keys_0002
Revises: slo_0001
Create Date: 2025-07-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision: str = "keys_0002"
down_revision: str | None = "slo_0001"
branch_labels: tuple[str, ...] | None = None
depends_on: str | None = None


def upgrade() -> None:
    if not context.is_offline_mode() and sa.inspect(op.get_bind()).has_table("api_keys"):
        return
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(32), nullable=False),
        sa.Column("project", sa.String(100), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("created_at_ns", sa.BigInteger(), nullable=False),
        sa.Column("revoked_at_ns", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("key_id", name="pk_api_keys"),
    )
    op.create_index("ix_api_keys_project", "api_keys", ["project"])


def downgrade() -> None:
    op.drop_table("api_keys")
