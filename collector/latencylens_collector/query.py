"""What the query API returns, as plain functions over a :class:`Store` (routes only call these)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from latencylens_collector.attribution import COMPONENTS
from latencylens_collector.ingest import attribute, span_hex
from latencylens_collector.models import RequestDetail, RequestList, RequestSummary, SpanTree
from latencylens_collector.rows import STATUS_NAMES, SpanRow
from latencylens_collector.storage import Store

DEFAULT_WINDOW_NS = 24 * 3600 * 1_000_000_000
MAX_LIMIT = 1000
TRACE_ID_PATTERN = r"^[0-9a-fA-F]{32}$"
_TRACE_ID = re.compile(TRACE_ID_PATTERN)
_UNIX_SECONDS = re.compile(r"^-?\d+(\.\d+)?$")


def parse_time(value: str) -> int:
    """ISO-8601 (naive means UTC) or unix seconds, as ns since the epoch. Raises ValueError."""
    text = value.strip()
    if _UNIX_SECONDS.match(text):
        return round(float(text) * 1e9)
    moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return _to_ns(moment)


def _to_ns(moment: datetime) -> int:
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _from_ns(ns: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=ns // 1000)


def list_requests(
    store: Store,
    *,
    now: datetime,
    since: str | None = None,
    until: str | None = None,
    service: str | None = None,
    model: str | None = None,
    min_duration_ms: float | None = None,
    limit: int = 50,
) -> RequestList:
    """Slowest requests in a window (default: the 24 h before ``now``)."""
    until_ns = parse_time(until) if until else _to_ns(now) + 1
    since_ns = parse_time(since) if since else until_ns - DEFAULT_WINDOW_NS
    rows = store.list_requests(
        since_ns=since_ns,
        until_ns=until_ns,
        service=service,
        model=model,
        min_e2e_ns=round(min_duration_ms * 1e6) if min_duration_ms is not None else None,
        limit=max(1, min(limit, MAX_LIMIT)),
    )
    return RequestList(requests=[summary_from_row(row) for row in rows])


def summary_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "trace_id": row["trace_hex"],
        "start_time": _from_ns(int(row["start_ns"])),
        "service": row["service"],
        "name": row["name"],
        "model": row["model"],
        "provider": row["provider"],
        "status_error": bool(row["status_error"]),
        "e2e_ns": row["e2e_ns"],
        "parts": {name: int(row[f"{name}_ns"]) for name in COMPONENTS},
        "provenance": dict(row["provenance"]),
        "inconsistent": bool(row["inconsistent"]),
        "input_tokens": row["input_tokens"],
        "output_tokens": row["output_tokens"],
        "cache_read_input_tokens": row["cache_read_input_tokens"],
        "ttft_ns": row["ttft_ns"],
        "itl_ns": row["itl_ns"],
        "decode_tokens_per_second": row["decode_tokens_per_second"],
        "model_calls": row["model_calls"],
        "span_count": row["span_count"],
    }


def summary_from_row(row: Mapping[str, Any]) -> RequestSummary:
    return RequestSummary(**summary_fields(row))


def is_trace_id(value: str) -> bool:
    return bool(_TRACE_ID.match(value))


def request_detail(store: Store, trace_id_hex: str) -> RequestDetail | None:
    """Summary, busy view and span tree of one request; None when it is unknown."""
    trace_id = bytes.fromhex(trace_id_hex)
    row = store.get_request(trace_id)
    if row is None:
        return None
    spans = store.spans_of_traces([trace_id])
    return RequestDetail(
        **summary_fields(row),
        busy={name: int(row[f"busy_{name}_ns"]) for name in COMPONENTS},
        spans=span_tree(spans),
    )


def span_tree(spans: Sequence[SpanRow]) -> list[SpanTree]:
    """Nest spans under their parents. Spans whose parent is missing hang under the root, as in
    attribution; other parentless spans are extra top-level entries."""
    breakdown = attribute(spans)
    critical = breakdown.span_critical_ns if breakdown else {}
    self_ns = breakdown.span_self_ns if breakdown else {}
    root_id = breakdown.root_span_id if breakdown else None
    nodes = {
        span_hex(row.span_id): SpanTree(
            span_id=span_hex(row.span_id),
            parent_span_id=span_hex(row.parent_span_id) if row.has_parent else None,
            name=row.name,
            kind=row.kind,
            span_kind=row.span_kind,
            service=row.service,
            start_ns=row.start_ns,
            duration_ns=row.duration_ns,
            self_ns=self_ns.get(span_hex(row.span_id), 0),
            critical_ns=critical.get(span_hex(row.span_id), 0),
            status=STATUS_NAMES.get(row.status_code, "unset"),
            status_message=row.status_message,
            attributes=dict(row.attributes),
        )
        for row in spans
    }
    attached: dict[str, str] = {}
    top: list[SpanTree] = []
    for span_id, node in nodes.items():
        parent = node.parent_span_id
        if parent is not None and parent in nodes and not _reaches(attached, parent, span_id):
            attached[span_id] = parent
        elif parent is not None and root_id is not None and span_id != root_id:
            attached[span_id] = root_id
        else:
            top.append(node)
    for span_id, parent in attached.items():
        nodes[parent].children.append(nodes[span_id])
    for node in nodes.values():
        node.children.sort(key=lambda child: (child.start_ns, child.span_id))
    top.sort(key=lambda node: (node.span_id != root_id, node.start_ns))
    return top


def _reaches(attached: Mapping[str, str], start: str, target: str) -> bool:
    """Whether following accepted parent links from ``start`` arrives at ``target`` (a cycle)."""
    seen = set()
    current: str | None = start
    while current is not None and current not in seen:
        if current == target:
            return True
        seen.add(current)
        current = attached.get(current)
    return False
