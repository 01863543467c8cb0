"""The service's configuration in one place: constructor argument, then environment, then default."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

ENV_CLICKHOUSE_DSN: Final = "LATENCYLENS_CLICKHOUSE_DSN"
"""Where spans are stored: ``chdb:///abs/dir`` (embedded) or ``http(s)://user:pass@host:8123/db``."""
ENV_DATABASE: Final = "LATENCYLENS_DATABASE"
"""ClickHouse database holding LatencyLens's tables."""
ENV_HOST: Final = "LATENCYLENS_HOST"
"""Interface the collector listens on."""
ENV_PORT: Final = "LATENCYLENS_PORT"
"""Port the collector listens on (OTLP/HTTP's 4318 by default)."""
ENV_MAX_BODY_BYTES: Final = "LATENCYLENS_MAX_BODY_BYTES"
"""Largest accepted OTLP request body, after decompression, in bytes."""

DEFAULT_DATA_DIR: Final = Path(".latencylens") / "data"
DEFAULT_DATABASE: Final = "latencylens"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 4318
DEFAULT_MAX_BODY_BYTES: Final = 16 * 1024 * 1024

CHDB_SCHEME: Final = "chdb://"
_DATABASE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def default_dsn(cwd: Path | None = None) -> str:
    """Embedded ClickHouse under ``<cwd>/.latencylens/data``, as an absolute path."""
    return chdb_dsn((cwd or Path.cwd()) / DEFAULT_DATA_DIR)


def chdb_dsn(path: Path | str) -> str:
    """A chdb DSN for a directory, made absolute (chdb binds one path per process)."""
    return f"{CHDB_SCHEME}{Path(path).expanduser().resolve()}"


def is_chdb(dsn: str) -> bool:
    return dsn.startswith(CHDB_SCHEME)


def chdb_path(dsn: str) -> Path:
    """The directory a chdb DSN points at."""
    return Path(dsn[len(CHDB_SCHEME) :])


class Settings:
    """Collector configuration. ``None`` means: look at the environment, then use the default."""

    def __init__(
        self,
        clickhouse_dsn: str | None = None,
        database: str | None = None,
        host: str | None = None,
        port: int | None = None,
        max_body_bytes: int | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        dsn = _pick(clickhouse_dsn, env.get(ENV_CLICKHOUSE_DSN)) or default_dsn()
        self.clickhouse_dsn: str = chdb_dsn(chdb_path(dsn)) if is_chdb(dsn) else dsn
        self.database: str = _pick(database, env.get(ENV_DATABASE)) or DEFAULT_DATABASE
        self.host: str = _pick(host, env.get(ENV_HOST)) or DEFAULT_HOST
        self.port: int = _int(port, env.get(ENV_PORT), DEFAULT_PORT, ENV_PORT)
        self.max_body_bytes: int = _int(
            max_body_bytes, env.get(ENV_MAX_BODY_BYTES), DEFAULT_MAX_BODY_BYTES, ENV_MAX_BODY_BYTES
        )
        if not _DATABASE_NAME.match(self.database):
            # The name is spliced into DDL, so only plain identifiers are allowed.
            raise ValueError(f"invalid database name {self.database!r}: use letters, digits and '_'")

    def __repr__(self) -> str:
        return (
            f"Settings(clickhouse_dsn={_redact(self.clickhouse_dsn)!r}, database={self.database!r}, "
            f"host={self.host!r}, port={self.port}, max_body_bytes={self.max_body_bytes})"
        )


def _pick(argument: str | None, env_value: str | None) -> str | None:
    if argument:
        return argument
    return env_value or None


def _int(argument: int | None, env_value: str | None, default: int, name: str) -> int:
    if argument is not None:
        return int(argument)
    if env_value:
        try:
            return int(env_value)
        except ValueError:
            raise ValueError(f"{name} must be an integer, got {env_value!r}") from None
    return default


def _redact(dsn: str) -> str:
    """Hide a password in a DSN so settings can be logged."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", dsn)
