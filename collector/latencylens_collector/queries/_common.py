"""What every query shares: limits, the error they raise, group-by fields and result helpers.

Column and group-by names come from the fixed tables below, never from the request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from latencylens_collector.analysis.records import REQUEST_DIMENSIONS

MAX_LIMIT: Final = 1000
"""Most requests one page of the slow list returns."""
MAX_GROUPS: Final = 1000
"""Most groups (key × bucket) one aggregate returns; beyond it the query is refused."""
QUANTILES: Final = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}

FILTER_COLUMNS: Final = REQUEST_DIMENSIONS
"""API filter / group-by field → ``requests`` column. The only names that may reach SQL."""
GROUP_FIELDS: Final = tuple(FILTER_COLUMNS)

TRACE_ID_PATTERN: Final = r"^[0-9a-fA-F]{32}$"


class QueryError(ValueError):
    """The query's parameters are invalid; the message is safe to show (HTTP 422)."""


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
