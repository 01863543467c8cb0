"""Alembic environment for the SLO tables.

Runs with a connection handed over by :func:`latencylens_collector.slo.db.upgrade`, or with
``sqlalchemy.url`` from the Alembic config (``alembic -c ...``); offline mode prints the SQL.
Only ``slo_*`` tables are compared and only ``alembic_version_slo`` is written, so other
features can keep their own tables and version table in the same database.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from latencylens_collector.slo.models import Base

VERSION_TABLE = "alembic_version_slo"
TABLE_PREFIX = "slo_"


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Leave tables of other features alone."""
    if type_ == "table":
        return bool(name) and str(name).startswith(TABLE_PREFIX)
    return True


def _configure(**kwargs: object) -> None:
    context.configure(
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        include_name=include_name,
        render_as_batch=True,  # SQLite alters tables by copying them
        compare_type=True,
        **kwargs,  # type: ignore[arg-type]
    )


def _run(connection: Connection) -> None:
    _configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    config = context.config
    if context.is_offline_mode():
        _configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.begin() as owned:
        _run(owned)
    engine.dispose()


main()
