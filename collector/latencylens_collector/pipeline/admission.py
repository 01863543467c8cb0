"""The per-trace span cap: spans of a trace beyond ``max_trace_spans`` are stored, marked.

A trace of tens of thousands of spans (an agent loop, or a sender building one on purpose) would
cost every per-trace step downstream in proportion, and its breakdown means little anyway. So the
collector counts the spans it admits per trace and, once a trace has had ``cap`` of them, writes
``latencylens.trace.too_large = true`` on each further span. Nothing is dropped; the row builder
reads the mark: a trace with a marked span is attributed from its spans under the cap and its
parentless ones, and its row says ``provenance.trace = too_large``
(:func:`~latencylens_collector.analysis.request_rows.attributable`).

Counts live in memory for the ``remembered`` most recently seen traces (least recently seen
forgotten first, about 200 bytes each), so they survive pieces of a trace arriving in many
exports but not a restart; an export refused after counting is uncounted (its retry counts once).
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Final

from latencylens import semconv
from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.request_rows import TOO_LARGE_MARK

REMEMBERED_TRACES: Final = 50_000
TOO_LARGE: Final = TOO_LARGE_MARK


class TraceCap:
    """Counts admitted spans per ``(project, trace)`` and marks those beyond ``cap``."""

    def __init__(self, cap: int, remembered: int = REMEMBERED_TRACES) -> None:
        self.cap = max(1, cap)
        self.remembered = max(1, remembered)
        self._counts: OrderedDict[tuple[str, bytes], int] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, spans: list[SpanRow]) -> tuple[list[SpanRow], Callable[[], None]]:
        """``spans`` with those past their trace's cap marked (a copy; ``spans`` itself when none
        is), and a function that takes the count back (call it when the export is refused)."""
        added = Counter((row.project, row.trace_id) for row in spans)
        seen: dict[tuple[str, bytes], int] = {}
        with self._lock:
            counts = self._counts
            for key, count in added.items():
                before = counts.pop(key, 0)
                counts[key] = before + count  # now the most recently seen
                if before + count > self.cap:
                    seen[key] = before
            while len(counts) > self.remembered:
                counts.popitem(last=False)

        def undo() -> None:
            with self._lock:
                for key, count in added.items():
                    if key in self._counts:
                        self._counts[key] = max(0, self._counts[key] - count)

        if not seen:
            return spans, undo
        marked = []
        for row in spans:
            key = (row.project, row.trace_id)
            if key in seen:
                seen[key] += 1
                if seen[key] > self.cap:
                    row = replace(row, attributes={**row.attributes, semconv.TRACE_TOO_LARGE: TOO_LARGE})
            marked.append(row)
        return marked, undo

    def admit_stored(self, project: str, trace_spans: dict[bytes, int]) -> bool:
        """Count spans the engine stored (by trace) if none of their traces goes past its cap with
        them; else count nothing and return False: the body must take the Python path, whose
        :meth:`admit` marks the spans past the cap (stored again, the marked copies replace the
        engine's: ``spans`` keeps each span's latest insert)."""
        with self._lock:
            counts = self._counts
            if any(counts.get((project, trace), 0) + n > self.cap for trace, n in trace_spans.items()):
                return False
            for trace, n in trace_spans.items():
                key = (project, trace)
                counts[key] = counts.pop(key, 0) + n  # now the most recently seen
            while len(counts) > self.remembered:
                counts.popitem(last=False)
        return True

    def count(self, project: str, trace_id: bytes) -> int:
        """Spans admitted for this trace (0 once forgotten)."""
        with self._lock:
            return self._counts.get((project, trace_id), 0)
