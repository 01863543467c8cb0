"""From stored spans to one attributed row per request.

Every batch recomputes the rows of the traces it touched from *all* their stored spans, so spans
arriving late (children after the root, a slow service's export) simply produce a newer row; the
``requests`` table keeps the latest computation. Traces the batch holds whole (the common case)
are computed from the batch itself, without reading them back. Rows are built by the pure
functions of :mod:`latencylens_collector.analysis.request_rows`.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Sequence

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.request_rows import build_request_row, group_by_trace
from latencylens_collector.runtime.clock import Clock
from latencylens_collector.storage.store import Store


class Ingestor:
    """Stores span batches and recomputes the request rows of the traces they touch.

    Rewriting a batch is harmless: spans collapse by (project, trace_id, span_id) and each request
    row is recomputed from all stored spans of its trace, so a replayed batch yields the same row.
    """

    def __init__(self, store: Store, clock: Clock = time.time_ns) -> None:
        self.store = store
        self.clock = clock
        # Serialises insert → read back → write within this process, so two batches of one trace
        # cannot write their rows out of order. Across processes, computed_at (taken before the
        # read) orders them: a later read sees at least as many spans.
        self._lock = threading.Lock()

    def ingest(self, spans: Sequence[SpanRow], dedup_token: str | None = None) -> int:
        """Insert spans in one insert, then rewrite the request rows of their traces; returns how
        many request rows were (re)written. Raises StorageError.

        After the insert, one cheap count per project (key columns only) says which traces have
        nothing stored but this batch's spans: their rows are built from the batch in memory. Only
        traces with other spans stored (late spans, replays) are read back, in one query."""
        if not spans:
            return 0
        with self._lock:
            self.store.ensure_ready()
            self.store.insert_spans(spans, dedup_token=dedup_token)
            by_project: dict[str, dict[bytes, list[SpanRow]]] = defaultdict(lambda: defaultdict(list))
            for span in spans:
                by_project[span.project][span.trace_id].append(span)
            rows = []
            for project, batch_traces in by_project.items():
                computed_at_us = self.clock() // 1000
                for trace_spans in self._whole_traces(project, batch_traces):
                    row = build_request_row(trace_spans, computed_at_us)
                    if row is not None:
                        rows.append(row)
            self.store.upsert_requests(rows)
            return len(rows)

    def _whole_traces(self, project: str, batch: dict[bytes, list[SpanRow]]) -> list[list[SpanRow]]:
        """Every stored span of each trace in ``batch`` (grouped by trace, in read-back order).

        A trace whose stored row count equals its number of distinct span ids in the batch holds
        exactly the batch's spans (the insert put each of them there), so it is taken from memory;
        any other trace is read back."""
        counts = self.store.stored_span_counts(batch, project=project)
        whole: list[list[SpanRow]] = []
        read_back: list[bytes] = []
        for trace_id, trace_spans in batch.items():
            distinct = {span.span_id for span in trace_spans}
            if len(distinct) == len(trace_spans) == counts.get(trace_id, 0):
                whole.append(sorted(trace_spans, key=_stored_order))
            else:
                read_back.append(trace_id)
        if read_back:
            stored = self.store.spans_of_traces(read_back, project=project, for_requests=True)
            whole.extend(group_by_trace(stored).values())
        return whole


def _stored_order(span: SpanRow) -> tuple[int, bytes]:
    """The order :meth:`Store.spans_of_traces` returns spans in."""
    return span.start_ns, span.span_id

