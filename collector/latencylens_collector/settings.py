"""The service's configuration in one place: constructor argument, then environment, then default.

Each setting is declared once, as a field of :class:`Settings`; its environment variable is the
field name in capitals after ``LATENCYLENS_`` (``port`` -> ``LATENCYLENS_PORT``, see :func:`env_var`).
An argument that is ``None`` or ``""`` counts as not given, and so does an empty variable.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BeforeValidator, Field, ValidationError, ValidationInfo, field_validator, model_validator
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
PRICE_FIELDS: Final = frozenset({"input", "cached_input", "output"})
"""Per-model price override keys (``prices``): US dollars per million tokens."""
DEFAULT_DATA_DIR: Final = Path(".latencylens") / "data"
"""The data directory, relative to the working directory: chdb's files, the metadata database, the spool."""
METADATA_FILE: Final = "metadata.db"
"""The SQLite metadata database, in the data directory."""
SPOOL_DIR: Final = "spool"
"""The spool's parent, in the data directory (one spool per database: ``spool/<database>``)."""
LEGACY_METADATA_FILE: Final = Path(".latencylens") / METADATA_FILE
"""Where versions before the single data directory kept the metadata database (working directory)."""
DEFAULT_DATABASE: Final = "latencylens"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 4318
DEFAULT_CONTENT_MAX_BYTES: Final = 16 * 1024
DEFAULT_INDEX_CACHE_BYTES: Final = 256 * 1024 * 1024
"""The embedded engine's index block cache: the sets over trace ids of ≈ 90 M spans (≈ 3 bytes a
span decompressed); the engine fills it only as far as reads look."""
SPOOL_OFF: Final = "off"
CHDB_SCHEME: Final = "chdb://"
CLICKHOUSE_SCHEMES: Final = frozenset({"http", "https", "clickhouse"})
"""Schemes of a ClickHouse server's DSN (clickhouse-connect's HTTP interface)."""
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def default_data_dir(cwd: Path | None = None) -> Path:
    """``<cwd>/.latencylens/data``, as an absolute path."""
    return ((cwd or Path.cwd()) / DEFAULT_DATA_DIR).resolve()


def default_dsn(cwd: Path | None = None) -> str:
    """Embedded ClickHouse in the default data directory, as an absolute path."""
    return chdb_dsn(default_data_dir(cwd))


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path.resolve()}"


def legacy_metadata_file(cwd: Path | None = None) -> Path:
    """``<cwd>/.latencylens/metadata.db``: the metadata database of versions before the single
    data directory, wherever their data was."""
    return ((cwd or Path.cwd()) / LEGACY_METADATA_FILE).resolve()


def default_metadata_url(data_dir: Path | None = None) -> str:
    """SQLite file ``metadata.db`` in the data directory. A data directory from an earlier version
    (the default one, or one holding chdb's files) without it keeps using the database at the older
    location (:func:`legacy_metadata_file`) when there is one."""
    data_dir = data_dir or default_data_dir()
    new, legacy = data_dir / METADATA_FILE, legacy_metadata_file()
    earlier = data_dir == default_data_dir() or (data_dir / "metadata").is_dir()
    return sqlite_url(legacy if earlier and not new.exists() and legacy.is_file() else new)


def chdb_dsn(path: Path | str) -> str:
    """A chdb DSN for a directory, made absolute (chdb binds one path per process)."""
    return f"{CHDB_SCHEME}{Path(path).expanduser().resolve()}"


def is_chdb(dsn: str) -> bool:
    return dsn.startswith(CHDB_SCHEME)


def chdb_path(dsn: str) -> Path:
    """The directory a chdb DSN points at."""
    return Path(dsn[len(CHDB_SCHEME) :])


def legacy_spool_dir(dsn: str, database: str) -> Path:
    """Where versions before the single data directory spooled: ``spool/<database>`` next to the
    chdb directory (in ``./.latencylens`` for a server)."""
    base = chdb_path(dsn).parent if is_chdb(dsn) else (Path.cwd() / DEFAULT_DATA_DIR).parent
    return base / SPOOL_DIR / database


