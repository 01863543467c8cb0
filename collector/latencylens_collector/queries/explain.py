"""One request: its summary, busy view, explanation and span tree with each span's share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.analysis.conventions import display_name
from latencylens_collector.analysis.conventions.same_call import same_call_marks
from latencylens_collector.analysis.conventions.trace import resolve_trace
from latencylens_collector.analysis.explanation import explain
from latencylens_collector.analysis.records import STATUS_NAMES, SpanRow
from latencylens_collector.analysis.request_rows import attribute, span_hex
from latencylens_collector.queries.requests import summary_fields
from latencylens_collector.queries.responses import Explanation, RequestDetail, SpanTree
from latencylens_collector.queries.scope import REQUEST_FIELDS, RequestScope
from latencylens_collector.storage.store import Store


def request_detail(store: Store, project: str, trace_id_hex: str) -> RequestDetail | None:
    """The request's newest row and spans within ``project``; None when it is unknown there."""
    trace_id = bytes.fromhex(trace_id_hex)
    sql, params = RequestScope(project, trace_ids=[trace_id]).latest(store, REQUEST_FIELDS)
    rows = store.query(sql, params)
    if not rows:
        return None
    row = rows[0]
    fields = summary_fields(row)
    spans = store.spans_of_traces([trace_id], project=project)
    found = explain(fields["parts"], fields["provenance"], int(row["e2e_ns"]), row["provider"], row["model"])
    return RequestDetail(
        **fields,
        busy={name: int(row[f"busy_{name}_ns"]) for name in COMPONENTS},
        explanation=Explanation(**asdict(found)),
        spans=span_tree(spans),
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
