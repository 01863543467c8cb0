"""The service's SQL metadata database (API keys, SLOs): one engine recipe, one Alembic history.

SQLite file by default, any SQLAlchemy URL (PostgreSQL, ...) in production. Features keep their
table classes; the migrations here create and change every metadata table, in one version table.
"""
