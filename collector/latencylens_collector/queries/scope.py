"""Which request rows a read covers, and the one place that knows how a trace's rows are versioned.

``requests`` gets a new row for a trace each time its spans change (late spans, a replay); the
greatest :data:`VERSION` wins: it counts the spans a computation saw, so the most complete row wins
whatever the collectors' clocks (:mod:`latencylens_collector.analysis.request_rows`). The table,
``ReplacingMergeTree(version, is_deleted)`` keyed by ``project, start_time, trace_id``, collapses
the versions of one key when parts merge or under ``FINAL``. A row whose root moved lives under
another start time; the old key then holds a tombstone (``is_deleted = 1``) of the same version,
which ``FINAL`` hides, so ``FINAL`` shows one row per trace. Reads without ``FINAL`` take each
trace's newest version, live rows before tombstones, and drop it if it is a tombstone. Queries and
SLO measurement read request rows only through :class:`RequestScope`, so a change in how versions
are stored is one edit here.

Values a person supplies (project, times, filter values, trace ids) reach SQL only as bound
``{name:Type}`` parameters; column names come from fixed tables, never from a request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from latencylens_collector.analysis.records import REQUEST_COLUMNS
from latencylens_collector.queries._common import FILTER_COLUMNS
from latencylens_collector.queries.times import Window

if TYPE_CHECKING:
    from latencylens_collector.storage.store import Store

VERSION: Final = "version"
"""The column that orders a trace's row versions; the greatest is the trace's current row."""
METRIC_COLUMNS: Final = {"e2e": "e2e_ns", "ttft": "ttft_ns", "itl": "itl_ns"}
"""Metric name → request column (integer ns; TTFT and ITL are null without a streamed call)."""
REQUEST_FIELDS: Final = ", ".join(
    [
        "lower(hex(trace_id)) AS trace_hex",
        "toUnixTimestamp64Nano(start_time) AS start_ns",
        *(c for c in REQUEST_COLUMNS if c not in ("trace_id", "start_time", "project")),
    ]
)
"""Select list of one request row, as :func:`queries.requests.summary_fields` reads it."""


@dataclass(frozen=True)
class Filters:
    """Equality filters on request dimensions; None or empty means no filter."""

    service: str | None = None
    route: str | None = None
    model: str | None = None
    provider: str | None = None

    @classmethod
    def of(cls, values: Mapping[str, str | None]) -> Filters:
        """Filters from a mapping of field → value (an SLO's filter); other keys are ignored."""
        return cls(**{field: values.get(field) for field in FILTER_COLUMNS})

    def sql(self) -> tuple[str, dict[str, Any]]:
        """``AND``-joined conditions (empty string when none) and their bound parameters."""
        conditions: list[str] = []
        params: dict[str, Any] = {}
        for field, column in FILTER_COLUMNS.items():
            value = getattr(self, field)
            if value is not None and value != "":
                conditions.append(f" AND {column} = {{f_{field}:String}}")
                params[f"f_{field}"] = value
        return "".join(conditions), params

    @property
    def fields(self) -> set[str]:
        """The fields that filter."""
        return {field for field in FILTER_COLUMNS if getattr(self, field) not in (None, "")}


NO_FILTERS: Final = Filters()


@dataclass(frozen=True)
class RequestScope:
    """Request rows of ``project`` (None: every project) that started in any of ``windows`` (none:
    any time), match ``filters`` and, with ``trace_ids``, belong to those traces."""

    project: str | None
    windows: Sequence[Window] = ()
    filters: Filters = NO_FILTERS
    trace_ids: Sequence[bytes] | None = None

    def where(self) -> tuple[str, dict[str, Any]]:
        """The scope as a condition on every stored row version, and its bound parameters."""
        conditions: list[str] = []
        params: dict[str, Any] = {}
        if self.project is not None:
            conditions.append("project = {project:String}")
            params["project"] = self.project
        if self.windows:
            ranges = []
            for index, span in enumerate(self.windows):
                ranges.append(
                    f"(start_time >= fromUnixTimestamp64Nano({{w{index}_since:Int64}}, 'UTC')"
                    f" AND start_time < fromUnixTimestamp64Nano({{w{index}_until:Int64}}, 'UTC'))"
                )
                params[f"w{index}_since"], params[f"w{index}_until"] = span.since_ns, span.until_ns
            conditions.append(f"({' OR '.join(ranges)})")
        if self.trace_ids is not None:
            conditions.append("trace_id IN {trace_ids:Array(FixedString(16))}")
            params["trace_ids"] = sorted(self.trace_ids)
        filter_sql, filter_params = self.filters.sql()
        params.update(filter_params)
        return (" AND ".join(conditions) or "1") + filter_sql, params

    def latest(self, store: Store, columns: str) -> tuple[str, dict[str, Any]]:
        """``SELECT columns`` of each trace's current row in the scope (a statement or subquery)."""
        where, params = self.where()
        # FINAL collapses most versions before they are sorted; for a few named traces it would
        # merge the project's whole key range instead (trace_id is last in the key), so they skip it.
        if self.trace_ids is None:  # FINAL hides tombstones and the rows they delete
            sql = (
                f"SELECT {columns} FROM {store.table('requests')} FINAL WHERE {where} "
                f"ORDER BY {VERSION} DESC LIMIT 1 BY project, trace_id"
            )
            return sql, params
        newest = (
            f"SELECT * FROM {store.table('requests')} WHERE {where} "
            f"ORDER BY {VERSION} DESC, is_deleted LIMIT 1 BY project, trace_id"
        )
        return f"SELECT {columns} FROM ({newest}) WHERE is_deleted = 0", params

    def current_versions(self, store: Store) -> tuple[str, dict[str, Any]]:
        """Each trace's current ``version`` (``trace_id, version``): with :meth:`every_version`,
        a caller keeps a row only if it is its trace's current one."""
        where, params = self.where()
        sql = f"SELECT trace_id, max({VERSION}) AS version FROM {store.table('requests')} WHERE {where}"
        return f"{sql} GROUP BY trace_id", params

    def every_version(self, store: Store, columns: str) -> tuple[str, dict[str, Any]]:
        """``SELECT columns, version`` of every stored row version in the scope (tombstones left
        out), for a caller that reads narrow columns first and checks them against
        :meth:`current_versions` (cheaper than FINAL for a page of a large window)."""
        where, params = self.where()
        table = store.table("requests")
        return f"SELECT {columns}, {VERSION} AS version FROM {table} WHERE {where} AND is_deleted = 0", params

    def collapsed(self, store: Store, columns: str) -> tuple[str, dict[str, Any]]:
        """``SELECT columns`` of the scope's rows with versions of one key collapsed (FINAL), for
        aggregates to group: one row per trace (a moved row's old key holds a tombstone, hidden)."""
        where, params = self.where()
        return f"SELECT {columns} FROM {store.table('requests')} FINAL WHERE {where}", params


__all__ = ["METRIC_COLUMNS", "NO_FILTERS", "REQUEST_FIELDS", "VERSION", "Filters", "RequestScope"]
