"""The query API's logic as plain functions over a :class:`Store`; routes and tests call these.

Every function takes the caller's project first and filters on it with a bound parameter.
"""

from latencylens_collector.queries._common import (
    GROUP_FIELDS,
    MAX_LIMIT,
    MAX_RANGE_NS,
    TRACE_ID_PATTERN,
    Filters,
    QueryError,
    parse_group_by,
    parse_time,
)
from latencylens_collector.queries._sources import RollupUse
from latencylens_collector.queries.compare import compare
from latencylens_collector.queries.explain import request_detail, span_tree
from latencylens_collector.queries.requests import list_requests
from latencylens_collector.queries.stats import BUCKETS, METRIC_COMPONENTS, stats

__all__ = [
    "BUCKETS",
    "GROUP_FIELDS",
    "MAX_LIMIT",
    "MAX_RANGE_NS",
    "METRIC_COMPONENTS",
    "TRACE_ID_PATTERN",
    "Filters",
    "QueryError",
    "RollupUse",
    "compare",
    "list_requests",
    "parse_group_by",
    "parse_time",
    "request_detail",
    "span_tree",
    "stats",
]
