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
ENV_GRPC_PORT: Final = "LATENCYLENS_GRPC_PORT"
"""Port of the OTLP/gRPC receiver (4317 by default; 0 picks a free port)."""
ENV_GRPC_ENABLED: Final = "LATENCYLENS_GRPC_ENABLED"
"""``0``/``false``/``off`` turns the OTLP/gRPC receiver off."""
ENV_SPOOL_DIR: Final = "LATENCYLENS_SPOOL_DIR"
"""Directory of accepted batches waiting for ClickHouse; ``off`` disables the spool."""
ENV_MAX_QUEUE_SPANS: Final = "LATENCYLENS_MAX_QUEUE_SPANS"
"""Spans accepted but not yet written; beyond this exports are refused with 429 / RESOURCE_EXHAUSTED."""
ENV_MAX_BATCH_SPANS: Final = "LATENCYLENS_MAX_BATCH_SPANS"
"""Most spans written in one insert."""
ENV_FLUSH_INTERVAL_MS: Final = "LATENCYLENS_FLUSH_INTERVAL_MS"
"""Longest time, in ms, an accepted span waits before its batch is written."""
ENV_MAX_ATTRIBUTE_BYTES: Final = "LATENCYLENS_MAX_ATTRIBUTE_BYTES"
"""Attribute values (and span names) longer than this many UTF-8 bytes are truncated with a marker."""
ENV_METADATA_URL: Final = "LATENCYLENS_METADATA_URL"
"""SQLAlchemy URL of the metadata database (SLOs, API keys): SQLite file by default, any SQLAlchemy URL."""
ENV_SLO_FILE: Final = "LATENCYLENS_SLO_FILE"
"""YAML file of SLO definitions loaded (upserted) at start-up."""
ENV_SLO_EVAL_INTERVAL_S: Final = "LATENCYLENS_SLO_EVAL_INTERVAL_S"
"""Seconds between SLO evaluations; 0 turns the in-service scheduler off."""
ENV_ROLLUP_INTERVAL_S: Final = "LATENCYLENS_ROLLUP_INTERVAL_S"
"""Seconds between refreshes of the hourly rollup; 0 turns them off (queries then read rows)."""
ENV_ROLLUP_SETTLE_S: Final = "LATENCYLENS_ROLLUP_SETTLE_S"
ENV_SLO_WEBHOOK_URLS: Final = "LATENCYLENS_SLO_WEBHOOK_URLS"
"""Comma-separated URLs that receive SLO alerts as generic JSON."""
ENV_SLO_SLACK_WEBHOOK_URLS: Final = "LATENCYLENS_SLO_SLACK_WEBHOOK_URLS"
"""Comma-separated Slack-compatible incoming-webhook URLs that receive SLO alerts."""
ENV_PUBLIC_URL: Final = "LATENCYLENS_PUBLIC_URL"
"""Base URL people reach the service at; links in notifications start with it."""
ENV_CLICKHOUSE_CLUSTER: Final = "LATENCYLENS_CLICKHOUSE_CLUSTER"
"""ClickHouse cluster name: DDL runs ``ON CLUSTER``, tables are Replicated* with Distributed fronts."""
ENV_SPANS_RETENTION_DAYS: Final = "LATENCYLENS_SPANS_RETENTION_DAYS"
"""Days spans are kept (ClickHouse TTL on start_time); 0 keeps them forever."""
ENV_REQUESTS_RETENTION_DAYS: Final = "LATENCYLENS_REQUESTS_RETENTION_DAYS"
"""Days request rows are kept (ClickHouse TTL on start_time); 0 keeps them forever."""
ENV_ALLOW_UNAUTHENTICATED: Final = "LATENCYLENS_ALLOW_UNAUTHENTICATED"
"""``true`` lets a collector without API keys listen beyond loopback (a private network guards it)."""

