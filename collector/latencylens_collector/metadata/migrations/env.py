"""Alembic environment of the metadata database: every table (API keys, SLOs), one history.

Runs with a connection handed over by :func:`latencylens_collector.metadata.db.upgrade`, or with
``sqlalchemy.url`` from the Alembic config; offline mode prints the SQL. The revision is kept in
``alembic_version_latencylens`` so another application's tables and version table in the same
database are left alone. This environment imports no feature: to autogenerate a revision, put the
features' ``MetaData`` objects in ``config.attributes["target_metadata"]``; only their tables are
compared.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context
from alembic.operations import Operations
from sqlalchemy import MetaData, create_engine, inspect
from sqlalchemy.engine import Connection

from latencylens_collector.metadata.db import LEGACY_VERSION_TABLE, VERSION_TABLE

_target: MetaData | Sequence[MetaData] | None = context.config.attributes.get("target_metadata")
_metadatas = [_target] if isinstance(_target, MetaData) else list(_target or ())
OUR_TABLES = {name for metadata in _metadatas for name in metadata.tables}


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Compare only our tables when autogenerating."""
    if type_ == "table":
        return name in OUR_TABLES
    return True


def _configure(**kwargs: object) -> None:
    context.configure(
        target_metadata=_target,
        version_table=VERSION_TABLE,
        include_name=include_name,
        render_as_batch=True,  # SQLite alters tables by copying them
        compare_type=True,
        **kwargs,  # type: ignore[arg-type]
    )


def _adopt_legacy_version_table(connection: Connection) -> None:
    """A database from before the single history has its revision (``slo_0001``) in
    ``alembic_version_slo``: the same history, so the table is renamed, not re-created."""
    tables = set(inspect(connection).get_table_names())
    if LEGACY_VERSION_TABLE in tables and VERSION_TABLE not in tables:
        Operations(context.get_context()).rename_table(LEGACY_VERSION_TABLE, VERSION_TABLE)


def _run(connection: Connection) -> None:
    _configure(connection=connection)
    _adopt_legacy_version_table(connection)
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
