"""Would request rows be cheaper if ClickHouse attributed them? The critical-path walk in SQL,
against what the engine path pays for rows today, on the same traces in one run.

Issue 18's last targets need the engine path's request rows at 5–15 µs a span (docs/benchmarks.md,
"Where the engine path's CPU goes"). Today they are read back from ClickHouse, parsed and built in
Python (with the compiled modules when ``make native`` has run). The alternative is to attribute
in ClickHouse itself, where the spans already are. This measures that alternative's core, the
critical-path walk of :func:`~latencylens_collector.analysis.attribution.attribute_request`,
written in ClickHouse SQL (:data:`WALK`: per trace, its spans as arrays and an ``arrayFold`` that
walks the tree with an explicit stack, as ``_Walk.critical`` does; a model call's parts scaled to
its slice by largest remainder, as ``scale_parts`` does), and checks its result against the rows
the collector wrote: every trace's ``e2e_ns`` and ten critical-path parts must be equal.

It is an experiment, not a second definition in the product: it covers what the benchmark's
traces need (our SDK's spans, providers that report queue, prefill and decode), not the
conventions, the busy view, tokens, costs, stream metrics or tombstones a row also holds.

The ingest benchmark's traces are stored as the collector stores them (:mod:`bench._stored_traces`),
then, :data:`PASSES` times each, medians of process CPU (chdb's threads included):

* **baseline**, rows as the engine path makes them: the traces read back as its writer reads
  them (pages of 1,600 traces), parsed, and their rows built (``build_rows``);
* that cost's read-back alone, then with its parsing into spans, and the same traces'
  attribution alone in Python (``attribute_request`` over nodes already made: both walks,
  critical and busy);
* in SQL: the spans read and grouped per trace with no walk, then the same with the walk, in one
  query for every trace and in one query per page of 1,600 (as an INSERT's batch would run it).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, Final

from bench import _stored_traces
from latencylens_collector.analysis import _compiled
from latencylens_collector.analysis.attribution import COMPONENTS, attribute_request
from latencylens_collector.analysis.conventions.trace import resolve_trace
from latencylens_collector.analysis.request_rows import span_node
from latencylens_collector.analysis.row_work import build_rows
from latencylens_collector.storage.store import Store
from latencylens_collector.storage.trace_ids import TRACE_IDS_SET, trace_ids_param

DATABASE: Final = "bench_rows_sql"
PASSES: Final = 5

_PARTS: Final = len(COMPONENTS)
_ZEROS: Final = f"[{', '.join('0' * _PARTS)}]::Array(Int64)"
_OWN_COMPONENT: Final = "multiIf(kind = 'retrieval', 1, kind = 'tool', 2, 3)"
"""A span's own time: retrieval, tool or app_other (1-based positions in COMPONENTS)."""
assert COMPONENTS[:3] == ("retrieval", "tool", "app_other")


def _reported(key: str) -> str:
    return f"toInt64OrNull(attributes['latencylens.provider.{key}'])"


def _model_parts() -> str:
    """A model call's whole-duration parts, in COMPONENTS order (``model_call_parts`` for calls
    with reported queue, prefill and decode, or none)."""
    q, p, d = "ifNull(q, 0)", "ifNull(p, 0)", "ifNull(d, 0)"
    q_cut = f"least({q}, dur)"
    p_cut = f"least({p}, dur - {q_cut})"
    d_cut = f"least({d}, dur - {q_cut} - {p_cut})"
    position = {name: index for index, name in enumerate(COMPONENTS)}

    def parts(values: dict[str, str]) -> str:
        return "[" + ", ".join(values.get(name, "0") for name in sorted(position, key=position.get)) + "]"

    fits = parts(
        {
            "network": "dur - total",
            "queue": q,
            "prefill": p,
            "decode": d,
            "model_unattributed": "total - reported",
        }
    )
    clipped = parts(
        {
            "queue": q_cut,
            "prefill": p_cut,
            "decode": d_cut,
            "model_unattributed": f"dur - {q_cut} - {p_cut} - {d_cut}",
        }
    )
    unreported = parts({"model_unattributed": "dur"})
    by_total = f"if(total IS NULL, {unreported}, if(total <= dur, {fits}, {clipped}))"
    return f"if(NOT is_model, {_ZEROS}, {by_total})::Array(Int64)"


