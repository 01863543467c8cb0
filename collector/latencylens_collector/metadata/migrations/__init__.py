"""Alembic environment of the metadata database (version table ``alembic_version_latencylens``)."""
