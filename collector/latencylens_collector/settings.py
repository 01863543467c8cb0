"""The service's configuration in one place: constructor argument, then environment, then default.

Each setting is declared once, as a field of :class:`Settings`; its environment variable is the
field name in capitals after ``LATENCYLENS_`` (``port`` -> ``LATENCYLENS_PORT``, see :func:`env_var`).
An argument that is ``None`` or ``""`` counts as not given, and so does an empty variable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BeforeValidator, Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)
from pydantic_settings.sources.utils import parse_env_vars

ENV_PREFIX: Final = "LATENCYLENS_"
DEFAULT_DATA_DIR: Final = Path(".latencylens") / "data"
DEFAULT_METADATA_FILE: Final = Path(".latencylens") / "metadata.db"
DEFAULT_DATABASE: Final = "latencylens"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 4318
DEFAULT_CONTENT_MAX_BYTES: Final = 16 * 1024
SPOOL_OFF: Final = "off"
CHDB_SCHEME: Final = "chdb://"
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


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


def default_spool_dir(dsn: str, database: str) -> Path:
    """``spool/<database>`` next to the chdb data directory (``./.latencylens`` for a server)."""
    base = chdb_path(dsn).parent if is_chdb(dsn) else (Path.cwd() / DEFAULT_DATA_DIR).parent
    return base / "spool" / database


def redact_dsn(dsn: str) -> str:
    """Hide a password in a DSN or URL so it can be logged."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", dsn)


def env_var(field: str) -> str:
    """The environment variable of a setting: ``env_var("port") == "LATENCYLENS_PORT"``."""
    if field not in Settings.model_fields:
        raise KeyError(f"no setting named {field!r}")
    return f"{ENV_PREFIX}{field.upper()}"


def _integer(value: object, info: ValidationInfo) -> object:
    """Text (from the environment) to int, with an error that names the variable."""
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{env_var(str(info.field_name))} must be an integer, got {value!r}") from None
    return value


def _url_list(value: object) -> object:
    """Comma-separated text to a tuple of URLs, blanks dropped."""
    if isinstance(value, str):
        return tuple(url.strip() for url in value.split(",") if url.strip())
    return value


Integer = Annotated[int, BeforeValidator(_integer)]
UrlList = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_url_list)]

# Where environment variables are read from while one Settings is built (None: os.environ).
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("latencylens_settings_environ", default=None)


