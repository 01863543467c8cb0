"""The query API's logic as plain functions over a :class:`Store`; routes and tests call these.

Every function takes the caller's project first and filters on it with a bound parameter; request
rows are read through :class:`RequestScope` only, and times through :func:`parse_time`.
"""

from latencylens_collector.queries._common import (
    GROUP_FIELDS,
    MAX_LIMIT,
    TRACE_ID_PATTERN,
    QueryError,
    parse_group_by,
)
from latencylens_collector.queries._sources import RollupUse
from latencylens_collector.queries.compare import compare
from latencylens_collector.queries.explain import request_detail, span_tree
from latencylens_collector.queries.requests import list_requests
from latencylens_collector.queries.scope import METRIC_COLUMNS, Filters, RequestScope
from latencylens_collector.queries.stats import BUCKETS, METRIC_COMPONENTS, stats
from latencylens_collector.queries.times import MAX_RANGE_NS, TIME_HELP, parse_duration, parse_time

__all__ = [
    "BUCKETS",
    "GROUP_FIELDS",
    "MAX_LIMIT",
    "MAX_RANGE_NS",
    "METRIC_COLUMNS",
    "METRIC_COMPONENTS",
    "TIME_HELP",
    "TRACE_ID_PATTERN",
    "Filters",
    "QueryError",
    "RequestScope",
    "RollupUse",
    "compare",
    "list_requests",
    "parse_duration",
    "parse_group_by",
    "parse_time",
    "request_detail",
    "span_tree",
    "stats",
]
