"""ClickHouse storage behind one small class; chdb (in-process) and a server share the same SQL.

Exceptions::

    StorageError            anything that went wrong talking to ClickHouse
     ├── StorageUnavailable ClickHouse could not be reached (retry later)
     └── DirectoryInUse     another process runs the embedded ClickHouse on this chdb directory
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import clickhouse_connect
import pyarrow as pa
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError, OperationalError

from latencylens_collector.analysis.records import (
    DEFAULT_PROJECT,
    SpanRow,
)
from latencylens_collector.settings import Settings, chdb_path, is_chdb, redact_dsn
from latencylens_collector.storage import otlp_sql
from latencylens_collector.storage.arrow_tables import requests_table, spans_table
from latencylens_collector.storage.trace_ids import TRACE_IDS_SET, trace_ids_param

if TYPE_CHECKING:
    from latencylens_collector.storage.migrations import Migration

_log = logging.getLogger(__name__)

_CHDB_LOCK = threading.RLock()
"""Held while this process claims a chdb directory and opens an engine handle on it."""
ENGINE_HANDLES: Final = 4
"""Most chdb connection handles one store keeps open. chdb (4.x) runs one engine per process with
any number of handles on it; each handle runs one statement at a time, and statements on different
handles run in parallel (their parameters and settings are their own). So the writer's INSERT no
longer waits for a dashboard's query, nor the reverse; beyond a few, more handles only share the
same cores."""
_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VIEW_SETS: Final = (False, True)
"""The engine path's two sets of landing views, by ``with_events``."""


RETRY_AFTER_SECONDS: Final = 5
"""Seconds a client should wait before retrying when storage is unavailable (``Retry-After``,
gRPC ``RetryInfo``)."""


class StorageError(Exception):
    """ClickHouse failed; the message says what and where."""


class StorageUnavailable(StorageError):
    """ClickHouse could not be reached; the operation may succeed later."""


class DirectoryInUse(StorageError):
    """Another process runs an embedded ClickHouse (chdb) on this directory: this one cannot write."""


LOCK_FILE: Final = "latencylens.lock"
"""In a chdb directory: locked (``flock``) by the one process whose engine owns the directory."""
ENGINE_CONFIG_FILE: Final = "latencylens-engine.xml"
"""In a chdb directory: the server settings its engine starts with (:func:`_engine_config`)."""
_CLAIMED: dict[Path, int] = {}
"""chdb directories this process holds the lock of (path → open file descriptor)."""