class Settings(BaseSettings):
    """Collector configuration.

    ``Settings(port=0)`` reads ``os.environ``; ``Settings(port=0, environ={})`` reads the given
    mapping instead (tests, embedding), so the process environment cannot leak in.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="forbid", frozen=True
    )

    clickhouse_dsn: str = Field(
        default_factory=default_dsn,
        description="Where spans are stored: ``chdb:///abs/dir`` (embedded, a relative directory is made "
        "absolute) or ``http(s)://user:pass@host:8123/db``. Default: ``./.latencylens/data``.",
    )
    database: str = Field(DEFAULT_DATABASE, description="ClickHouse database holding LatencyLens's tables.")
    host: str = Field(DEFAULT_HOST, description="Interface the collector listens on.")
    port: Integer = Field(DEFAULT_PORT, description="Port the collector listens on (OTLP/HTTP's 4318).")
    max_body_bytes: Integer = Field(
        8 * 1024 * 1024,
        description="Largest accepted OTLP export, in bytes after decompression (a gzip or deflate body "
        "is inflated as it arrives and refused with 413 once over it); also the gRPC message limit.",
    )
    grpc_port: Integer = Field(4317, description="Port of the OTLP/gRPC receiver; 0 picks a free port.")
    grpc_enabled: bool = Field(True, description="``false`` turns the OTLP/gRPC receiver off.")
    spool_dir: Path | None = Field(
        None,
        validate_default=True,
        description="Directory of accepted batches waiting for ClickHouse; ``off`` disables the spool. "
        "Default: ``spool/<database>`` next to the chdb data directory.",
    )
    max_spool_bytes: Integer = Field(
        1024 * 1024 * 1024,
        description="Most bytes the spool directory holds (pending and failed batches); beyond this, "
        "or with the disk full, a batch ClickHouse cannot take is refused with 503 and /readyz is not "
        "ready. 0: only the disk limits it.",
    )
    max_queue_spans: Integer = Field(
        100_000,
        description="Spans accepted but not yet written; beyond this exports are refused with 429 / "
        "RESOURCE_EXHAUSTED.",
    )
    max_queue_bytes: Integer = Field(
        256 * 1024 * 1024,
        description="Bytes of decoded spans accepted but not yet written (what they hold in memory: "
        "each string at its size, the resource once per span, a fixed cost per span and attribute); "
        "beyond this exports are refused with 429 / RESOURCE_EXHAUSTED.",
    )
    queue_project_share: float = Field(
        0.5,
        description="Share (0 to 1) of the queue's spans and bytes one project may hold, so a project "
        "that fills its share gets 429 while others still get in; 1 lets one project fill the queue.",
    )
    max_batch_spans: Integer = Field(10_000, description="Most spans written in one insert.")
    max_batch_bytes: Integer = Field(
        32 * 1024 * 1024,
        description="Most bytes of decoded spans written in one insert; an export that decodes to more "
        "is refused with 413.",
    )
    max_span_bytes: Integer = Field(
        1024 * 1024,
        description="UTF-8 bytes of one span's attributes and its events' attributes (keys and values); "
        "a span over it is stored with its largest values cut, and marked.",
    )
    max_trace_spans: Integer = Field(
        10_000,
        description="Spans of one trace after which its further spans are stored marked "
        "``latencylens.trace.too_large`` (the trace is too large to attribute).",
    )
    flush_interval_ms: Integer = Field(
        200, description="Longest time, in ms, an accepted span waits before its batch is written."
    )
    max_attribute_bytes: Integer = Field(
        64 * 1024,
        description="Attribute values (and span names) longer than this many UTF-8 bytes are truncated "
        "with a marker.",
    )
    ingest_path: Literal["python", "engine"] = Field(
        "python",
        description="Who decodes OTLP/protobuf exports: ``python`` (the collector, span by span) or "
        "``engine`` (ClickHouse, many bodies per insert; a body it cannot store exactly, and every "
        "OTLP/JSON export, takes the Python path). docs/collector.md#engine-ingest.",
    )
    store_content: bool = Field(
        False,
        description="``true`` stores message content (prompts, completions, tool arguments); by default "
        "it is dropped.",
    )
    content_max_bytes: Integer = Field(
        DEFAULT_CONTENT_MAX_BYTES,
        description="With content stored, each content value longer than this many UTF-8 bytes is cut "
        "with a marker.",
    )
    metadata_url: str = Field(
        default_factory=default_metadata_url,
        description="SQLAlchemy URL of the metadata database (SLOs, API keys). Default: SQLite file "
        "``./.latencylens/metadata.db``.",
    )
    slo_file: str | None = Field(
        None, description="YAML file of SLO definitions loaded (upserted) at start-up."
    )
    slo_eval_interval_s: Integer = Field(
        60, description="Seconds between SLO evaluations; 0 turns the in-service scheduler off."
    )
    rollup_interval_s: Integer = Field(
        60,
        description="Seconds between refreshes of the hourly rollup; 0 turns them off (queries read rows).",
    )
    rollup_settle_s: Integer = Field(
        30,
        description="An hour is rolled up only once no row has been inserted into it for this long "
        "(inserts in flight when a build starts must have committed): see "
        ":mod:`latencylens_collector.storage.rollup`.",
    )
    reconcile_interval_s: Integer = Field(
        5,
        description="Seconds between passes of the reconciler, which recomputes the request rows of "
        "settled traces from their stored spans (:mod:`latencylens_collector.pipeline.reconciler`); "
        "0 turns it off (rows are then only as right as the collector that wrote them saw).",
    )
    reconcile_settle_s: Integer = Field(
        10,
        description="A trace is reconciled once no span of it has been inserted for this long (store "
        "clock); a trace still without its root span then gets a row flagged root_missing.",
    )
    reconcile_lookback_s: Integer = Field(
        3600,
        description="At start-up the reconciler looks at traces inserted this far back, so traces "
        "a stopped collector left half-written are repaired (at most 2 days).",
    )
    slo_webhook_urls: UrlList = Field((), description="Comma-separated URLs that receive SLO alerts as JSON.")
    slo_slack_webhook_urls: UrlList = Field(
        (), description="Comma-separated Slack-compatible incoming-webhook URLs that receive SLO alerts."
    )
    public_url: str = Field(
        "",
        validate_default=True,
        description="Base URL people reach the service at; links in notifications start with it. "
        "Default: ``http://<host>:<port>``.",
    )
    clickhouse_cluster: str | None = Field(
        None,
        description="ClickHouse cluster name: DDL runs ``ON CLUSTER``, tables are Replicated* with "
        "Distributed fronts.",
    )
    spans_retention_days: Integer = Field(
        0, description="Days spans are kept (ClickHouse TTL on start_time); 0 keeps them forever."
    )
    requests_retention_days: Integer = Field(
        0, description="Days request rows are kept (ClickHouse TTL on start_time); 0 keeps them forever."
    )
    allow_unauthenticated: bool = Field(
        False,
        description="``true`` lets a collector without API keys listen beyond loopback (a private "
        "network guards it).",
    )
    allowed_hosts: UrlList = Field(
        (),
        description="Comma-separated host names a collector without API keys also answers to, besides "
        "localhost, 127.0.0.1, ::1 and ``host`` (a request naming another Host gets 421: DNS rebinding "
        "cannot reach the API); ``*`` turns the check off.",
    )
    header_timeout_s: Integer = Field(
        10, description="Seconds a client has to send a request's headers; then the connection is closed."
    )
    body_timeout_s: Integer = Field(
        60, description="Seconds a client has to send a request's whole body; then it gets 408 and is closed."
    )
    keep_alive_timeout_s: Integer = Field(
        5, description="Seconds an idle keep-alive connection stays open between requests."
    )
    max_connections: Integer = Field(
        1000,
        description="Open HTTP connections; one more is answered 503 and closed at once (also kept "
        "below the process's open-file limit).",
    )
    metrics_top_series: Integer = Field(
        50,
        description="Per project, the (service, model) pairs with the most requests that get series of "
        "their own in /metrics' latency histograms (the rest add up under ``other``); SLOs likewise.",
    )

    def __init__(self, environ: Mapping[str, str] | None = None, **arguments: Any) -> None:
        given = {name: value for name, value in arguments.items() if value is not None and value != ""}
        token = _ENVIRON.set(environ)
        try:
            super().__init__(**given)
        except ValidationError as exc:
            raise SettingsError(_describe(exc)) from None
        finally:
            _ENVIRON.reset(token)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then the environment (``os.environ`` or the ``environ`` given); no files."""
        environ = _ENVIRON.get()
        return init_settings, env_settings if environ is None else _MappingSource(settings_cls, environ)

    @field_validator("clickhouse_dsn")
    @classmethod
    def _absolute_chdb_directory(cls, dsn: str) -> str:
        return chdb_dsn(chdb_path(dsn)) if is_chdb(dsn) else dsn

    @field_validator("database", "clickhouse_cluster")
    @classmethod
    def _identifier(cls, name: str | None, info: ValidationInfo) -> str | None:
        # The names are spliced into DDL, so only plain identifiers are allowed.
        if name is not None and not _IDENTIFIER.match(name):
            what = "database" if info.field_name == "database" else "cluster"
            raise ValueError(f"invalid {what} name {name!r}: use letters, digits and '_'")
        return name

    @field_validator("spool_dir", mode="before")
    @classmethod
    def _spool_location(cls, value: object, info: ValidationInfo) -> Path | None:
        if value is not None:
            return None if str(value) == SPOOL_OFF else Path(str(value)).expanduser().resolve()
        dsn, database = info.data.get("clickhouse_dsn"), info.data.get("database")
        if dsn is None or database is None:
            return None  # their own errors are reported
        return default_spool_dir(dsn, database).resolve()

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, url: str, info: ValidationInfo) -> str:
        if not url:
            url = f"http://{info.data.get('host', DEFAULT_HOST)}:{info.data.get('port', DEFAULT_PORT)}"
        return url.rstrip("/")

    @field_validator(
        "max_body_bytes", "max_queue_bytes", "max_batch_bytes", "max_span_bytes", "max_trace_spans"
    )
    @classmethod
    def _positive(cls, value: int, info: ValidationInfo) -> int:
        if value < 1:
            raise ValueError(f"{env_var(str(info.field_name))} must be at least 1, got {value}")
        return value

    @field_validator("queue_project_share")
    @classmethod
    def _share(cls, share: float) -> float:
        if not 0 < share <= 1:
            raise ValueError(
                f"{env_var('queue_project_share')} must be more than 0 and at most 1, got {share}"
            )
        return share

    @field_validator("spans_retention_days", "requests_retention_days")
    @classmethod
    def _retention(cls, days: int) -> int:
        if days < 0:
            raise ValueError("retention days must be 0 (keep forever) or more")
        return days

    def __repr__(self) -> str:
        return (
            f"Settings(clickhouse_dsn={redact_dsn(self.clickhouse_dsn)!r}, database={self.database!r}, "
            f"host={self.host!r}, port={self.port}, max_body_bytes={self.max_body_bytes})"
        )

    def __str__(self) -> str:
        return repr(self)


class _MappingSource(EnvSettingsSource):
    """The environment source reading a given mapping instead of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(
            self._environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


def _describe(error: ValidationError) -> str:
    """One line per bad setting, naming its environment variable."""
    problems = []
    for item in error.errors():
        name = str(item["loc"][0]) if item["loc"] else ""
        if item["type"] == "value_error":
            problems.append(str(item["ctx"]["error"]))
        elif item["type"] == "extra_forbidden":
            problems.append(f"unknown setting {name!r}")
        else:
            problems.append(f"{ENV_PREFIX}{name.upper()}: {item['msg']}, got {item['input']!r}")
    return "; ".join(problems)
