"""The service's SQL metadata database (API keys, SLOs): one engine recipe for every user.

SQLite by default, any SQLAlchemy URL (PostgreSQL, ...) in production.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url


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
