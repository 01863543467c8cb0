"""Alembic upgrade of the SLO tables from an empty SQLite file, next to another feature's tables."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from latencylens_collector.slo import db
from latencylens_collector.slo.models import Base

SLO_TABLES = {"slo_definitions", "slo_status", "slo_alerts", "slo_alert_transitions", "slo_silences"}


def test_upgrade_from_empty_matches_the_models(metadata_url: str) -> None:
    engine = db.make_engine(metadata_url)
    assert db.current_revision(engine) is None
    db.upgrade(engine)
    assert db.current_revision(engine) == "slo_0001"
    assert set(sa.inspect(engine).get_table_names()) == SLO_TABLES | {"alembic_version_slo"}
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"version_table": db.VERSION_TABLE, "compare_type": True}
        )
        # What autogenerate would change: nothing, so the migration and the models agree.
        assert compare_metadata(context, Base.metadata) == []
    db.upgrade(engine)  # a second run is a no-op
    assert db.current_revision(engine) == "slo_0001"
    engine.dispose()


def test_other_features_tables_and_version_table_are_left_alone(metadata_url: str) -> None:
    engine = db.make_engine(metadata_url)
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE api_keys (id INTEGER PRIMARY KEY, digest TEXT)"))
        connection.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
        connection.execute(sa.text("INSERT INTO alembic_version VALUES ('keys_0001')"))
    db.upgrade(engine)
    db.downgrade(engine, "base")
    tables = set(sa.inspect(engine).get_table_names())
    assert tables == {"api_keys", "alembic_version", "alembic_version_slo"}
    with engine.connect() as connection:
        assert connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() == "keys_0001"
    engine.dispose()


def test_postgresql_ddl_can_be_generated_offline(capsys: object) -> None:
    from alembic import command

    command.upgrade(db.alembic_config("postgresql+psycopg://lens@db.invalid/lens"), db.HEAD, sql=True)
    ddl = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "CREATE TABLE alembic_version_slo" in ddl
    assert "id SERIAL NOT NULL" in ddl  # PostgreSQL dialect, not SQLite's
    assert "INSERT INTO alembic_version_slo (version_num) VALUES ('slo_0001')" in ddl
