"""One request: its summary, busy view, explanation and span tree with each span's share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, Final

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.analysis.conventions import display_name
from latencylens_collector.analysis.conventions.same_call import same_call_marks
from latencylens_collector.analysis.conventions.trace import resolve_trace
from latencylens_collector.analysis.costs import (
    NANO_USD_PER_USD,
    Prices,
    price_data_version,
    request_cost_usd,
)
from latencylens_collector.analysis.explanation import explain
from latencylens_collector.analysis.records import STATUS_NAMES, SpanRow
from latencylens_collector.analysis.request_rows import attribute, span_hex
from latencylens_collector.queries.requests import summary_fields
from latencylens_collector.queries.responses import Explanation, RequestDetail, SpanTree
from latencylens_collector.queries.scope import REQUEST_FIELDS, RequestScope
from latencylens_collector.storage.store import Store


def request_detail(
    store: Store, project: str, trace_id_hex: str, prices: Prices | None = None
) -> RequestDetail | None:
    """The request's newest row and spans within ``project``; None when it is unknown there.
    ``prices``: configured prices that take precedence over the bundled price data."""
    trace_id = bytes.fromhex(trace_id_hex)
    sql, params = RequestScope(project, trace_ids=[trace_id]).latest(store, REQUEST_FIELDS)
    rows = store.query(sql, params)
    if not rows:
        return None
    row = rows[0]
    fields = summary_fields(row)
    spans = store.spans_of_traces([trace_id], project=project)
    found = explain(
        fields["parts"],
        fields["provenance"],
        int(row["e2e_ns"]),
        row["provider"],
        row["model"],
        fields["ttft_ns"],
    )
    return RequestDetail(
        **fields,
        busy={name: int(row[f"busy_{name}_ns"]) for name in COMPONENTS},
        explanation=Explanation(**asdict(found)),
        spans=span_tree(spans),
        **_cost(row, fields, prices),
    )


def _cost(row: Mapping[str, Any], fields: Mapping[str, Any], prices: Prices | None) -> dict[str, Any]:
    """``cost_usd`` and ``price_data``: as stored with the row at ingest (the same figure stats and
    compare add up); for a row stored before costs were, priced now from its counts."""
    if row.get("price_version"):
        stored = row.get("cost_nano_usd")
        return {
            "cost_usd": None if stored is None else int(stored) / NANO_USD_PER_USD,
            "price_data": row["price_version"],
        }
    return {"cost_usd": _priced_now(fields, prices), "price_data": price_data_version()}


def _priced_now(fields: Mapping[str, Any], prices: Prices | None) -> float | None:
    """The request's price when one call's counts are all known (:mod:`analysis.costs`)."""
    counts = [fields["input_tokens"], fields["cache_read_input_tokens"], fields["output_tokens"]]
    if fields["model_calls"] != 1 or None in counts:
        return None
    input_tokens, cached_tokens, output_tokens = counts
    return request_cost_usd(
        fields["provider"], fields["model"], input_tokens, cached_tokens, output_tokens, prices=prices
    )


def span_tree(spans: Sequence[SpanRow]) -> list[SpanTree]:
    """Nest spans under their parents. Spans whose parent is missing hang under the root, as in
    attribution; other parentless spans are extra top-level entries."""
    breakdown = attribute(spans)
    marks = same_call_marks(resolve_trace(spans))  # spans of one call: which one counts it
    critical = breakdown.span_critical_ns if breakdown else {}
    self_ns = breakdown.span_self_ns if breakdown else {}
    root_id = breakdown.root_span_id if breakdown else None
    e2e = breakdown.e2e_ns if breakdown else 0
    nodes = {}
    for row in spans:
        span_id = span_hex(row.span_id)
        on_path = critical.get(span_id, 0)
        nodes[span_id] = SpanTree(
            span_id=span_id,
            parent_span_id=span_hex(row.parent_span_id) if row.has_parent else None,
            name=display_name(row.name, row.attributes),
            kind=row.kind,
            span_kind=row.span_kind,
            service=row.service,
            start_ns=row.start_ns,
            duration_ns=row.duration_ns,
            self_ns=self_ns.get(span_id, 0),
            critical_ns=on_path,
            critical_share=on_path / e2e if e2e > 0 else 0.0,
            status=STATUS_NAMES.get(row.status_code, "unset"),
            status_message=row.status_message,
            attributes={**row.attributes, **marks.get(row.span_id, {})},
        )
    parents = _parent_links({span_id: node.parent_span_id for span_id, node in nodes.items()})
    attached: dict[str, str] = {}
    top: list[SpanTree] = []
    for span_id, node in nodes.items():
        parent = parents.get(span_id)
        if parent is not None:
            attached[span_id] = parent
        elif node.parent_span_id is not None and root_id is not None and span_id != root_id:
            attached[span_id] = root_id
        else:
            top.append(node)
    for span_id, parent in attached.items():
        nodes[parent].children.append(nodes[span_id])
    for node in nodes.values():
        node.children.sort(key=lambda child: (child.start_ns, child.span_id))
    top.sort(key=lambda node: (node.span_id != root_id, node.start_ns))
    _cap_nesting(top)
    return top


def _parent_links(parent_of: Mapping[str, str | None]) -> dict[str, str]:
    """Each span's parent link (in ``parent_of``'s order), leaving out links to spans not given
    and, of each cycle of links, the link of its span that comes last: the links that remain make
    a forest. Linear: each span is walked up from once."""
    order = {span_id: index for index, span_id in enumerate(parent_of)}
    state: dict[str, int] = {}  # 1: on the walk being made, 2: done
    broken: set[str] = set()
    for start in parent_of:
        path: list[str] = []
        current: str | None = start
        while current is not None and current in order and current not in state:
            state[current] = 1
            path.append(current)
            current = parent_of[current]
        if current is not None and state.get(current) == 1:  # the walk closed a cycle
            cycle = path[path.index(current) :]
            broken.add(max(cycle, key=order.__getitem__))
        for span_id in path:
            state[span_id] = 2
    return {
        span_id: parent
        for span_id, parent in parent_of.items()
        if parent is not None and parent in order and span_id not in broken
    }


MAX_NESTING: Final = 100
"""Levels of ``children`` an answer nests. JSON readers (Python's json, pydantic) stop at a depth
of a few hundred to a thousand, so a deeper tree is listed below this level in tree order."""


def _cap_nesting(top: Sequence[SpanTree]) -> None:
    """Flatten every subtree below :data:`MAX_NESTING` levels, in place and without recursion: a
    span at the last nested level gets all its descendants as ``children``, in tree order (each
    before its own children, siblings by start), each naming its true parent in
    ``parent_span_id``, so the tree can be rebuilt exactly."""
    stack: list[tuple[SpanTree, int]] = [(node, 1) for node in reversed(top)]
    seen: set[int] = set()  # each node once, whatever links a malformed trace has
    while stack:
        node, level = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if level < MAX_NESTING:
            stack.extend((child, level + 1) for child in reversed(node.children))
        elif node.children:
            node.children = _descendants(node, seen)


def _descendants(node: SpanTree, seen: set[int]) -> list[SpanTree]:
    """``node``'s descendants in tree order, each without children."""
    ordered: list[SpanTree] = []
    stack = list(reversed(node.children))
    while stack:
        child = stack.pop()
        if id(child) in seen:
            continue
        seen.add(id(child))
        stack.extend(reversed(child.children))
        child.children = []
        ordered.append(child)
    return ordered
