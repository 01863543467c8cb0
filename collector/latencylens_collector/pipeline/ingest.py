"""From stored spans to one attributed row per request: the fast path, right after each insert.

Every batch recomputes the rows of the traces it touched, so spans arriving late (children after
the root, a slow service's export) produce a newer row. Traces the batch holds whole (the common
case) are computed from the batch itself, without reading them back; others are read back and
joined with the batch's own spans (a read that misses this batch's insert still counts them).

A row's version is what its computation saw (:func:`~latencylens_collector.analysis.request_rows.row_version`:
distinct spans, then their latest insert stamp on the store's clock), so rows written by several
collectors in any order keep the most complete one. What this path cannot see (another collector's
insert not yet visible, a crash between the two writes, a root that never comes) the reconciler
(:mod:`latencylens_collector.pipeline.reconciler`) repairs once the trace has settled.

A trace past its span cap arriving in pieces is not read back for each piece: that would cost every
piece the trace so far (quadratic). On the Python path a piece is read back only while the trace had
at most ``max_trace_spans`` spans stored before it (from the store's count, so also after a restart
and from another collector), and never when its spans carry the mark ``latencylens.trace.too_large``:
what a piece reads is bounded by the cap plus the piece. The engine path, which marks no span, gets
at most that many spans of a trace from the store, and once it finds a trace past its cap reads it
no more (:meth:`Ingestor.read_back`). The row of a larger trace is the reconciler's, from all its
spans, once it has settled.

Those reads look only near the batch: at spans that start within a day of its own spans' starts
(:class:`~latencylens_collector.storage.trace_state.Near`), so they touch three days of ``spans``
however many days it keeps. A trace with spans further apart gets a row from what is near, and
the reconciler its full row once it has settled.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from latencylens_collector.analysis.records import SpanRow
from latencylens_collector.analysis.request_rows import attributable, settled_root_start
from latencylens_collector.analysis.row_work import (
    BuiltRows,
    ReadBack,
    ReadPart,
    RowBuild,
    TraceToBuild,
    build_rows,
)
from latencylens_collector.pipeline.refusals import classify
from latencylens_collector.storage import otlp_sql, trace_state
from latencylens_collector.storage.store import StorageError, Store

PAST_CAP_KEPT = 50_000
"""How many traces found past their cap an :class:`Ingestor` remembers (≈ 10 MB; each is a trace of
more than ``max_trace_spans`` spans)."""


@dataclass(frozen=True)
class RowsToWrite:
    """What an insert leaves to do: the traces whose rows must be (re)built, per project, from
    these spans (joined with what is stored when the trace is not whole in them)."""

    traces: dict[str, dict[bytes, list[SpanRow]]]
    spans: int
    """Spans the rows are built from: the work :meth:`Ingestor.write_rows` has to do."""

    def split(self, most_spans: int) -> tuple[RowsToWrite, RowsToWrite]:
        """(the projects whose rows are built from at most ``most_spans`` spans, the others): a
        light project's rows need not wait for a heavy one's in the same insert."""
        sizes = {project: sum(map(len, traces.values())) for project, traces in self.traces.items()}
        heavy = {project for project, size in sizes.items() if size > most_spans}

        def part(projects: Collection[str]) -> RowsToWrite:
            return RowsToWrite({p: self.traces[p] for p in projects}, sum(sizes[p] for p in projects))

        return part(sizes.keys() - heavy), part(heavy)


@dataclass(frozen=True)
class BodiesStored:
    """What an INSERT of export bodies did (:meth:`Ingestor.insert_bodies`): one verdict per body
    (None: it did not parse, or its verdict was not read, :func:`~.otlp_sql.read_verdicts`). The
    stored traces it touched, whose rows are left to build, are read back apart
    (:meth:`Ingestor.read_back`): a project's, by whoever builds its rows."""

    verdicts: list[otlp_sql.Verdict | None]


