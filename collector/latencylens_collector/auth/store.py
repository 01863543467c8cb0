"""API keys in the metadata database (SQLite file by default, any SQLAlchemy URL)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from sqlalchemy import BigInteger, MetaData, String, select, update
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


class KeyStore:
    """Creates, lists, revokes and checks API keys. Thread-safe (one session per call)."""

    def __init__(self, url: str, clock: Callable[[], int] = time.time_ns) -> None:
        self.url = url
        self.clock = clock
        self.engine = make_engine(url)
        upgrade(self.engine)

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
            return bool(getattr(result, "rowcount", 0))

    def authenticate(self, raw_key: str) -> str | None:
        """The project of an active key, else None."""
        key_id = key_id_of(raw_key)
        record = None
        if key_id is not None:
            with Session(self.engine) as session:
                record = session.get(ApiKeyRecord, key_id)
        if record is None:
            matches(raw_key, _UNKNOWN_KEY_HASH)  # same work whether or not the id exists
            return None
        if not matches(raw_key, record.key_hash) or record.revoked_at_ns is not None:
            return None
        return record.project

    def enabled(self) -> bool:
        """Whether keys are in use: once any key was created (even if revoked since), every
        caller needs one. Revoking the last key does not reopen the service."""
        with Session(self.engine) as session:
            return session.scalar(select(ApiKeyRecord.key_id).limit(1)) is not None

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