def default_spool_dir(dsn: str, database: str, data_dir: Path | None = None) -> Path:
    """``spool/<database>`` in the data directory; a spool at the older location
    (:func:`legacy_spool_dir`) that still holds batches is kept in use while the data directory
    has none, so nothing it holds is stranded."""
    new = (data_dir or default_data_dir()) / SPOOL_DIR / database
    legacy = legacy_spool_dir(dsn, database)
    return legacy if not new.exists() and _holds_batches(legacy) else new


def _holds_batches(spool: Path) -> bool:
    """Pending (``*.spool``) or failed batch files (the spool module's layout, read here by name)."""
    try:
        return any(spool.glob("*.spool")) or any((spool / "failed").glob("*"))
    except OSError:
        return False


def legacy_locations(settings: Settings) -> list[str]:
    """One line per part kept at its older location (see :func:`default_metadata_url` and
    :func:`default_spool_dir`) rather than in the data directory, saying how to move it."""
    lines = []
    legacy_db = legacy_metadata_file()
    new_db = (settings.data_dir / METADATA_FILE).resolve()
    if settings.metadata_url == sqlite_url(legacy_db) and legacy_db != new_db:
        lines.append(
            f"metadata database kept at {legacy_db}, where earlier versions put it; to keep it in the "
            f"data directory, stop the service and move it to {new_db}"
        )
    legacy_spool = legacy_spool_dir(settings.clickhouse_dsn, settings.database).resolve()
    new_spool = (settings.data_dir / SPOOL_DIR / settings.database).resolve()
    if settings.spool_dir == legacy_spool and legacy_spool != new_spool:
        lines.append(
            f"spool kept at {legacy_spool}, where earlier versions put it, until its batches are "
            f"written; later starts use {new_spool}"
        )
    return lines


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

    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="The data directory: the embedded ClickHouse's files, the metadata database "
        "(``metadata.db``) and the spool (``spool/<database>``), unless each is set apart. Default: the "
        "chdb directory of ``clickhouse_dsn``, else ``./.latencylens/data``.",
    )
    clickhouse_dsn: str = Field(
        "",
        validate_default=True,
        description="Where spans are stored: ``chdb:///abs/dir`` (embedded, a relative directory is made "
        "absolute) or ``http(s)://user:pass@host:8123/db``. Default: embedded, in ``data_dir``.",
    )
    database: str = Field(DEFAULT_DATABASE, description="ClickHouse database holding LatencyLens's tables.")
    index_cache_bytes: Integer = Field(
        DEFAULT_INDEX_CACHE_BYTES,
        description="Embedded ClickHouse only: the engine's cache of decompressed index blocks, in bytes "
        "(0: none). The reads after each insert look at the set index over trace ids in about one "
        "granule a trace; kept decompressed, those reads take about half the CPU. Read when the "
        "engine starts. A server takes ``index_uncompressed_cache_size`` from its own configuration "
        "(docs/deployment.md#index-cache).",
    )
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
        "Default: ``spool/<database>`` in the data directory.",
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
    project_cpu_share: float = Field(
        0.5,
        description="CPU-seconds per second (decoding and writing its exports, over the last few "
        "seconds) one project may use while other projects send too; over it, its exports get 429 "
        "until it is back under. Alone a project may use everything; 0 turns the limit off.",
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
    ingest_path: Literal["python", "engine", "auto"] = Field(
        "auto",
        description="Who decodes OTLP/protobuf exports: ``python`` (the collector, span by span), "
        "``engine`` (ClickHouse, many bodies per insert; a body it cannot store exactly, and every "
        "OTLP/JSON export, takes the Python path) or ``auto`` (the engine while enough exports wait "
        "to fill an insert and no other project sends, else Python). docs/collector.md#engine-ingest.",
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
        "",
        validate_default=True,
        description="SQLAlchemy URL of the metadata database (SLOs, API keys). Default: SQLite file "
        "``metadata.db`` in the data directory.",
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
    access_log: bool = Field(
        False,
        description="``true`` logs every HTTP request (each OTLP export too) at INFO; by default only "
        "problems are logged.",
    )
    metrics_top_series: Integer = Field(
        50,
        description="Per project, the (service, model) pairs with the most requests that get series of "
        "their own in /metrics' latency histograms (the rest add up under ``other``); SLOs likewise.",
    )
    prices: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Prices that take precedence over genai-prices' bundled data (a self-hosted model, "
        'a negotiated rate), as JSON: ``{"provider/model": {"input": 0.5, "cached_input": 0.1, '
        '"output": 1.5}}`` in US dollars per million tokens; ``cached_input`` defaults to ``input``.',
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

    @model_validator(mode="before")
    @classmethod
    def _data_dir_of_chdb(cls, values: Any) -> Any:
        # Given only an embedded DSN, its directory is the data directory.
        if isinstance(values, dict) and not values.get("data_dir"):
            dsn = str(values.get("clickhouse_dsn") or "")
            if is_chdb(dsn):
                return {**values, "data_dir": chdb_path(dsn)}
        return values

    @field_validator("prices")
    @classmethod
    def _price_entries(cls, prices: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for key, price in prices.items():
            provider, _, model = key.partition("/")
            if not provider or not model:
                raise ValueError(f"{ENV_PREFIX}PRICES: {key!r} is not provider/model")
            unknown = set(price) - PRICE_FIELDS
            if unknown or not {"input", "output"} <= set(price):
                raise ValueError(
                    f"{ENV_PREFIX}PRICES: {key!r} needs input and output (and may have cached_input), "
                    f"US dollars per million tokens; got {sorted(price)}"
                )
            if any(not 0 <= value < float("inf") for value in price.values()):
                raise ValueError(f"{ENV_PREFIX}PRICES: {key!r} has a negative or infinite price")
        return prices

    @field_validator("data_dir")
    @classmethod
    def _absolute_data_dir(cls, path: Path) -> Path:
        return Path(path).expanduser().resolve()

    @field_validator("clickhouse_dsn")
    @classmethod
    def _absolute_chdb_directory(cls, dsn: str, info: ValidationInfo) -> str:
        if not dsn:
            return chdb_dsn(info.data.get("data_dir") or default_data_dir())
        if is_chdb(dsn):
            return chdb_dsn(chdb_path(dsn))
        scheme = dsn.partition("://")[0].lower() if "://" in dsn else ""
        if scheme not in CLICKHOUSE_SCHEMES:
            raise ValueError(
                f"{redact_dsn(dsn)!r} is not a ClickHouse DSN ({env_var('clickhouse_dsn')}, --dsn): use "
                "chdb:///abs/dir (embedded) or http(s)://user:password@host:8123 (a ClickHouse server)"
            )
        return dsn

    @field_validator("metadata_url")
    @classmethod
    def _metadata_location(cls, url: str, info: ValidationInfo) -> str:
        if not url:
            return default_metadata_url(info.data.get("data_dir"))
        from sqlalchemy.engine import make_url  # only commands that open the database pay for it
        from sqlalchemy.exc import ArgumentError

        try:
            make_url(url)
        except ArgumentError:
            raise ValueError(
                f"{redact_dsn(url)!r} is not a database URL ({env_var('metadata_url')}, --metadata-url): "
                "use sqlite:////abs/path/metadata.db or postgresql://user:password@host/database, or "
                "leave it unset for metadata.db in the data directory"
            ) from None
        return url

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
        return default_spool_dir(dsn, database, info.data.get("data_dir")).resolve()

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

    @field_validator("project_cpu_share")
    @classmethod
    def _cpu_share(cls, share: float) -> float:
        if not 0 <= share < math.inf:
            raise ValueError("must be 0 (no limit) or a positive number of CPU-seconds per second")
        return share

    @field_validator("queue_project_share")
    @classmethod
    def _share(cls, share: float) -> float:
        if not 0 < share <= 1:
            raise ValueError(
                f"{env_var('queue_project_share')} must be more than 0 and at most 1, got {share}"
            )
        return share

    @field_validator("index_cache_bytes")
    @classmethod
    def _cache_bytes(cls, size: int) -> int:
        if size < 0:
            raise ValueError(f"{env_var('index_cache_bytes')} must be 0 (no cache) or a number of bytes")
        return size

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