DEFAULT_DATA_DIR: Final = Path(".latencylens") / "data"
DEFAULT_DATABASE: Final = "latencylens"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 4318
DEFAULT_MAX_BODY_BYTES: Final = 16 * 1024 * 1024
DEFAULT_GRPC_PORT: Final = 4317
DEFAULT_MAX_QUEUE_SPANS: Final = 100_000
DEFAULT_MAX_BATCH_SPANS: Final = 10_000
DEFAULT_FLUSH_INTERVAL_MS: Final = 200
DEFAULT_MAX_ATTRIBUTE_BYTES: Final = 64 * 1024
SPOOL_OFF: Final = "off"
DEFAULT_METADATA_FILE: Final = Path(".latencylens") / "metadata.db"
DEFAULT_SLO_EVAL_INTERVAL_S: Final = 60
DEFAULT_ROLLUP_INTERVAL_S: Final = 60
DEFAULT_ROLLUP_SETTLE_S: Final = 30
"""An hour is rolled up only once no row has been inserted into it for this long (inserts in
flight when a build starts must have committed): see :mod:`latencylens_collector.rollup`."""
DEFAULT_RETENTION_DAYS: Final = 0
"""Keep data forever unless a retention is configured (existing data is never dropped by an upgrade)."""

CHDB_SCHEME: Final = "chdb://"
_DATABASE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def default_dsn(cwd: Path | None = None) -> str:
    """Embedded ClickHouse under ``<cwd>/.latencylens/data``, as an absolute path."""
    return chdb_dsn((cwd or Path.cwd()) / DEFAULT_DATA_DIR)


