"""Several collectors over one real chdb store, as a cluster would show it to them.

:class:`SharedStore` is the store behind a network: each collector writes through a
:class:`CollectorStore` (a real :class:`Store` on the same engine) whose inserts can be held back
(acknowledged but not yet visible to anyone, its own reads included, like an async insert or a
lagging replica), or whose request-row write can fail after its span insert (the process died in
between). Each collector's own clock can be skewed or stepped back while it works: the process
clock (``time.time_ns``/``time.time``) is moved for the duration of its step, so any comparison
made on a collector's clock would show.

Traces are built with the real OpenTelemetry encoder and decoded by the collector's own OTLP
decoder; the expected row of a trace is :func:`build_request_row` over all its spans at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import SpanKind
from otlp_builders import MS, chat_trace, protobuf_body, span

from latencylens_collector.analysis.records import REQUEST_COLUMNS, SpanRow
from latencylens_collector.analysis.request_rows import build_request_row, row_version
from latencylens_collector.intake import otlp
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.pipeline.reconciler import Reconciler
from latencylens_collector.storage import rollup
from latencylens_collector.storage.store import Store

S = 1_000_000_000
COMPARED = [c for c in REQUEST_COLUMNS if c not in ("computed_at", "version")]
"""Everything a row says about its request (its version and stamp are checked separately)."""


class ProcessDied(Exception):
    """A collector stopped between storing spans and writing request rows."""


# --- the store as the collectors see it ---------------------------------------------------------
@dataclass
class Held:
    release_step: int
    kind: str
    write: Callable[[], None]


@dataclass
class SharedStore:
    """One real store; writes acknowledged at once may become visible only some steps later."""

    store: Store
    step: int = 0
    held: list[Held] = field(default_factory=list)

    def write(self, kind: str, write: Callable[[], None], delay_steps: int) -> None:
        if delay_steps <= 0:
            write()
        else:
            self.held.append(Held(self.step + delay_steps, kind, write))

    def advance(self) -> None:
        """The next step: every write due by then becomes visible, in write order."""
        self.step += 1
        self._release(lambda held: held.release_step <= self.step)

    def release(self, kind: str | None = None) -> None:
        """Make every held write (of ``kind``: "spans" or "rows") visible now."""
        self._release(lambda held: kind is None or held.kind == kind)

    def _release(self, due: Callable[[Held], bool]) -> None:
        now = [held for held in self.held if due(held)]
        self.held = [held for held in self.held if not due(held)]
        for held in now:
            held.write()


class CollectorStore(Store):
    """The shared store as one collector sees it: same engine, writes through :class:`SharedStore`."""

    def __init__(self, shared: SharedStore) -> None:
        super().__init__(shared.store.settings, client=shared.store.client)
        self._migrated = True
        self.shared = shared
        self.span_delay = 0
        """Steps before this collector's next span inserts become visible (to itself too)."""
        self.row_delay = 0
        """Steps before its request-row writes become visible."""
        self.die_before_rows = False

    def insert_spans(self, rows: Sequence[SpanRow], dedup_token: str | None = None) -> None:
        self.shared.write("spans", lambda: Store.insert_spans(self, rows, dedup_token), self.span_delay)

    def upsert_requests(self, rows: Sequence[dict[str, Any]]) -> None:
        if self.die_before_rows:
            raise ProcessDied("stopped after the span insert")
        self.shared.write("rows", lambda: Store.upsert_requests(self, rows), self.row_delay)


@contextlib.contextmanager
def process_clock(offset_ns: int) -> Iterator[None]:
    """The process clock moved by ``offset_ns`` while a collector works (skew or a step back)."""
    if offset_ns == 0:
        yield
        return
    real_ns, real_s = time.time_ns, time.time
    time.time_ns = lambda: real_ns() + offset_ns  # type: ignore[assignment]
    time.time = lambda: real_s() + offset_ns / S  # type: ignore[assignment]
    try:
        yield
    finally:
        time.time_ns, time.time = real_ns, real_s  # type: ignore[assignment]


