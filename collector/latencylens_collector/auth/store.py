"""API keys in the metadata database (SQLite file by default, any SQLAlchemy URL)."""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sqlalchemy import BigInteger, MetaData, String, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from latencylens_collector.auth.tokens import hash_key, key_id_of, matches, new_key
from latencylens_collector.metadata.db import make_engine, upgrade

PROJECT_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_UNKNOWN_KEY_HASH: Final = hash_key("ll_000000000000_unknown-key-placeholder")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention={"pk": "pk_%(table_name)s", "ix": "ix_%(column_0_label)s"})


class ApiKeyRecord(Base):
    """One API key. Times are integer ns since the epoch. The table is made by the metadata
    migrations (:mod:`latencylens_collector.metadata`)."""

    __tablename__ = "api_keys"

    key_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    project: Mapped[str] = mapped_column(String(100), index=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    key_hash: Mapped[str] = mapped_column(String(64))
    created_at_ns: Mapped[int] = mapped_column(BigInteger)
    revoked_at_ns: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


@dataclass(frozen=True)
class ApiKey:
    """What may be shown about a key: never its secret or hash."""

    key_id: str
    project: str
    name: str
    created_at_ns: int
    revoked_at_ns: int | None

    @property
    def active(self) -> bool:
        return self.revoked_at_ns is None


RECHECK_S: Final = 1.0
"""Longest a key check is answered from memory: a key created or revoked by another process
(``latencylens keys``) takes effect within this, and at once when the metadata database is a
SQLite file (its change is seen on the file; :class:`_Checked`)."""
REMEMBERED_KEYS: Final = 10_000


@dataclass(frozen=True)
class _Known:
    """What the database said about one key id, and when."""

    key_hash: str | None
    """None: no such key."""
    project: str
    revoked: bool


class _Checked:
    """Key checks answered from memory while the metadata database is unchanged: every OTLP export
    and API call checks its key, and asking the database each time cost the event loop more than
    decoding a small export. Forgotten after :data:`RECHECK_S`, or at once when the SQLite file
    changes (another process wrote to it)."""

    def __init__(self, url: str) -> None:
        parsed = make_url(url)
        database = parsed.database if parsed.get_backend_name() == "sqlite" else None
        self._file = Path(database).expanduser() if database and database != ":memory:" else None
        self._lock = threading.Lock()
        self._known: dict[str, _Known] = {}
        self._any_key: bool | None = None
        self._since = -math.inf
        self._signature: tuple[int, int] | None = None

    def _fresh(self) -> bool:
        """Whether what is remembered may still be used (drops it otherwise). Lock held."""
        now = time.monotonic()
        signature = self._file_signature()
        if now - self._since < RECHECK_S and signature == self._signature:
            return True
        self._known.clear()
        self._any_key = None
        self._since, self._signature = now, signature
        return False

    def _file_signature(self) -> tuple[int, int] | None:
        if self._file is None:
            return None
        try:
            stat = self._file.stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def any_key(self) -> bool | None:
        """Whether a key exists; None when not known."""
        with self._lock:
            return self._any_key if self._fresh() else None

    def remember_any_key(self, found: bool) -> None:
        with self._lock:
            self._any_key = found

    def key(self, key_id: str) -> _Known | None:
        with self._lock:
            return self._known.get(key_id) if self._fresh() else None

    def remember(self, key_id: str, known: _Known) -> None:
        with self._lock:
            if len(self._known) >= REMEMBERED_KEYS:
                self._known.pop(next(iter(self._known)))
            self._known[key_id] = known

    def forget(self) -> None:
        with self._lock:
            self._since = -math.inf


class KeyStore:
    """Creates, lists, revokes and checks API keys. Thread-safe (one session per call)."""

    def __init__(self, url: str, clock: Callable[[], int] = time.time_ns) -> None:
        self.url = url
        self.clock = clock
        self.engine = make_engine(url)
        upgrade(self.engine)
        self._checked = _Checked(url)

    def create(self, project: str, name: str = "") -> tuple[ApiKey, str]:
        """A new key for ``project``: its description and the raw key (shown once, never stored)."""
        check_project_name(project)
        key_id, raw = new_key()
        record = ApiKeyRecord(
            key_id=key_id, project=project, name=name, key_hash=hash_key(raw), created_at_ns=self.clock()
        )
        with Session(self.engine) as session, session.begin():
            session.add(record)
            key = _view(record)
        self._checked.forget()
        return key, raw

    def list(self) -> list[ApiKey]:
        with Session(self.engine) as session:
            records = session.scalars(select(ApiKeyRecord).order_by(ApiKeyRecord.created_at_ns))
            return [_view(record) for record in records]

    def revoke(self, key_id: str) -> bool:
        """Revoke a key; False when no active key has this id."""
        with Session(self.engine) as session, session.begin():
            result = session.execute(
                update(ApiKeyRecord)
                .where(ApiKeyRecord.key_id == key_id, ApiKeyRecord.revoked_at_ns.is_(None))
                .values(revoked_at_ns=self.clock())
            )
        self._checked.forget()
        return bool(getattr(result, "rowcount", 0))

    def authenticate(self, raw_key: str) -> str | None:
        """The project of an active key, else None."""
        key_id = key_id_of(raw_key)
        known = None
        if key_id is not None:
            known = self._checked.key(key_id)
            if known is None:
                with Session(self.engine) as session:
                    record = session.get(ApiKeyRecord, key_id)
                known = (
                    _Known(None, "", False)
                    if record is None
                    else _Known(record.key_hash, record.project, record.revoked_at_ns is not None)
                )
                self._checked.remember(key_id, known)
        if known is None or known.key_hash is None:
            matches(raw_key, _UNKNOWN_KEY_HASH)  # same work whether or not the id exists
            return None
        if not matches(raw_key, known.key_hash) or known.revoked:
            return None
        return known.project

    def enabled(self) -> bool:
        """Whether keys are in use: once any key was created (even if revoked since), every
        caller needs one. Revoking the last key does not reopen the service."""
        known = self._checked.any_key()
        if known is not None:
            return known
        with Session(self.engine) as session:
            found = session.scalar(select(ApiKeyRecord.key_id).limit(1)) is not None
        self._checked.remember_any_key(found)
        return found

    def close(self) -> None:
        self.engine.dispose()


def check_project_name(project: str) -> None:
    """Raise ValueError, saying what is allowed, unless ``project`` can name a project."""
    if not PROJECT_NAME.match(project):
        raise ValueError(
            f"invalid project name {project!r}: 1-100 letters, digits, '_', '-', '.', "
            "starting with a letter or digit"
        )


def _view(record: ApiKeyRecord) -> ApiKey:
    return ApiKey(record.key_id, record.project, record.name, record.created_at_ns, record.revoked_at_ns)
