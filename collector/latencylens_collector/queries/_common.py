"""What every query shares: time windows, filters, limits and the request-row field list.

User input reaches SQL only as bound ``{name:Type}`` parameters. Column and group-by names come
from the fixed tables below, never from the request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Final

from latencylens_collector.analysis.records import REQUEST_COLUMNS, REQUEST_DIMENSIONS

NS_PER_S: Final = 1_000_000_000
DEFAULT_WINDOW_NS: Final = 24 * 3600 * NS_PER_S
MAX_RANGE_NS: Final = 90 * 24 * 3600 * NS_PER_S
"""Longest time range any query may cover."""
MAX_LIMIT: Final = 1000
"""Most requests one page of the slow list returns."""
MAX_GROUPS: Final = 1000
"""Most groups (key × bucket) one aggregate returns; beyond it the query is refused."""
QUANTILES: Final = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}

FILTER_COLUMNS: Final = REQUEST_DIMENSIONS
"""API filter / group-by field → ``requests`` column. The only names that may reach SQL."""
GROUP_FIELDS: Final = tuple(FILTER_COLUMNS)

TRACE_ID_PATTERN: Final = r"^[0-9a-fA-F]{32}$"
_UNIX_SECONDS = re.compile(r"^-?\d+(\.\d+)?$")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

REQUEST_FIELDS: Final = ", ".join(
    [
        "lower(hex(trace_id)) AS trace_hex",
        "toUnixTimestamp64Nano(start_time) AS start_ns",
        *(c for c in REQUEST_COLUMNS if c not in ("trace_id", "start_time", "project")),
    ]
)
"""Select list of one request row, as :func:`queries.requests.summary_fields` reads it."""

WINDOW_SQL: Final = (
    "project = {project:String}"
    " AND start_time >= fromUnixTimestamp64Nano({since:Int64}, 'UTC')"
    " AND start_time < fromUnixTimestamp64Nano({until:Int64}, 'UTC')"
)


class QueryError(ValueError):
    """The query's parameters are invalid; the message is safe to show (HTTP 422)."""


def parse_time(value: str) -> int:
    """ISO-8601 (naive means UTC) or unix seconds, as ns since the epoch. Raises QueryError."""
    text = value.strip()
    try:
        if _UNIX_SECONDS.match(text):
            return round(float(text) * 1e9)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise QueryError(f"invalid time {value!r}: use ISO-8601 or unix seconds") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return to_ns(moment)


def to_ns(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * NS_PER_S + delta.microseconds * 1000


def from_ns(ns: int) -> datetime:
    return _EPOCH + timedelta(microseconds=ns // 1000)


@dataclass(frozen=True)
class Window:
    """[since, until) in ns since the epoch."""

    since_ns: int
    until_ns: int

    def params(self) -> dict[str, int]:
        return {"since": self.since_ns, "until": self.until_ns}


def window(
    now: datetime,
    since: str | None,
    until: str | None,
    *,
    default_ns: int = DEFAULT_WINDOW_NS,
    default_until_ns: int | None = None,
    label: str = "",
) -> Window:
    """A validated window, by default the ``default_ns`` before ``default_until_ns`` (or ``now``);
    at most 90 days long."""
    fallback_until = default_until_ns if default_until_ns is not None else to_ns(now) + 1
    until_ns = parse_time(until) if until else fallback_until
    since_ns = parse_time(since) if since else until_ns - default_ns
    name = f"{label}since/{label}until"
    if since_ns >= until_ns:
        raise QueryError(f"{name}: the window is empty ({label}since must be before {label}until)")
    if until_ns - since_ns > MAX_RANGE_NS:
        raise QueryError(f"{name}: the window is longer than the maximum of 90 days")
    return Window(since_ns, until_ns)


@dataclass(frozen=True)
class Filters:
    """Equality filters on request dimensions; None means no filter."""

    service: str | None = None
    route: str | None = None
    model: str | None = None
    provider: str | None = None

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


def parse_group_by(value: str | None) -> list[str]:
    """A comma list of group-by fields, each allowed and at most once; raises QueryError."""
    if value is None or not value.strip():
        return []
    fields = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [field for field in fields if field not in FILTER_COLUMNS]
    if unknown:
        raise QueryError(
            f"unknown group-by field(s): {', '.join(unknown)}; allowed: {', '.join(GROUP_FIELDS)}"
        )
    if len(set(fields)) != len(fields):
        raise QueryError("a group-by field is listed twice")
    return fields


def group_key(row: Mapping[str, Any], fields: Sequence[str]) -> dict[str, str]:
    return {field: str(row[f"k_{field}"]) for field in fields}


def finite_int(value: Any) -> int | None:
    """A quantile from ClickHouse as integer ns; NaN (no values) becomes None."""
    if value is None:
        return None
    number = float(value)
    return None if number != number else round(number)


NO_FILTERS: Final = Filters()
