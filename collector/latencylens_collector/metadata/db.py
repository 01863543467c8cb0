"""An engine for the metadata database, and Alembic upgrades of all its tables (API keys, SLOs)."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any, Final

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url

MIGRATIONS_DIR: Final = Path(__file__).with_name("migrations")
VERSION_TABLE: Final = "alembic_version_latencylens"
"""Our own name, so another application's ``alembic_version`` in a shared database is left alone."""
LEGACY_VERSION_TABLE: Final = "alembic_version_slo"
"""Where databases from before the single history kept their revision; renamed on upgrade."""
HEAD: Final = "head"

# The key store and the SLO service may both upgrade at start-up; one at a time per process.
_UPGRADE_LOCK = threading.Lock()


def make_engine(url: str) -> Engine:
    """An engine for ``url``; a SQLite file gets its directory created, cross-thread use and
    foreign keys switched on (SQLite ignores them otherwise)."""
    parsed = make_url(url)
    kwargs: dict[str, Any] = {}
    sqlite = parsed.get_backend_name() == "sqlite"
    if sqlite:
        kwargs["connect_args"] = {"check_same_thread": False}
        if parsed.database and parsed.database != ":memory:":
            # An unwritable directory surfaces as the database's own error on first use.
            with contextlib.suppress(OSError):
                Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, **kwargs)
    if sqlite:
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def alembic_config(url: str | None = None) -> Config:
    """Alembic configuration pointing at the migrations shipped in this package."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(engine: Engine, revision: str = HEAD) -> None:
    """Bring every metadata table to ``revision`` (default: the newest)."""
    with _UPGRADE_LOCK, engine.begin() as connection:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade(engine: Engine, revision: str) -> None:
    with _UPGRADE_LOCK, engine.begin() as connection:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    """The applied revision, or None on a database the migrations never ran on."""
    with engine.connect() as connection:
        for table in (VERSION_TABLE, LEGACY_VERSION_TABLE):
            context = MigrationContext.configure(connection, opts={"version_table": table})
            revision = context.get_current_revision()
            if revision is not None:
                return revision
    return None