def default_metadata_url(cwd: Path | None = None) -> str:
    """SQLite file ``<cwd>/.latencylens/metadata.db``, as an absolute path."""
    return f"sqlite:///{((cwd or Path.cwd()) / DEFAULT_METADATA_FILE).resolve()}"


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
        grpc_port: int | None = None,
        grpc_enabled: bool | None = None,
        spool_dir: str | Path | None = None,
        max_queue_spans: int | None = None,
        max_batch_spans: int | None = None,
        flush_interval_ms: int | None = None,
        max_attribute_bytes: int | None = None,
        metadata_url: str | None = None,
        slo_file: str | None = None,
        slo_eval_interval_s: int | None = None,
        rollup_interval_s: int | None = None,
        rollup_settle_s: int | None = None,
        slo_webhook_urls: str | None = None,
        slo_slack_webhook_urls: str | None = None,
        public_url: str | None = None,
        clickhouse_cluster: str | None = None,
        spans_retention_days: int | None = None,
        requests_retention_days: int | None = None,
        allow_unauthenticated: bool | None = None,
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
        self.grpc_port: int = _int(grpc_port, env.get(ENV_GRPC_PORT), DEFAULT_GRPC_PORT, ENV_GRPC_PORT)
        self.grpc_enabled: bool = (
            grpc_enabled if grpc_enabled is not None else _flag(env.get(ENV_GRPC_ENABLED), default=True)
        )
        spool = _pick(str(spool_dir) if spool_dir is not None else None, env.get(ENV_SPOOL_DIR))
        self.spool_dir: Path | None = None
        if spool != SPOOL_OFF:
            default = default_spool_dir(self.clickhouse_dsn, self.database)
            self.spool_dir = (Path(spool).expanduser() if spool else default).resolve()
        self.max_queue_spans: int = _int(
            max_queue_spans, env.get(ENV_MAX_QUEUE_SPANS), DEFAULT_MAX_QUEUE_SPANS, ENV_MAX_QUEUE_SPANS
        )
        self.max_batch_spans: int = _int(
            max_batch_spans, env.get(ENV_MAX_BATCH_SPANS), DEFAULT_MAX_BATCH_SPANS, ENV_MAX_BATCH_SPANS
        )
        self.flush_interval_ms: int = _int(
            flush_interval_ms,
            env.get(ENV_FLUSH_INTERVAL_MS),
            DEFAULT_FLUSH_INTERVAL_MS,
            ENV_FLUSH_INTERVAL_MS,
        )
        self.max_attribute_bytes: int = _int(
            max_attribute_bytes,
            env.get(ENV_MAX_ATTRIBUTE_BYTES),
            DEFAULT_MAX_ATTRIBUTE_BYTES,
            ENV_MAX_ATTRIBUTE_BYTES,
        )
        self.metadata_url: str = _pick(metadata_url, env.get(ENV_METADATA_URL)) or default_metadata_url()
        self.slo_file: str | None = _pick(slo_file, env.get(ENV_SLO_FILE))
        self.slo_eval_interval_s: int = _int(
            slo_eval_interval_s,
            env.get(ENV_SLO_EVAL_INTERVAL_S),
            DEFAULT_SLO_EVAL_INTERVAL_S,
            ENV_SLO_EVAL_INTERVAL_S,
        )
        self.rollup_interval_s: int = _int(
            rollup_interval_s,
            env.get(ENV_ROLLUP_INTERVAL_S),
            DEFAULT_ROLLUP_INTERVAL_S,
            ENV_ROLLUP_INTERVAL_S,
        )
        self.rollup_settle_s: int = _int(
            rollup_settle_s, env.get(ENV_ROLLUP_SETTLE_S), DEFAULT_ROLLUP_SETTLE_S, ENV_ROLLUP_SETTLE_S
        )
        self.slo_webhook_urls: tuple[str, ...] = _urls(_pick(slo_webhook_urls, env.get(ENV_SLO_WEBHOOK_URLS)))
        self.slo_slack_webhook_urls: tuple[str, ...] = _urls(
            _pick(slo_slack_webhook_urls, env.get(ENV_SLO_SLACK_WEBHOOK_URLS))
        )
        self.public_url: str = (
            _pick(public_url, env.get(ENV_PUBLIC_URL)) or f"http://{self.host}:{self.port}"
        ).rstrip("/")
        self.clickhouse_cluster: str | None = _pick(clickhouse_cluster, env.get(ENV_CLICKHOUSE_CLUSTER))
        if self.clickhouse_cluster is not None and not _DATABASE_NAME.match(self.clickhouse_cluster):
            raise ValueError(f"invalid cluster name {self.clickhouse_cluster!r}: use letters, digits and '_'")
        self.spans_retention_days: int = _int(
            spans_retention_days,
            env.get(ENV_SPANS_RETENTION_DAYS),
            DEFAULT_RETENTION_DAYS,
            ENV_SPANS_RETENTION_DAYS,
        )
        self.requests_retention_days: int = _int(
            requests_retention_days,
            env.get(ENV_REQUESTS_RETENTION_DAYS),
            DEFAULT_RETENTION_DAYS,
            ENV_REQUESTS_RETENTION_DAYS,
        )
        if min(self.spans_retention_days, self.requests_retention_days) < 0:
            raise ValueError("retention days must be 0 (keep forever) or more")
        self.allow_unauthenticated: bool = (
            allow_unauthenticated
            if allow_unauthenticated is not None
            else _flag(env.get(ENV_ALLOW_UNAUTHENTICATED), default=False)
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


def _urls(value: str | None) -> tuple[str, ...]:
    return tuple(url.strip() for url in (value or "").split(",") if url.strip())


def default_spool_dir(dsn: str, database: str) -> Path:
    """``spool/<database>`` next to the chdb data directory (``./.latencylens`` for a server)."""
    base = chdb_path(dsn).parent if is_chdb(dsn) else (Path.cwd() / DEFAULT_DATA_DIR).parent
    return base / "spool" / database


def _flag(value: str | None, default: bool) -> bool:
    if value is None or not value.strip():
        return default
    return value.strip().lower() not in ("0", "false", "off", "no")


def _redact(dsn: str) -> str:
    """Hide a password in a DSN so settings can be logged."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", dsn)
