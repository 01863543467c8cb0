"""Alembic environment of the SLO tables (version table ``alembic_version_slo``)."""