class Ingestor:
    """Stores span batches and recomputes the request rows of the traces they touch.

    Rewriting a batch is harmless: spans collapse by (project, trace_id, span_id) and each request
    row is recomputed from the stored spans of its trace, so a replayed batch yields the same row.
    """

    def __init__(self, store: Store, max_trace_spans: int | None = None) -> None:
        self.store = store
        self.max_trace_spans = max(
            1, store.settings.max_trace_spans if max_trace_spans is None else max_trace_spans
        )
        """Past this many spans stored, a trace's further pieces are not read back (see the module)."""
        self.spans_read_back = 0
        """Spans read back from storage so far: the work this path spends on traces in pieces."""
        self._past_cap: OrderedDict[tuple[str, bytes], None] = OrderedDict()
        """(project, trace id) of the traces a read-back found past their cap, oldest first, at most
        :data:`PAST_CAP_KEPT`: the engine path reads them back no more (:meth:`read_back`)."""
        self._past_cap_lock = threading.Lock()
        self._lock = threading.Lock()
        """One insert at a time per process (chdb is one engine; a server gains little from more).
        Rows are written outside it: their versions order them (:meth:`write_rows`)."""

    def ingest(
        self,
        spans: Sequence[SpanRow],
        dedup_token: str | None = None,
        context: Sequence[SpanRow] = (),
        rows_later: Collection[tuple[str, bytes]] = (),
    ) -> int:
        """Insert spans in one insert, then rewrite the request rows of their traces; returns how
        many request rows were (re)written. Raises StorageError.

        After the insert, one cheap query per project (key columns and stamps only) says which
        traces have nothing stored but this batch's spans, each once: their rows are built from the
        batch in memory. Only traces with other spans stored (late spans, replays) are read back, in one
        query. A large export written in pieces (:meth:`BoundedQueue._cut_piece
        <latencylens_collector.pipeline.queue.BoundedQueue._cut_piece>`) passes its earlier pieces'
        spans of the traces this batch ends as ``context`` (stored already, counted as the batch's
        own) and the ``(project, trace_id)`` of traces a later piece continues as ``rows_later``
        (no row now: that piece builds it, whole)."""
        return self.write_rows(self.insert(spans, dedup_token, context, rows_later))

    def insert(
        self,
        spans: Sequence[SpanRow],
        dedup_token: str | None = None,
        context: Sequence[SpanRow] = (),
        rows_later: Collection[tuple[str, bytes]] = (),
    ) -> RowsToWrite:
        """The first half of :meth:`ingest`: insert the spans; returns what :meth:`write_rows`
        builds the rows from (the spans are stored once this returns)."""
        by_project: dict[str, dict[bytes, list[SpanRow]]] = defaultdict(lambda: defaultdict(list))
        if not spans:
            return RowsToWrite(by_project, 0)
        with self._lock:
            self.store.ensure_ready()
            self.store.insert_spans(spans, dedup_token=dedup_token)
        for_rows = spans
        if context or rows_later:
            for_rows = [s for s in (*context, *spans) if (s.project, s.trace_id) not in rows_later]
        for span in for_rows:
            by_project[span.project][span.trace_id].append(span)
        return RowsToWrite(by_project, len(for_rows))

    def write_rows(self, todo: RowsToWrite, build: RowBuild = build_rows) -> int:
        """The second half of :meth:`ingest`: build (with ``build``) and write the request rows of
        the traces an insert touched; returns how many rows were (re)written. Rows of one trace
        written by two calls in any order keep the most complete (their versions), so a large
        insert's rows may be written while the next batch is inserted (:mod:`.row_builder`)."""
        traces: list[TraceToBuild] = []
        for project, batch_traces in todo.traces.items():
            traces.extend(self._traces_to_build(project, batch_traces))
        if not traces:
            return 0
        built = build(traces)
        self.store.upsert_requests(built.rows)
        return built.live

    def ingest_bodies(
        self, bodies: Sequence[tuple[str, bytes, otlp_sql.BodyLimits]], batch_id: str
    ) -> list[otlp_sql.Verdict | None]:
        """Insert OTLP/protobuf export bodies ``(project, body, limits)`` in one INSERT that
        ClickHouse decodes and flattens (:mod:`~latencylens_collector.storage.otlp_sql`), then
        rewrite the request rows of the traces it stored, read back from storage. Returns one
        verdict per body; a body with a span the engine did not store must take the Python path.
        The steps are :meth:`insert_bodies`, :meth:`read_back` and :meth:`write_built`."""
        stored = self.insert_bodies(bodies, batch_id)
        self.write_built(build_rows(self.read_back(stored)))
        return stored.verdicts

    def insert_bodies(
        self, bodies: Sequence[tuple[str, bytes, otlp_sql.BodyLimits]], batch_id: str
    ) -> BodiesStored:
        """The first step of :meth:`ingest_bodies`: the INSERT and its verdicts.

        A body with span events goes to the views that store them, any other to the views of
        spans without events (planning the events' SQL costs every INSERT ≈ 20 ms, so only bodies
        that need it pay it): one INSERT per set the batch needs. Telling them apart costs a probe
        (:func:`~.otlp_sql.has_span_events`, ≈ 0.12 µs a span). A body that does not parse fails
        its INSERT, which is split until it is alone (its verdict None). A refusal for now
        (:func:`~.refusals.classify`: unreachable, read-only, ...) is raised (StorageError) at
        once, as is a failure to make the landing tables and views."""
        if not bodies:
            return BodiesStored([])
        with self._lock:
            self.store.ensure_ready()
            # Here, not in the INSERT below: tables or views that cannot be made fail the batch
            # once (every body to the Python path), not each body of it as if it did not parse.
            self.store.ensure_otlp_views()
            with_events = [otlp_sql.has_span_events(body) for _, body, _ in bodies]
            verdicts: list[otlp_sql.Verdict | None] = [None] * len(bodies)
            for events, batch in ((False, batch_id), (True, f"{batch_id}-e")):
                chosen = [index for index, has in enumerate(with_events) if has is events]
                if chosen:
                    inserted = self._inserted([bodies[index] for index in chosen], batch, events)
                    for index, verdict in zip(chosen, inserted, strict=True):
                        verdicts[index] = verdict
            return BodiesStored(verdicts)

    def write_built(self, built: BuiltRows) -> None:
        """The last step of :meth:`ingest_bodies`: write the rows built from what
        :meth:`read_back` read (rows of one trace written in any order keep the most complete)."""
        self.spans_read_back += built.spans  # the engine path's spans are all read back
        if built.past_cap:
            with self._past_cap_lock:
                self._past_cap.update(dict.fromkeys(built.past_cap))
                while len(self._past_cap) > PAST_CAP_KEPT:
                    self._past_cap.popitem(last=False)
        self.store.upsert_requests(built.rows)

    def _inserted(
        self, bodies: Sequence[tuple[str, bytes, otlp_sql.BodyLimits]], batch_id: str, with_events: bool
    ) -> list[otlp_sql.Verdict | None]:
        """One INSERT's verdicts. A body that does not parse fails its whole INSERT: the batch is
        split in halves (each piece its own token) until the failing bodies are alone, and their
        verdict is None."""
        try:
            data = otlp_sql.framed(
                (body, otlp_sql.envelope(project, batch_id, seq, limits))
                for seq, (project, body, limits) in enumerate(bodies)
            )
            rows = self.store.insert_otlp_bodies(data, batch_id, with_events)
            return otlp_sql.read_verdicts(rows, len(bodies))
        except StorageError as exc:
            if classify(exc).transient:
                raise
            if len(bodies) == 1:
                return [None]
        half = len(bodies) // 2
        return [
            *self._inserted(bodies[:half], f"{batch_id}-a", with_events),
            *self._inserted(bodies[half:], f"{batch_id}-b", with_events),
        ]

    def read_back(self, stored: BodiesStored, projects: Collection[str] | None = None) -> ReadBack:
        """The traces the bodies' stored spans belong to (of ``projects`` only, when given), read
        back but not parsed: that is for where their rows are built (:class:`ReadBack`, anywhere:
        :class:`.row_processes.RowProcess`). One query a project.

        Of a trace past its cap the read gives only enough spans to tell (the parse leaves it out,
        :meth:`write_built` remembers it), and a trace remembered so is not read again: what the
        engine reads of such a trace is all its spans, so each collector reads it once (again
        after a restart, or once it is no longer among the last :data:`PAST_CAP_KEPT`)."""
        touched: dict[str, set[bytes]] = defaultdict(set)
        stored_spans: dict[str, int] = defaultdict(int)
        verdicts_of: dict[str, list[otlp_sql.Verdict]] = defaultdict(list)
        for verdict in stored.verdicts:
            if verdict is not None and (projects is None or verdict.project in projects):
                touched[verdict.project] |= verdict.trace_ids
                stored_spans[verdict.project] += verdict.spans
                verdicts_of[verdict.project].append(verdict)
        parts: list[ReadPart] = []
        for project, trace_ids in touched.items():
            if self._past_cap:
                with self._past_cap_lock:
                    trace_ids = {t for t in trace_ids if (project, t) not in self._past_cap}
            if not trace_ids:
                continue
            # The batch's spans are not in memory: its spans of the project, counted as if all
            # were the trace's, bound from below what the trace held before it (_was_past_cap).
            most_spans = self.max_trace_spans + stored_spans[project]
            near = _near_verdicts(verdicts_of[project])
            read = trace_state.stored_traces_unparsed(self.store, trace_ids, project, most_spans, near)
            parts.append(ReadPart(project, read, most_spans))
        return ReadBack(tuple(parts), sum(stored_spans.values()))

    def _traces_to_build(self, project: str, batch: dict[bytes, list[SpanRow]]) -> list[TraceToBuild]:
        """What the rows of each trace in ``batch`` are built from: the batch alone when it holds
        the trace whole (:func:`_whole`), else the trace read back and joined with the batch."""
        near = _near_spans(batch)
        stamps = trace_state.stamps(self.store, batch, project, near)
        traces: list[TraceToBuild] = []
        read_back: list[bytes] = []
        for trace_id, trace_spans in batch.items():
            stamp = stamps.get(trace_id)
            if stamp is not None and _whole(trace_spans, stamp):
                traces.append(TraceToBuild(sorted(trace_spans, key=_stored_order), stamp.last_insert_us))
            elif not attributable(trace_spans)[1] and not self._was_past_cap(stamp, len(trace_spans)):
                read_back.append(trace_id)
            # else: a piece of a trace past its span cap. Reading the whole trace back for every
            # piece would cost each piece the trace so far (quadratic); the reconciler writes its
            # row from all its spans once it has settled, reading it once.
        if read_back:
            traces.extend(self._read_back(project, read_back, batch, near))
        return traces

    def _read_back(
        self,
        project: str,
        trace_ids: Sequence[bytes],
        batch: dict[bytes, list[SpanRow]],
        near: trace_state.Near,
    ) -> list[TraceToBuild]:
        """Traces read back from storage (their spans ``near`` the batch's), joined with the batch's
        own spans of them."""
        traces: list[TraceToBuild] = []
        stored = trace_state.stored_traces(self.store, trace_ids, project, near)
        self.spans_read_back += sum(len(trace.spans) for trace in stored.values())
        for trace_id in trace_ids:
            found = stored.get(trace_id)
            own = batch.get(trace_id, [])
            if found is None and not own:
                continue
            spans, last_insert_us = _joined(own, found)
            # Bodies the engine stored are not in memory: it cannot tell the trace's earlier spans
            # from its new ones, so a row the reconciler keyed elsewhere is tombstoned by the
            # reconciler (as after another collector's insert), not here.
            earlier = _earlier_root(own, found) if own else []
            traces.append(TraceToBuild(spans, last_insert_us, earlier))
        return traces

    def _was_past_cap(self, stamp: trace_state.Stamp | None, batch_spans: int) -> bool:
        """Whether the trace had more than ``max_trace_spans`` spans stored before this batch, which
        brought at most ``batch_spans`` of those stored now."""
        return stamp is not None and stamp.spans - batch_spans > self.max_trace_spans