SPANS_SQL: Final = f"""
SELECT trace_id, span_id, parent_span_id,
       toUnixTimestamp64Nano(start_time) AS s, s + greatest(duration_ns, 0) AS e,
       {_OWN_COMPONENT} AS own, kind = 'model' AS is_model, greatest(duration_ns, 0) AS dur,
       greatest({_reported("queue_ns")}, 0) AS q, greatest({_reported("prefill_ns")}, 0) AS p,
       greatest({_reported("decode_ns")}, 0) AS d, {_reported("server_total_ns")} AS reported_total,
       ifNull(q, 0) + ifNull(p, 0) + ifNull(d, 0) AS reported,
       if(reported_total IS NULL AND q IS NULL AND p IS NULL AND d IS NULL, NULL,
          greatest(ifNull(reported_total, reported), reported)) AS total,
       {_model_parts()} AS model_parts
FROM {{spans}} FINAL
WHERE project = 'default' {{traces}}
"""
"""One row per span: its window, own component, and, for a model call, its parts."""

TREES_SQL: Final = f"""
SELECT trace_id, groupArray(span_id) AS ids, groupArray(parent_span_id) AS parents,
       groupArray(s) AS starts, groupArray(e) AS ends, groupArray(own) AS owns,
       groupArray(is_model) AS models, groupArray(model_parts) AS parts_of, length(ids) AS n,
       arrayReverseSort(
           i -> (ends[i] - starts[i], -starts[i]),
           arrayFilter(i -> parents[i] = toFixedString(repeat(char(0), 8), 8), range(1, n + 1)))[1] AS root,
       arrayMap(i -> if(i = root, 0, if(indexOf(ids, parents[i]) IN (0, i), root, indexOf(ids, parents[i]))),
                range(1, n + 1)) AS parent_at,
       arrayMap(i -> arrayReverseSort(j -> (ends[j], starts[j]),
                                      arrayFilter(j -> parent_at[j] = i, range(1, n + 1))),
                range(1, n + 1)) AS children
FROM ({SPANS_SQL})
GROUP BY trace_id
HAVING root > 0
"""
"""Each trace as arrays: its root (the longest parentless span), each span's parent (a missing
parent: the root) and its children, latest end first (``attribute_request``'s tree)."""


def _scaled(parts: str, total: str) -> str:
    """``scale_parts``: ``parts`` scaled to sum to ``total``, largest remainder first (ties: the
    earlier component, as Python's stable sort)."""
    whole = f"arraySum({parts})"
    floors = f"arrayMap(v -> intDiv(v * {total}, {whole}), {parts})"
    by_remainder = f"arraySort(j -> (-((({parts})[j] * {total}) % {whole}), j), range(1, {_PARTS + 1}))"
    short = f"({total} - arraySum({floors}))"
    plus_one = f"if(indexOf({by_remainder}, i) <= {short}, 1, 0)"
    rounded = f"arrayMap((v, i) -> v + {plus_one}, {floors}, range(1, {_PARTS + 1}))"
    return f"if({whole} <= 0 OR {total} <= 0, {_ZEROS}, if({whole} = {total}, {parts}, {rounded}))"


def _given(parts: str, component: str, ns: str) -> str:
    return (
        f"arrayMap((v, i) -> v + if(i = {component} AND {ns} > 0, {ns}, 0), {parts}, range(1, {_PARTS + 1}))"
    )


def _step() -> str:
    """One step of the walk. The state is a stack of frames (span, lo, cursor, next child) as four
    arrays, and the parts so far: the top frame gives its next child the part of its window
    before the cursor, or, with none left, its remaining window to itself and is popped."""
    nodes, los, cursors, nexts, parts = (f"tupleElement(acc, {index})" for index in range(1, 6))
    top, lo, cursor, at = (f"{stack}[-1]" for stack in (nodes, los, cursors, nexts))
    child = f"children[{top}][{at}]"
    start, end = f"greatest(starts[{child}], {lo})", f"least(ends[{child}], {cursor})"
    advanced = f"arrayPushBack(arrayPopBack({nexts}), {at} + 1)"
    moved = f"arrayPushBack(arrayPopBack({cursors}), {start})"
    with_gap = _given(parts, f"owns[{top}]", f"{cursor} - {end}")
    popped = (
        f"(arrayPopBack({nodes}), arrayPopBack({los}), arrayPopBack({cursors}), arrayPopBack({nexts}), "
        f"{_given(parts, f'owns[{top}]', f'{cursor} - {lo}')})"
    )
    skipped = f"({nodes}, {los}, {cursors}, {advanced}, {parts})"
    model = f"arrayMap((a, b) -> a + b, {with_gap}, {_scaled(f'parts_of[{child}]', f'{end} - {start}')})"
    leaf = _given(with_gap, f"owns[{child}]", f"{end} - {start}")
    pushed = (
        f"(arrayPushBack({nodes}, {child}), arrayPushBack({los}, {start}), arrayPushBack({moved}, {end}), "
        f"arrayPushBack({advanced}, 1), {with_gap})"
    )
    entered = (
        f"if(models[{child}], ({nodes}, {los}, {moved}, {advanced}, {model}), "
        f"if(empty(children[{child}]), ({nodes}, {los}, {moved}, {advanced}, {leaf}), {pushed}))"
    )
    has_child = f"({cursor} > {lo} AND {at} <= length(children[{top}]))"
    return (
        f"if(empty({nodes}), acc, if(NOT {has_child}, {popped}, "
        f"if({start} >= {cursor} OR {end} <= {start}, {skipped}, {entered})))"
    )


