"""One Alembic history for the metadata database: from empty, from an older release, offline."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.orm import Session

from latencylens_collector.auth import KeyStore
from latencylens_collector.auth.store import ApiKeyRecord
from latencylens_collector.auth.tokens import hash_key, new_key
from latencylens_collector.metadata import db
from latencylens_collector.slo.records import Base as SloBase

SLO_TABLES = {"slo_definitions", "slo_status", "slo_alerts", "slo_alert_transitions", "slo_silences"}
OUR_TABLES = SLO_TABLES | {"api_keys", db.VERSION_TABLE}
MODELS = [SloBase.metadata, ApiKeyRecord.metadata]


@pytest.fixture
def metadata_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'metadata.db'}"


def differences(engine: sa.Engine) -> list[object]:
    """What autogenerate would change so the database matches the table classes."""
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"version_table": db.VERSION_TABLE, "compare_type": True}
        )
        return list(compare_metadata(context, MODELS))


def test_upgrade_from_empty_matches_the_models(metadata_url: str) -> None:
    engine = db.make_engine(metadata_url)
    assert db.current_revision(engine) is None
    db.upgrade(engine)
    assert db.current_revision(engine) == "keys_0002"
    assert set(sa.inspect(engine).get_table_names()) == OUR_TABLES
    assert differences(engine) == []  # the migrations and the table classes agree
    db.upgrade(engine)  # a second run is a no-op
    assert db.current_revision(engine) == "keys_0002"
    # Autogenerate through the environment, as for a new revision: nothing to add, and another
    # application's table is not ours to drop.
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE dashboards (id INTEGER PRIMARY KEY)"))
    config = db.alembic_config(metadata_url)
    config.attributes["target_metadata"] = MODELS
    command.check(config)  # raises when the models and the migrations differ
    engine.dispose()


def _older_release(engine: sa.Engine, *, slo_tables: bool) -> str:
    """The metadata database as releases before the single history left it: the SLO tables at
    ``slo_0001`` in ``alembic_version_slo`` (when the service ran), ``api_keys`` made by
    ``create_all`` with one key in it. Returns that key."""
    if slo_tables:
        db.upgrade(engine, "slo_0001")
        with engine.begin() as connection:
            connection.execute(sa.text(f"ALTER TABLE {db.VERSION_TABLE} RENAME TO {db.LEGACY_VERSION_TABLE}"))
            connection.execute(
                sa.text(
                    "INSERT INTO slo_definitions (id, project, name, metric, filter, objective, "
                    "min_requests, source, created_at_ns) VALUES (1, 'default', 'chat p95', 'e2e', "
                    "'{}', '{}', 10, 'api', 1)"
                )
            )
    ApiKeyRecord.metadata.create_all(engine)  # how older releases made the keys table
    key_id, raw = new_key()
    with Session(engine) as session, session.begin():
        session.add(
            ApiKeyRecord(
                key_id=key_id, project="checkout", name="ci", key_hash=hash_key(raw), created_at_ns=1
            )
        )
    return raw


@pytest.mark.parametrize("slo_tables", [True, False], ids=["served", "keys-only"])
def test_an_older_database_upgrades_without_loss(metadata_url: str, slo_tables: bool) -> None:
    engine = db.make_engine(metadata_url)
    raw = _older_release(engine, slo_tables=slo_tables)
    assert db.current_revision(engine) == ("slo_0001" if slo_tables else None)

    keys = KeyStore(metadata_url)  # upgrades on open, as the service and the keys CLI do
    assert db.current_revision(engine) == "keys_0002"
    assert set(sa.inspect(engine).get_table_names()) == OUR_TABLES  # the legacy version table renamed
    assert keys.authenticate(raw) == "checkout"
    assert [(key.project, key.name) for key in keys.list()] == [("checkout", "ci")]
    _, second = keys.create("checkout", "second")
    assert keys.authenticate(second) == "checkout"
    with engine.connect() as connection:
        names = connection.execute(sa.text("SELECT name FROM slo_definitions")).scalars().all()
    assert names == (["chat p95"] if slo_tables else [])
    assert differences(engine) == []
    keys.close()
    engine.dispose()


def test_other_applications_tables_and_version_table_are_left_alone(metadata_url: str) -> None:
    engine = db.make_engine(metadata_url)
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE dashboards (id INTEGER PRIMARY KEY, body TEXT)"))
        connection.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
        connection.execute(sa.text("INSERT INTO alembic_version VALUES ('other_0001')"))
    db.upgrade(engine)
    db.downgrade(engine, "base")
    tables = set(sa.inspect(engine).get_table_names())
    assert tables == {"dashboards", "alembic_version", db.VERSION_TABLE}
    with engine.connect() as connection:
        assert connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() == "other_0001"
    engine.dispose()


def test_postgresql_ddl_can_be_generated_offline(capsys: pytest.CaptureFixture[str]) -> None:
    command.upgrade(db.alembic_config("postgresql+psycopg://lens@db.invalid/lens"), db.HEAD, sql=True)
    ddl = capsys.readouterr().out
    assert f"CREATE TABLE {db.VERSION_TABLE}" in ddl
    assert "id SERIAL NOT NULL" in ddl  # PostgreSQL dialect, not SQLite's
    assert "CREATE TABLE api_keys" in ddl
    assert f"UPDATE {db.VERSION_TABLE} SET version_num='keys_0002'" in ddl