def _near_spans(batch: dict[bytes, list[SpanRow]]) -> trace_state.Near:
    """Where the batch's spans start, for the reads of their traces (:data:`~.trace_state.NEAR_NS`)."""
    starts = [span.start_ns for spans in batch.values() for span in spans]
    return trace_state.Near.of(min(starts), max(starts))


def _near_verdicts(verdicts: Sequence[otlp_sql.Verdict]) -> trace_state.Near | None:
    """Where the stored spans of these bodies start; None when a verdict does not say (written by
    an earlier collector's views): the read is then not bounded."""
    stored = [verdict for verdict in verdicts if verdict.trace_spans]
    if not stored or any(verdict.first_start_ns == 0 for verdict in stored):
        return None
    return trace_state.Near.of(min(v.first_start_ns for v in stored), max(v.last_start_ns for v in stored))


def _whole(spans: Sequence[SpanRow], stamp: trace_state.Stamp) -> bool:
    """Whether the stored spans of the trace are these, each once: as many rows as distinct ids as
    the batch has spans, spanning the same start times. Only another copy of the same spans can
    look so (a replay elsewhere), so a batch whose own insert is not visible yet is read back.
    The stamp counts the spans near the batch only: spans of the trace further away are the
    reconciler's to add."""
    starts = [span.start_ns for span in spans]
    return len({span.span_id for span in spans}) == len(spans) == stamp.stored == stamp.spans and (
        stamp.first_start_ns,
        stamp.last_start_ns,
    ) == (min(starts), max(starts))


def _earlier_root(batch: Sequence[SpanRow], stored: trace_state.StoredTrace | None) -> list[int]:
    """Where the row of the trace's earlier spans is keyed (a reconciler may have rooted it at a
    span whose parent this batch brings): the new row's tombstones cover it."""
    if stored is None:
        return []
    new = {span.span_id for span in batch}
    start = settled_root_start([span for span in stored.spans if span.span_id not in new])
    return [start] if start is not None else []


def _joined(batch: Sequence[SpanRow], stored: trace_state.StoredTrace | None) -> tuple[list[SpanRow], int]:
    """The stored spans plus any of the batch's the read did not return (a replica without this
    batch's insert yet), and the latest stamp the read saw. The version then counts the batch's
    spans but not their unseen stamp: it never claims more than was seen."""
    spans = {span.span_id: span for span in batch}
    last_insert_us = 0
    if stored is not None:
        spans.update((span.span_id, span) for span in stored.spans)
        last_insert_us = stored.last_insert_us
    return sorted(spans.values(), key=_stored_order), last_insert_us


def _stored_order(span: SpanRow) -> tuple[int, bytes]:
    """The order stored spans are read back in (start, then span id)."""
    return span.start_ns, span.span_id