@dataclass
class Collector:
    name: str
    store: CollectorStore
    ingestor: Ingestor
    reconciler: Reconciler
    clock_offset_ns: int = 0

    @classmethod
    def on(cls, shared: SharedStore, name: str, clock_offset_ns: int = 0) -> Collector:
        store = CollectorStore(shared)
        # Settle 0 here: the harness orders steps itself, and row writes are visible before the
        # next reconciler pass (the deployment guarantee "visible within the settle delay").
        return cls(
            name, store, Ingestor(store), Reconciler(store, settle_s=0, lookback_s=3600), clock_offset_ns
        )

    def ingest(self, spans: Sequence[SpanRow], token: str | None = None) -> bool:
        """Export a batch to this collector; False when it died before writing rows."""
        with process_clock(self.clock_offset_ns):
            try:
                self.ingestor.ingest(spans, dedup_token=token)
            except ProcessDied:
                return False
        return True

    def reconcile(self) -> int:
        with process_clock(self.clock_offset_ns):
            return self.reconciler.run_once().rewritten


# --- traces -------------------------------------------------------------------------------------
@dataclass
class Trace:
    shape: str
    spans: list[SpanRow]
    last: list[bytes] = field(default_factory=list)
    """Span ids that must arrive after all the others (vLLM's server span)."""

    @property
    def trace_id(self) -> bytes:
        return self.spans[0].trace_id


def decode(spans: Sequence[Any], project: str) -> list[SpanRow]:
    rows = otlp.decode(protobuf_body(list(spans)), as_json=False).spans
    return [_in_project(row, project) for row in rows]


def _in_project(row: SpanRow, project: str) -> SpanRow:
    return dataclasses.replace(row, project=project)


def chat(rng: random.Random, base_ns: int, project: str) -> Trace:
    """Root, retrieval, streamed model call, tool (otlp_builders.chat_trace)."""
    return Trace("chat", decode(chat_trace(base_ns, trace_id=rng.getrandbits(128) | 1), project))


def lost_root(rng: random.Random, base_ns: int, project: str) -> Trace:
    """The app's top span has a parent (an upstream gateway) that is never exported."""
    spans = chat_trace(base_ns, trace_id=rng.getrandbits(128) | 1)
    top = spans[0]
    gateway = rng.getrandbits(64) | 1
    orphan = span(
        top.name,
        top.context.trace_id,
        top.context.span_id,
        gateway,
        top.start_time or 0,
        top.end_time or 0,
        kind=SpanKind.SERVER,
    )
    return Trace("lost_root", decode([orphan, *spans[1:]], project))


def outer_root(rng: random.Random, base_ns: int, project: str) -> Trace:
    """A second, longer parentless span (a proxy that did not propagate context) arrives too: it
    becomes the root, so the row moves to its earlier start time."""
    spans = chat_trace(base_ns + 5 * MS, trace_id=rng.getrandbits(128) | 1)
    trace_id = spans[0].context.trace_id
    outer = span(
        "proxy", trace_id, rng.getrandbits(64) | 1, None, base_ns, base_ns + 1010 * MS, service="edge"
    )
    trace = Trace("outer_root", decode([*spans, outer], project))
    return trace


def vllm(rng: random.Random, base_ns: int, project: str) -> Trace:
    """App root → client model call → HTTP client span → vLLM's ``llm_request`` server span, with
    the attributes of tests/fixtures/vllm_with_client.otlp.json; the server span comes last."""
    trace_id = rng.getrandbits(128) | 1
    root, call, http, server = (rng.getrandbits(64) | 1 for _ in range(4))
    model = "meta-llama/Llama-3.1-8B-Instruct"

    def at(ms: float) -> int:
        return base_ns + round(ms * MS)

    spans = [
        span("POST /chat", trace_id, root, None, at(0), at(2000), service="chat-api", kind=SpanKind.SERVER),
        span(
            f"chat {model}",
            trace_id,
            call,
            root,
            at(300),
            at(1800),
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": model,
                "gen_ai.request.stream": True,
                "server.address": "vllm.internal",
            },
            service="chat-api",
            kind=SpanKind.CLIENT,
        ),
        span(
            "POST",
            trace_id,
            http,
            call,
            at(302),
            at(1798),
            {"http.request.method": "POST", "url.full": "http://vllm.internal:8000/v1/chat/completions"},
            service="chat-api",
            kind=SpanKind.CLIENT,
        ),
        span(
            "llm_request",
            trace_id,
            server,
            http,
            at(340),
            at(1674.5),
            {
                "gen_ai.request.id": "chatcmpl-abc123",
                "gen_ai.response.model": model,
                "gen_ai.usage.prompt_tokens": 42,
                "gen_ai.usage.completion_tokens": 128,
                "gen_ai.latency.time_in_queue": 0.0123,
                "gen_ai.latency.time_in_model_prefill": 0.0729,
                "gen_ai.latency.time_in_model_decode": 1.2405,
                "gen_ai.latency.time_in_model_inference": 1.3134,
                "gen_ai.latency.time_to_first_token": 0.0911,
                "gen_ai.latency.e2e": 1.3342,
            },
            service="vllm",
            kind=SpanKind.SERVER,
        ),
    ]
    rows = decode(spans, project)
    return Trace("vllm", rows, last=[rows[-1].span_id])


