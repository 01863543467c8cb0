"""The metadata database: an engine for any SQLAlchemy URL, and Alembic upgrades of the SLO tables."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy.engine import Engine

from latencylens_collector.metadata_db import make_engine as make_engine  # the engine recipe SLO code uses

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
VERSION_TABLE = "alembic_version_slo"
HEAD = "slo@head"


def alembic_config(url: str | None = None) -> Config:
    """Alembic configuration pointing at the migrations inside this package."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(engine: Engine, revision: str = HEAD) -> None:
    """Bring the SLO tables to ``revision`` (default: the newest)."""
    with engine.begin() as connection:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade(engine: Engine, revision: str) -> None:
    with engine.begin() as connection:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    """The applied SLO revision, or None on a database without the SLO tables."""
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()