WALK_SQL: Final = f"""
SELECT trace_id, ends[root] - starts[root] AS e2e_ns,
       tupleElement(arrayFold((acc, x) -> {_step()}, range(2 * n + 2),
           ([root]::Array(UInt64), [starts[root]]::Array(Int64), [ends[root]]::Array(Int64),
            [1]::Array(UInt64), {_ZEROS})), 5) AS parts
FROM ({TREES_SQL})
"""
"""Each trace's e2e and critical-path parts (COMPONENTS order). A span is entered once at most
and every step enters a child or pops a frame, so 2 n + 2 steps finish any tree of n spans."""

GROUPED_SQL: Final = f"SELECT trace_id, n, root, length(children) FROM ({TREES_SQL})"


def _cpu_median(work: Callable[[], Any]) -> float:
    times = []
    for _ in range(PASSES):
        began = time.process_time()
        work()
        times.append(time.process_time() - began)
    return statistics.median(times)


def _walk_sql(store: Store, paged: bool = False) -> str:
    """:data:`WALK_SQL` over every trace, or, ``paged``, over the ``trace_ids`` parameter's."""
    traces = f"AND trace_id IN {TRACE_IDS_SET}" if paged else ""
    return WALK_SQL.format(spans=store.table("spans"), traces=traces)


def _differing(store: Store) -> tuple[int, int]:
    """(traces the walk attributed, those whose e2e or parts differ from the stored row's)."""
    walked = store.query_columns(_walk_sql(store))
    columns = ", ".join(f"{name}_ns" for name in COMPONENTS)
    stored = store.query_columns(f"SELECT trace_id, e2e_ns, [{columns}] FROM {store.table('requests')} FINAL")
    rows = {bytes(trace): (e2e, list(parts)) for trace, e2e, parts in zip(*stored, strict=True)}
    differing = sum(
        rows.get(bytes(trace)) != (e2e, list(parts)) for trace, e2e, parts in zip(*walked, strict=True)
    )
    return len(walked[0]), differing


def run(report: Any) -> None:
    store = _stored_traces.fresh_store(DATABASE)
    trace_ids, spans = _stored_traces.load(store)
    per_span = 1e6 / spans

    def rows_today() -> None:
        for read in _stored_traces.read_back(store, trace_ids):
            build_rows(read)

    traces = [trace for read in _stored_traces.read_back(store, trace_ids) for trace in read.traces()]
    nodes = [[span_node(row) for row in resolve_trace(trace.spans)] for trace in traces]
    baseline = _cpu_median(rows_today) * per_span
    build = "compiled" if _compiled.in_use() else "Python (no compiled build: run `make native`)"
    report.add(
        "rows as the engine path makes them: read back, parsed, built (baseline)",
        baseline,
        "µs CPU per span",
        f"{len(trace_ids):,} traces, {spans:,} spans, read back as the engine path does; {build} modules",
    )
    pages = [trace_ids_param(page) for page in _stored_traces.pages(trace_ids)]
    walk_of_page = _walk_sql(store, paged=True)
    for name, work in (
        ("of which the read-back query", lambda: _stored_traces.read_back(store, trace_ids)),
        (
            "of which the read-back query and its parsing into spans",
            lambda: [r.traces() for r in _stored_traces.read_back(store, trace_ids)],
        ),
        (
            "attribution alone in Python (both walks, nodes made)",
            lambda: [attribute_request(n) for n in nodes],
        ),
        (
            "SQL: spans read and grouped per trace, no walk",
            lambda: store.query_columns(GROUPED_SQL.format(spans=store.table("spans"), traces="")),
        ),
        (
            "SQL: the same with the critical-path walk",
            lambda: store.query_columns(_walk_sql(store)),
        ),
        (
            f"SQL: the walk, one query per {_stored_traces.PAGE:,} traces (an INSERT's batch)",
            lambda: [store.query_columns(walk_of_page, {"trace_ids": page}) for page in pages],
        ),
    ):
        value = _cpu_median(work) * per_span
        report.add(name, value, "µs CPU per span", ratio=value / baseline)
    walked, differing = _differing(store)
    report.add(
        "traces whose SQL e2e and critical parts differ from the stored row's",
        differing,
        "traces",
        f"of {walked:,} walked",
    )
    _stored_traces.drop(store)
