"""The slowest requests of a window, one page at a time (cursor, never offset)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.queries._common import MAX_LIMIT, QueryError
from latencylens_collector.queries.responses import RequestList, RequestSummary, TraceIdMatches
from latencylens_collector.queries.scope import NO_FILTERS, REQUEST_FIELDS, Filters, RequestScope
from latencylens_collector.queries.times import MAX_NS, duration_ms_ns, from_ns, window
from latencylens_collector.storage.store import Store

_CANDIDATE_GROWTH = 4
_MAX_CURSOR_CHARS = 80
"""A cursor encodes at most 19 digits, a colon and 32 hex characters: 70 base64 characters."""
MAX_PREFIX_MATCHES = 10
TRACE_ID_PREFIX_PATTERN = r"^[0-9a-fA-F]{1,32}$"


def encode_cursor(e2e_ns: int, trace_hex: str) -> str:
    """Opaque position after a row: its (e2e_ns, trace id), the list's sort key."""
    return base64.urlsafe_b64encode(f"{e2e_ns}:{trace_hex}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """The position :func:`encode_cursor` wrote; anything else (garbled, or a number no stored
    e2e can have, which would page silently from the wrong place) is a QueryError."""
    try:
        if len(cursor) > _MAX_CURSOR_CHARS:
            raise ValueError("length")
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        e2e_text, trace_hex = text.split(":")
        bytes.fromhex(trace_hex)
        e2e = int(e2e_text)
        if len(trace_hex) != 32 or not e2e_text.isdigit() or not 0 <= e2e <= MAX_NS:
            raise ValueError("position")
        return e2e, trace_hex.lower()
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise QueryError("invalid cursor: pass next_cursor from the previous page unchanged") from exc


def list_requests(
    store: Store,
    project: str,
    *,
    now: datetime,
    since: str | None = None,
    until: str | None = None,
    filters: Filters = NO_FILTERS,
    min_duration_ms: float | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> RequestList:
    """Requests started in [since, until) (default: the 24 h before ``now``), slowest first.

    Two narrow steps instead of ``FINAL`` over the window: (1) the top candidates by (e2e desc,
    trace id) among all stored row versions, reading three columns; (2) the newest row of each
    candidate's trace. A candidate counts only if it is that newest row, so re-computed requests
    appear once, with their latest numbers. Every newest row outside the candidates ranks below
    the last candidate, so once a full page is verified it is the true page; otherwise the
    candidate set grows.
    """
    limit = max(1, min(limit, MAX_LIMIT))
    scope = RequestScope(project, [window(now, since, until)], filters)
    candidates_sql, params = scope.every_version(store, "trace_id")
    if min_duration_ms is not None:
        candidates_sql += " AND e2e_ns >= {min_e2e:Int64}"
        params["min_e2e"] = duration_ms_ns(min_duration_ms)
    if cursor:
        params["c_e2e"], params["c_trace"] = decode_cursor(cursor)
        candidates_sql += (
            " AND (e2e_ns < {c_e2e:Int64} OR (e2e_ns = {c_e2e:Int64} AND trace_id > unhex({c_trace:String})))"
        )
    candidates_sql += " ORDER BY e2e_ns DESC, trace_id LIMIT {k:UInt32}"
    wanted = limit + 1
    k = 2 * wanted  # room for a few older versions without a second round
    while True:
        candidates = store.query(candidates_sql, {**params, "k": k})
        kept = _newest_only(store, project, candidates)
        if len(kept) >= wanted or len(candidates) < k:
            break
        k *= _CANDIDATE_GROWTH
    rows = _full_rows(store, project, kept[:wanted])
    page = rows[:limit]
    next_cursor = None
    if len(rows) > limit:
        last = page[-1]
        next_cursor = encode_cursor(int(last["e2e_ns"]), str(last["trace_hex"]))
    return RequestList(requests=[summary_from_row(row) for row in page], next_cursor=next_cursor)


def trace_ids_with_prefix(
    store: Store, project: str, prefix: str, limit: int = MAX_PREFIX_MATCHES
) -> TraceIdMatches:
    """Stored trace ids starting with ``prefix`` (hex, any case), so a person can name a request by
    the start of its id, as git takes the start of a commit hash. Any stored time; sorted."""
    where, params = RequestScope(project).where()
    sql = (
        f"SELECT DISTINCT lower(hex(trace_id)) AS trace_hex FROM {store.table('requests')} WHERE {where} "
        "AND startsWith(lower(hex(trace_id)), {prefix:String}) ORDER BY trace_hex LIMIT {k:UInt32}"
    )
    rows = store.query(sql, {**params, "prefix": prefix.lower(), "k": limit + 1})
    ids = [str(row["trace_hex"]) for row in rows]
    return TraceIdMatches(trace_ids=ids[:limit], truncated=len(ids) > limit)


def _newest_only(store: Store, project: str, candidates: list[dict[str, Any]]) -> list[bytes]:
    """Trace ids of the candidates that are their trace's newest row, in candidate order.

    Reads two narrow columns; the wide rows are fetched for the page only (each costs a granule).
    """
    if not candidates:
        return []
    ids = {bytes(row["trace_id"]) for row in candidates}
    sql, params = RequestScope(project, trace_ids=list(ids)).current_versions(store)
    newest = {bytes(row["trace_id"]): row["version"] for row in store.query(sql, params)}
    kept: list[bytes] = []
    for candidate in candidates:
        trace = bytes(candidate["trace_id"])
        if trace not in kept and newest.get(trace) == candidate["version"]:
            kept.append(trace)
    return kept


def _full_rows(store: Store, project: str, trace_ids: list[bytes]) -> list[dict[str, Any]]:
    """The newest full row of each trace, in the given order."""
    if not trace_ids:
        return []
    sql, params = RequestScope(project, trace_ids=trace_ids).latest(store, REQUEST_FIELDS)
    rows = {row["trace_hex"]: row for row in store.query(sql, params)}
    return [rows[trace.hex()] for trace in trace_ids if trace.hex() in rows]


def summary_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "trace_id": row["trace_hex"],
        "start_time": from_ns(int(row["start_ns"])),
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
        "tokens_estimated": bool(row["tokens_estimated"]),
        "ttft_ns": row["ttft_ns"],
        "itl_ns": row["itl_ns"],
        "decode_tokens_per_second": row["decode_tokens_per_second"],
        "model_calls": row["model_calls"],
        "span_count": row["span_count"],
        "root_missing": bool(row["root_missing"]),
    }


def summary_from_row(row: Mapping[str, Any]) -> RequestSummary:
    return RequestSummary(**summary_fields(row))