SHAPES: dict[str, Callable[[random.Random, int, str], Trace]] = {
    "chat": chat,
    "lost_root": lost_root,
    "outer_root": outer_root,
    "vllm": vllm,
}


def chunks(rng: random.Random, trace: Trace) -> list[list[SpanRow]]:
    """The trace's spans in 1–3 pieces, in arrival order (spans in ``trace.last`` in the last)."""
    late = [row for row in trace.spans if row.span_id in trace.last]
    early = [row for row in trace.spans if row.span_id not in trace.last]
    rng.shuffle(early)
    pieces = rng.randint(1, min(3, len(early)))
    cuts = sorted(rng.sample(range(1, len(early)), pieces - 1)) if pieces > 1 else []
    parts = [early[a:b] for a, b in zip([0, *cuts], [*cuts, len(early)], strict=True)]
    if late:
        parts.append(late)
    return parts


# --- what must hold once everything has settled -------------------------------------------------
def expected_row(trace: Trace) -> dict[str, Any]:
    row = build_request_row(trace.spans, settled=True)
    assert row is not None
    return row


def stored_rows(store: Store, project: str) -> dict[bytes, list[dict[str, Any]]]:
    """Every live row of the project (FINAL), by trace."""
    rows = store.query(
        f"SELECT {', '.join(COMPARED)}, toUnixTimestamp64Nano(start_time) AS start_ns, version, "
        f"toUnixTimestamp64Micro(computed_at) AS computed_us FROM {store.database}.requests FINAL "
        "WHERE project = {project:String}",
        {"project": project},
    )
    found: dict[bytes, list[dict[str, Any]]] = {}
    for row in rows:
        row["start_time"] = row.pop("start_ns")
        found.setdefault(bytes(row["trace_id"]), []).append(row)
    return found


def span_stamps(store: Store, project: str) -> dict[bytes, tuple[int, int]]:
    """(distinct spans, latest insert µs) per trace, as stored."""
    rows = store.query(
        "SELECT trace_id, uniqExact(span_id) AS n, toUnixTimestamp64Micro(max(inserted_at)) AS t "
        f"FROM {store.database}.spans WHERE project = {{project:String}} GROUP BY trace_id",
        {"project": project},
    )
    return {bytes(row["trace_id"]): (int(row["n"]), int(row["t"])) for row in rows}


def check_converged(store: Store, project: str, traces: Sequence[Trace]) -> None:
    """One live row per trace, equal to the row of all its spans, versioned by all of them."""
    stored = stored_rows(store, project)
    stamps = span_stamps(store, project)
    assert set(stored) == {trace.trace_id for trace in traces}
    for trace in traces:
        rows = stored[trace.trace_id]
        assert len(rows) == 1, (trace.shape, rows)
        [row] = rows
        want = expected_row(trace)
        assert {c: row[c] for c in COMPARED} == {c: want[c] for c in COMPARED}, trace.shape
        spans, last_us = stamps[trace.trace_id]
        assert (row["version"], row["computed_us"]) == (row_version(spans, last_us), last_us)


