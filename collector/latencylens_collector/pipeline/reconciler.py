"""Makes request rows right once their traces settle, whatever the collectors saw when they wrote.

The write path (:mod:`~latencylens_collector.pipeline.ingest`) computes a trace's row right after
each insert, from what it sees then. With several collectors, replicas or a crash between the span
insert and the row write, that can be a row of part of the trace, or no row at all. The reconciler
runs in every collector (:class:`~latencylens_collector.runtime.scheduler.Scheduler`):

1. Traces whose spans were inserted in ``(cursor, now − settle]`` on the store's clock are
   found in ``traces_touched`` (a view on span inserts, so every insert counts, whoever made it),
   one minute of inserts at a time. A trace with a later insert has not settled and waits for a
   later window. Each trace is looked at twice, one settle delay apart (the same window a settle
   delay earlier is read again), so an insert that became visible up to a settle delay late is
   still seen.
2. Per minute, one narrow query compares what is stored of each of those traces (distinct spans,
   latest insert stamp) with its live request rows, selecting the traces by subquery, and returns
   only the traces whose rows are not right. A trace with exactly one live row whose version is
   what its stored spans give is done; that is the common case, and it costs no span read and no
   Python.
3. Any other trace is read whole and rewritten as a settled trace: a trace without its root is rooted
   at its top-most span (``root_missing``), and rows under other keys get tombstones.

The cursor follows the store's clock, back as well as forward: a pass that reads the clock behind
the cursor (the clock stepped back, or a replica whose clock is behind answered) moves the cursor
back to it. Inserts are stamped by that clock from then on, so they are looked at; the touches in
between are looked at again, which costs their narrow query and changes nothing.

Idempotent: the same spans give the same row and version, so several collectors running this at
once write the same rows (ClickHouse keeps one), with no leader and no lease.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from opentelemetry import context as otel_context

from latencylens_collector.analysis.row_work import RowBuild, TraceToBuild, build_rows
from latencylens_collector.storage import trace_state
from latencylens_collector.storage.store import Store
from latencylens_collector.storage.trace_state import TraceKey, Window

_log = logging.getLogger(__name__)

US_PER_S: Final = 1_000_000
PAGE_TRACES: Final = 1000
"""Traces read whole per query when their rows must be rewritten."""
MAX_LOOKBACK_S: Final = 2 * 24 * 3600
"""``traces_touched`` keeps two days (migration 0016)."""


@dataclass
class Pass:
    """What one :meth:`Reconciler.run_once` did."""

    checked: int = 0
    """Traces looked at."""
    rewritten: int = 0
    """Traces whose row was rewritten (missing, partial, or under two keys)."""


class Reconciler:
    """Recomputes the request rows of settled traces from the stored spans (see the module)."""

    def __init__(
        self,
        store: Store,
        settle_s: float,
        lookback_s: float,
        page: int = PAGE_TRACES,
        build: RowBuild = build_rows,
    ) -> None:
        self.store = store
        self.build = build
        """Builds the rows; in the service, the pipeline's worker process (:mod:`.row_processes`):
        a pass that rewrites long traces would otherwise hold the GIL for seconds."""
        self.settle_us = int(settle_s * US_PER_S)
        self.lookback_us = int(min(lookback_s, MAX_LOOKBACK_S) * US_PER_S)
        self.page = page
        self.done_until_us: int | None = None
        """Touches up to here (store clock) have been looked at; None until the first pass, which
        looks back ``lookback_s`` (a collector that was down finds the traces it left)."""

    def run_once(self) -> Pass:
        """Look at every trace that settled since the last pass, one minute of inserts at a time.
        Raises StorageError."""
        window = self._window(self.store.now_ns() // 1000 - self.settle_us)
        result = Pass()
        for minute_s in trace_state.touched_minutes(self.store, window):
            checked, rewritten = self._reconcile_minute(minute_s, window)
            result.checked += checked
            result.rewritten += rewritten
        self.done_until_us = window.until
        return result

    def _window(self, until_us: int) -> Window:
        """Inserts new since the last pass, and those a settle delay older for their second look:
        each trace is looked at exactly twice however often passes run (passes closer together
        than the settle delay would otherwise look at it once per pass in the delay)."""
        if self.done_until_us is None:
            return Window(until_us - self.lookback_us, until_us)
        done_us = min(self.done_until_us, until_us)
        again_after, again_until = done_us - self.settle_us, until_us - self.settle_us
        if again_until >= done_us:  # a pass later than the settle delay: the two windows meet
            return Window(again_after, until_us)
        return Window(done_us, until_us, again_after, again_until)

    def _reconcile_minute(self, minute_s: int, window: Window) -> tuple[int, int]:
        """(traces looked at, traces rewritten) among those inserted in one minute of the window.
        A trace with a span inserted after the window has not settled: a later pass takes it."""
        found = trace_state.touched_to_rewrite(self.store, minute_s, window)
        todo: dict[str, list[bytes]] = defaultdict(list)
        for project, trace_id in found.live_starts:
            todo[project].append(trace_id)
        for project, trace_ids in todo.items():
            for start in range(0, len(trace_ids), self.page):
                self._rewrite(project, trace_ids[start : start + self.page], found.live_starts)
        return found.checked, len(found.live_starts)

    def _rewrite(
        self, project: str, trace_ids: Sequence[bytes], live_starts: dict[TraceKey, list[int]]
    ) -> None:
        """Read these traces whole and write their settled rows, tombstoning every stored key."""
        traces = [
            TraceToBuild(
                stored.spans, stored.last_insert_us, live_starts.get((project, trace_id), []), settled=True
            )
            for trace_id, stored in trace_state.stored_traces(self.store, trace_ids, project).items()
        ]
        if traces:
            self.store.upsert_requests(self.build(traces).rows)


def reconcile_in_service(reconciler: Reconciler) -> None:
    """One pass from the service's scheduler: quiet while migrations are pending; a failure
    (storage down or busy) is only logged, and the next pass looks at the same window again."""
    if not reconciler.store.migrated:
        return
    # The collector's own ClickHouse calls must never be traced (and exported back to itself).
    token = otel_context.attach(otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        done = reconciler.run_once()
    except Exception as exc:
        _log.warning("reconciling request rows failed, retrying at the next interval: %s", exc)
        return
    finally:
        otel_context.detach(token)
    if done.rewritten:
        _log.info("reconciled %d of %d settled trace(s)", done.rewritten, done.checked)