def _claim_directory(path: Path) -> None:
    """Take the chdb directory for this process, for as long as it runs (again: a no-op).

    Two engines on one directory corrupt or refuse each other's writes, while each would report
    itself healthy; the lock makes the second fail at once instead. The operating system releases
    it when the process ends, however it ends. Raises :class:`DirectoryInUse`."""
    path = path.resolve()
    with _CHDB_LOCK:
        if path in _CLAIMED:
            return
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            pid = f" (pid {holder})" if holder.isdigit() else ""
            raise DirectoryInUse(
                f"the chdb directory {path} is in use by another process{pid}: run one collector per "
                "directory, or point every collector at one ClickHouse server (docs/deployment.md)"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        _CLAIMED[path] = fd


def _engine_config(path: Path, index_cache_bytes: int) -> Path | None:
    """The embedded engine's server settings, written into its directory (claimed by this process);
    None when the directory takes no file (the engine then starts with its defaults).

    chdb reads them only when the process's engine starts: the first handle decides, later ones
    share that engine whatever their options. Its default keeps no decompressed index blocks, so
    each read by trace id would decompress the set index of every granule it looks at again."""
    config = path.resolve() / ENGINE_CONFIG_FILE
    text = (
        "<clickhouse>\n"
        f"  <index_uncompressed_cache_size>{index_cache_bytes}</index_uncompressed_cache_size>\n"
        "</clickhouse>\n"
    )
    with contextlib.suppress(OSError):
        if config.read_text() == text:
            return config
    staged = config.with_name(f".{ENGINE_CONFIG_FILE}.{os.getpid()}")
    try:
        staged.write_text(text)
        staged.replace(config)
    except OSError as exc:
        _log.warning("embedded ClickHouse starts without %s (%s): no index block cache", config, exc)
        return None
    return config


_JSON_COLUMNS_SETTINGS: Final = (
    "SETTINGS output_format_json_quote_64bit_integers = 0, output_format_json_validate_utf8 = 1"
)

_DEFER_PRUNING: Final = "defer_partition_pruning_after_final"


def settings_sql(settings: Mapping[str, int], first: bool = True) -> str:
    """``settings`` as a ``SETTINGS`` clause (``first``) or its continuation, for SQL that carries
    its settings in its text; empty when there are none. Names come from code, values are
    integers."""
    if not settings:
        return ""
    listed = ", ".join(f"{name} = {int(value)}" for name, value in settings.items())
    return f"\nSETTINGS {listed}" if first else f", {listed}"


_SPAN_SELECT = """
SELECT project, trace_id, span_id, parent_span_id, service, name, span_kind, kind,
       toUnixTimestamp64Nano(start_time) AS start_ns, duration_ns, status_code, status_message,
       attributes, resource_attributes, {events}
FROM {spans} FINAL
PREWHERE project = {{project:String}} AND trace_id IN {ids_set}
ORDER BY start_ns, span_id
"""
"""A trace's spans, as the API shows them.

Like every read of ``spans FINAL`` by trace id, it filters in ``PREWHERE``. ClickHouse does not
move a ``WHERE`` under ``FINAL`` to ``PREWHERE`` itself (a filter on a column outside the sorting
key could drop a span's latest copy and bring back an older one), so every column was decoded for
every row of each granule that may hold one of the traces. Trace ids are random: a batch's 1,600
traces fall in nearly every granule of every part, and that read grew with the spans stored: at
4 M, 0.33 s of CPU for a batch of 8,000 spans in one merged part, 0.9 s in several (now 0.1 s and
0.3 s; ``bench read_back``). These conditions are on the sorting key, where ``PREWHERE`` keeps
every copy of each span it keeps; past the key columns, only the traces' own rows are decoded.
Other conditions stay in ``WHERE``."""

_SPAN_SELECT_FOR_REQUESTS = """
SELECT project, trace_id, span_id, parent_span_id, service, name, span_kind, kind,
       toUnixTimestamp64Nano(start_time) AS start_ns, duration_ns, status_code, attributes
FROM {spans} FINAL
PREWHERE project = {{project:String}} AND trace_id IN {ids_set}
ORDER BY start_ns, span_id
"""
"""What request rows are built from: every column but the two the attribution never reads
(``resource_attributes`` is the largest map of a span and the same for every span of a service),
nor ``events``: the stream times they give are on the span already (``latencylens.events.*``)."""

_EVENTS_SELECT = (
    "arrayMap(e -> (e.name, toUnixTimestamp64Nano(e.time), e.attributes), events) AS events, "
    "dropped_events_count"
)
"""Events with their times as integer ns (a ``DateTime64`` would come back as a µs datetime)."""


def server_settings(cluster: str | None) -> dict[str, str]:
    """Settings of every statement the collector sends a server. On a cluster, a read of a
    ``Distributed`` table that selects its traces by a subquery of another (the reconciler's
    touched traces, the engine path's read-back) is refused by default on more than one shard
    ("Double-distributed IN/JOIN subqueries is denied"): ``global`` runs such a subquery once, on
    the node the collector asked, and sends its result to the shards, right whatever the tables'
    sharding."""
    return {"distributed_product_mode": "global"} if cluster else {}


class Store:
    """LatencyLens's tables in one ClickHouse database. Connects lazily, so the service can start
    (and answer 503) while ClickHouse is down."""

    def __init__(self, settings: Settings, client: Client | None = None) -> None:
        self.settings = settings
        self.database = settings.database
        self._client = client
        embedded = client is None and is_chdb(settings.clickhouse_dsn)
        self._handles = _Handles(self._open, ENGINE_HANDLES) if embedded else None
        """The embedded engine's handles, lent one per statement; None: every statement goes
        through :attr:`client` (a server's HTTP client, or a client given by the caller)."""
        self._views_lock = threading.Lock()
        self._migrated = False
        self._otlp_settings: dict[bool, dict[str, object]] | None = None
        """The OTLP bodies' INSERT settings, set once the landing views exist."""
        self._near_settings: dict[str, int] | None = None
        """What a read under FINAL bounded by start needs to prune partitions (:meth:`near_settings`)."""

    @classmethod
    def connect(cls, settings: Settings) -> Store:
        """A store whose connection is already open (raises :class:`StorageUnavailable`)."""
        store = cls(settings)
        store.client  # noqa: B018 - opens the connection now
        return store

    @property
    def client(self) -> Client:
        """The store's first client (embedded: one of its handles)."""
        if self._client is None:
            self._client = self._open() if self._handles is None else self._handles.first()
        return self._client

    def _open(self) -> Client:
        dsn = self.settings.clickhouse_dsn
        try:
            with _CHDB_LOCK:
                if is_chdb(dsn):
                    path = chdb_path(dsn)
                    _claim_directory(path)
                    config = _engine_config(path, self.settings.index_cache_bytes)
                    options = {"config-file": str(config)} if config else None
                    return clickhouse_connect.get_client(dsn=dsn, chdb_options=options)
                # No session: the writer, queries and the reconciler share this client from their
                # threads, and a server refuses a second statement in a session still running one
                # (SESSION_IS_LOCKED). Nothing here keeps state in a session.
                return clickhouse_connect.get_client(
                    dsn=dsn,
                    connect_timeout=3,
                    send_receive_timeout=30,
                    autogenerate_session_id=False,
                    settings=server_settings(self.settings.clickhouse_cluster),
                )
        except (ClickHouseError, OSError) as exc:
            raise StorageUnavailable(f"cannot reach ClickHouse at {redact_dsn(dsn)}: {exc}") from exc

    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[Client]:
        try:
            if self._handles is None:
                yield self.client
            else:
                with self._handles.lend() as client:
                    yield client
        except OperationalError as exc:
            raise StorageUnavailable(f"ClickHouse unreachable while {what}: {exc}") from exc
        except (ClickHouseError, OSError) as exc:
            raise StorageError(f"ClickHouse failed while {what}: {exc}") from exc

    def table(self, name: str) -> str:
        """``database.name`` for a statement: the one way the database name enters SQL (it is a
        validated identifier, see :class:`Settings`; table names come from code, never a request)."""
        if not _TABLE_NAME.match(name):
            raise ValueError(f"not a table name: {name!r}")
        return f"{self.database}.{name}"

    # --- generic statements (used by migrations) ------------------------------------------------
    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        with self._guard("running a command") as client:
            client.command(sql, parameters=dict(parameters or {}))

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        with self._guard("querying") as client:
            return list(client.query(sql, parameters=dict(parameters or {})).named_results())

    def query_columns(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[Sequence[Any]]:
        """The result's columns, in the query's order: cheaper than :meth:`query` for many rows
        (no dict per row)."""
        with self._guard("querying") as client:
            return list(client.query(sql, parameters=dict(parameters or {})).result_columns)

    def query_json_columns(
        self, sql: str, parameters: Mapping[str, Any] | None = None, settings: Mapping[str, int] | None = None
    ) -> bytes:
        """The result as ClickHouse writes it (``JSONCompactColumns``: a list per column), unparsed:
        for a caller that hands it to another process to parse. 64-bit integers come as numbers,
        and invalid UTF-8 (none is stored: ingest repairs it) would come as U+FFFD, never break
        the JSON. Those settings ride in the SQL, with ``settings`` (``sql`` must have no
        ``SETTINGS`` of its own): given apart, the embedded client sets and restores each around the
        query, five more statements (≈ 5 ms) on every read-back."""
        with self._guard("querying") as client:
            sql = f"{sql}\n{_JSON_COLUMNS_SETTINGS}{settings_sql(settings or {}, first=False)}"
            return bytes(client.raw_query(sql, parameters=dict(parameters or {}), fmt="JSONCompactColumns"))

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        dedup_token: str | None = None,
    ) -> None:
        """Insert rows. With ``dedup_token``, ClickHouse drops a repeat of the same insert (replicated
        tables, or tables with ``non_replicated_deduplication_window``), so a retried batch is stored once."""
        if not rows:
            return
        settings = {"insert_deduplication_token": dedup_token} if dedup_token else None
        with self._guard(f"inserting into {table}") as client:
            client.insert(self.table(table), rows, column_names=list(column_names), settings=settings)

    def ping(self) -> None:
        """Raise :class:`StorageError` unless ClickHouse answers a trivial query."""
        self.query("SELECT 1")

    def claim(self) -> None:
        """Embedded ClickHouse: take the chdb directory now (raises :class:`DirectoryInUse` when
        another process has it), so a second service fails at start, not at its first write. A
        server needs nothing."""
        if is_chdb(self.settings.clickhouse_dsn):
            _claim_directory(chdb_path(self.settings.clickhouse_dsn))

    def near_settings(self) -> dict[str, int]:
        """The settings a read under ``FINAL`` needs to prune ``spans``' daily partitions by a bound on
        ``start_time``, asked of the server once. ClickHouse 26.3 and later prunes none by a
        ``WHERE`` under ``FINAL`` unless ``defer_partition_pruning_after_final = 0`` (a partition's
        copy of a row could be outdone by another partition's); older servers prune by it and
        refuse that setting as unknown. Raises StorageError."""
        if self._near_settings is None:
            asked = "SELECT name FROM system.settings WHERE name = {name:String}"
            known = self.query(asked, {"name": _DEFER_PRUNING})
            self._near_settings = {_DEFER_PRUNING: 0} if known else {}
        return self._near_settings

    def now_ns(self) -> int:
        """The store's clock (ClickHouse's ``now64``), in ns since the epoch.

        Every comparison with times the store stamped (span and row inserts, rollup builds) uses
        this clock, never a collector's: collectors' clocks disagree, the store's is one."""
        rows = self.query("SELECT toUnixTimestamp64Nano(now64(9)) AS now")
        return int(rows[0]["now"])

    # --- schema -----------------------------------------------------------------------------------
    def migrate(self) -> list[Migration]:
        """Apply pending migrations; returns the ones applied now."""
        from latencylens_collector.storage.migrations import apply_migrations

        applied = apply_migrations(self)
        self._migrated = True
        return applied

    @property
    def migrated(self) -> bool:
        """Whether this store has applied (or checked) the migrations since it was created."""
        return self._migrated

    def ensure_ready(self) -> None:
        """Migrate once per store, retried on the next call when ClickHouse was down."""
        if not self._migrated:
            self.migrate()

    # --- spans --------------------------------------------------------------------------------------
    def insert_spans(self, rows: Sequence[SpanRow], dedup_token: str | None = None) -> None:
        """One Arrow insert of span rows; a replay of the same batch passes the same ``dedup_token``.

        Columns go to ClickHouse as an Arrow table (built in C by pyarrow), not as Python rows
        serialised value by value. Duplicates that still get in collapse anyway: ``spans`` is a
        ReplacingMergeTree keyed by (project, trace_id, span_id) and every read uses FINAL."""
        if not rows:
            return
        settings = {"insert_deduplication_token": dedup_token} if dedup_token else None
        table = spans_table(rows)
        with self._guard("inserting into spans") as client:
            client.insert_arrow(self.table("spans"), table, settings=settings)

    def spans_of_traces(
        self, trace_ids: Iterable[bytes], project: str = DEFAULT_PROJECT, for_requests: bool = False
    ) -> list[SpanRow]:
        """Every stored span of these traces (deduplicated), in start order, in one query.

        ``for_requests`` leaves out what request rows never read (resource attributes, status
        message: empty in the returned rows), as the write path's and the reconciler's reads do
        (:func:`latencylens_collector.storage.trace_state.stored_traces`, with insert stamps)."""
        ids = trace_ids_param(trace_ids)
        if not ids:
            return []
        select = _SPAN_SELECT_FOR_REQUESTS if for_requests else _SPAN_SELECT
        sql = select.format(spans=self.table("spans"), events=_EVENTS_SELECT, ids_set=TRACE_IDS_SET)
        rows = self.query(sql, {"project": project, "trace_ids": ids})
        return [SpanRow(**row) for row in rows]

    # --- OTLP bodies decoded by the engine (storage/otlp_sql.py) -------------------------------------
    def insert_otlp_bodies(self, data: bytes, batch: str, with_events: bool = False) -> list[dict[str, Any]]:
        """One INSERT of length-delimited export bodies (:func:`otlp_sql.framed`) whose views store
        their plain spans; returns what they did with each body (:func:`otlp_sql.read_verdicts`).
        ``batch`` is the bodies' batch id and the insert's deduplication token; ``with_events``
        sends them to the views that also store spans with events."""
        otlp_settings = self.ensure_otlp_views()
        settings = {**otlp_settings[with_events], "insert_deduplication_token": batch}
        table = otlp_sql.landing_table(self.database, with_events)
        with self._guard("inserting OTLP bodies") as client:
            client.raw_insert(table, insert_block=data, fmt="Protobuf", settings=settings)
        return self.query(otlp_sql.verdicts_sql(self.database), {"batch": batch})

    def ensure_otlp_views(self) -> dict[bool, dict[str, object]]:
        """Create the engine path's landing tables and views once per store (retried on the next
        call when it failed); returns the INSERT settings of each set (by ``with_events``)."""
        if self._otlp_settings is None:
            with self._views_lock, self._guard("creating the OTLP landing views") as client:
                if self._otlp_settings is None:
                    for statement in otlp_sql.statements(self.database, self.settings.clickhouse_cluster):
                        client.command(statement)
                    self._otlp_settings = {
                        with_events: self._otlp_insert_settings(with_events) for with_events in _VIEW_SETS
                    }
        return self._otlp_settings

    def _otlp_insert_settings(self, with_events: bool) -> dict[str, object]:
        """The OTLP bodies' INSERT settings; embedded, with the schema in a file of the data
        directory (written atomically, once per store) rather than inline."""
        dsn, cluster = self.settings.clickhouse_dsn, self.settings.clickhouse_cluster
        if not is_chdb(dsn):
            return otlp_sql.insert_settings(cluster=cluster, with_events=with_events)
        path = chdb_path(dsn) / "format_schemas" / otlp_sql.schema_file_name(with_events)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text(otlp_sql.schema(with_events), encoding="utf-8")
            partial.replace(path)
        return otlp_sql.insert_settings(str(path), cluster, with_events)

    # --- requests -----------------------------------------------------------------------------------
    def upsert_requests(self, rows: Sequence[Mapping[str, Any]] | pa.Table) -> None:
        """Write request rows and tombstones (one Arrow insert), as dicts or already laid out
        (:func:`~.arrow_tables.requests_table`); under the same key, the higher ``version`` wins
        (:mod:`latencylens_collector.analysis.request_rows`)."""
        if len(rows) == 0:
            return
        table = rows if isinstance(rows, pa.Table) else requests_table(rows)
        with self._guard("inserting into requests") as client:
            client.insert_arrow(self.table("requests"), table)

    @property
    def engine_handles(self) -> int:
        """Embedded engine handles this store has open (at most :data:`ENGINE_HANDLES`)."""
        return 0 if self._handles is None else self._handles.opened

    def close(self) -> None:
        if self._client is not None and not is_chdb(self.settings.clickhouse_dsn):
            with contextlib.suppress(Exception):
                self._client.close()
        # An embedded handle is only let go: its engine is the process's, which other stores
        # may use; clickhouse-connect closes the handle once nothing refers to it.
        self._client = None
        if self._handles is not None:
            self._handles = _Handles(self._open, ENGINE_HANDLES)


class _Handles:
    """Embedded engine handles, opened as statements come at once (at most ``most``), each lent
    to one statement at a time: a statement waits only when all of them are busy."""

    def __init__(self, open_handle: Callable[[], Client], most: int) -> None:
        self._open = open_handle
        self._free: list[Client] = []
        self._opened: list[Client] = []
        self._room = threading.BoundedSemaphore(most)
        self._lock = threading.Lock()

    @property
    def opened(self) -> int:
        with self._lock:
            return len(self._opened)

    def first(self) -> Client:
        """The first handle (opened now if none is): for callers that want a client of their own."""
        with self._lock:
            if self._opened:
                return self._opened[0]
        with self.lend() as client:
            return client

    @contextlib.contextmanager
    def lend(self) -> Iterator[Client]:
        with self._room:
            with self._lock:
                client = self._free.pop() if self._free else None
            if client is None:
                client = self._open()
                with self._lock:
                    self._opened.append(client)
            try:
                yield client
            finally:
                with self._lock:
                    self._free.append(client)


__all__ = [
    "ENGINE_CONFIG_FILE",
    "ENGINE_HANDLES",
    "LOCK_FILE",
    "RETRY_AFTER_SECONDS",
    "DirectoryInUse",
    "StorageError",
    "StorageUnavailable",
    "Store",
    "server_settings",
    "settings_sql",
]