def check_rollup_equals_rows(store: Store, project: str) -> None:
    """Every touched hour has a build newer than its last insert and started from its current count
    of inserted rows, and that build's totals and merged percentile states equal the same
    aggregates over the rows."""
    params = {"project": project}
    db = store.database
    fresh = store.query(
        f"SELECT toUnixTimestamp(t.hour) AS hour_s, t.last < b.covers AND t.inserted = b.inserted AS fresh "
        f"FROM (SELECT hour, max(last_insert) AS last, sum(inserted_rows) AS inserted "
        f"      FROM {db}.requests_touched WHERE project = {{project:String}} GROUP BY hour) AS t "
        f"LEFT JOIN (SELECT hour, covers_until AS covers, inserted_rows AS inserted "
        f"      FROM {db}.requests_rollup_builds FINAL WHERE project = {{project:String}}) AS b "
        "ON t.hour = b.hour",
        params,
    )
    assert fresh and all(row["fresh"] for row in fresh), fresh
    measures = "count() AS n, sum(e2e_ns) AS e2e, sum(decode_ns) AS decode, sum(app_other_ns) AS app"
    from_rows = store.query(
        f"SELECT toUnixTimestamp(toStartOfHour(start_time)) AS hour_s, {measures}, "
        f"quantilesBFloat16({rollup.LEVELS})(e2e_ns) AS q FROM {db}.requests FINAL "
        "WHERE project = {project:String} GROUP BY hour_s ORDER BY hour_s",
        params,
    )
    from_rollup = store.query(
        "SELECT toUnixTimestamp(hour) AS hour_s, sum(requests) AS n, sum(sum_e2e) AS e2e, "
        f"sum(sum_decode) AS decode, sum(sum_app_other) AS app, "
        f"quantilesBFloat16Merge({rollup.LEVELS})(q_e2e) AS q FROM {db}.requests_rollup "
        "WHERE project = {project:String} AND kept = 0 AND (hour, build) IN "
        f"(SELECT hour, build FROM {db}.requests_rollup_builds FINAL WHERE project = {{project:String}}) "
        "GROUP BY hour_s HAVING n > 0 ORDER BY hour_s",
        params,
    )
    assert from_rollup == from_rows, rollup_report(store, project, from_rows, from_rollup)


def rollup_report(
    store: Store, project: str, from_rows: list[dict[str, Any]], from_rollup: list[dict[str, Any]]
) -> str:
    """What a failed rollup comparison needs to be told apart: a build older than an insert it
    missed (its id and ``covers_until`` against the hour's insert stamps and the store's clock now),
    or one read of ``requests FINAL`` disagreeing with another (each hour read again, as a build
    reads it, and each trace's newest version read without ``FINAL``), or the store's clock stepping
    back (a build recorded after another with a lower id)."""
    params = {"project": project}
    db = store.database
    builds = store.query(
        # In insert order (the part's first block): a build id lower than an earlier build's is
        # the store's clock stepping back.
        "SELECT toUnixTimestamp(hour) AS hour_s, build, toString(covers_until) AS covers, inserted_rows, "
        "requests, toUInt64(splitByChar('_', _part)[2]) AS block "
        f"FROM {db}.requests_rollup_builds WHERE project = {{project:String}} ORDER BY hour_s, block",
        params,
    )
    touched = store.query(
        "SELECT toUnixTimestamp(hour) AS hour_s, toString(last_insert) AS stamp, inserted_rows "
        f"FROM {db}.requests_touched WHERE project = {{project:String}} ORDER BY hour_s, stamp",
        params,
    )
    hours = sorted({int(row["hour_s"]) for row in [*from_rows, *from_rollup, *touched]})
    as_built = [
        store.query(
            f"SELECT {hour} AS hour_s, count() AS n, sum(e2e_ns) AS e2e FROM {db}.requests FINAL "
            "WHERE project = {project:String} AND start_time >= toDateTime({hour:UInt32}, 'UTC') "
            f"AND start_time < toDateTime({{hour:UInt32}} + {rollup.HOUR_S}, 'UTC')",
            {**params, "hour": hour},
        )
        for hour in hours
    ]
    newest = store.query(
        "SELECT toUnixTimestamp(toStartOfHour(start_time)) AS hour_s, count() AS n, sum(e2e_ns) AS e2e "
        f"FROM (SELECT * FROM {db}.requests WHERE project = {{project:String}} "
        "      ORDER BY version DESC, is_deleted LIMIT 1 BY trace_id) "
        "WHERE is_deleted = 0 GROUP BY hour_s ORDER BY hour_s",
        params,
    )
    now = store.query("SELECT toString(now64(6, 'UTC')) AS now")
    lines = [
        f"from rows:        {from_rows}",
        f"from rollup:      {from_rollup}",
        f"FINAL per hour:   {as_built}",
        f"newest, no FINAL: {newest}",
        f"builds:           {builds}",
        f"inserts touched:  {touched}",
        f"store clock now:  {now}",
    ]
    return "rollup differs from the rows\n" + "\n".join(lines)
