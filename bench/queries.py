"""Query latency at scale: 1 M requests (10 M spans) and 5 M (50 M spans) in the embedded ClickHouse.

Rows are generated inside ClickHouse (``INSERT … SELECT FROM numbers()``) over the 24 h before
now, one database per size in a separate chdb directory (``.latencylens/bench``). 2 % of the
requests are written twice, as a late span would cause, so ``FINAL`` has work to do. Each query
runs through the same functions the API calls, after the hourly rollup is built as the service
builds it (stats and compare then merge rolled-up whole hours with request rows at both ends of the
window; each is also timed reading rows only), while the service's background work runs beside it
as in a collector under traffic: a body of new traces ingested every second, the reconciler's pass
every 5 s and the rollup's refresh every 60 s (:class:`_LiveService`). We report each query's p50
over repeated runs (wall time, and the process's CPU time, which other work on a shared machine
disturbs much less), its ratio to a baseline scan measured in the same run on the same data
(``SELECT sum(e2e_ns)`` over the project: one column, every row), and how its p50 grows from 1 M
to 5 M requests (target: at most 2×).

Set ``LATENCYLENS_BENCH_REUSE=1`` to keep already loaded data, ``LATENCYLENS_BENCH_REQUESTS`` to
load one smaller size for a quick check, ``LATENCYLENS_BENCH_QUERY_SIZES`` (comma-separated
request counts) for other sizes.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

from bench import _payloads
from latencylens_collector import queries
from latencylens_collector.analysis.request_rows import STAMP_BITS, STAMP_EPOCH_MS
from latencylens_collector.intake import otlp
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.pipeline.reconciler import Reconciler
from latencylens_collector.queries.responses import CompareResponse
from latencylens_collector.runtime.scheduler import Scheduler
from latencylens_collector.settings import Settings, chdb_dsn
from latencylens_collector.storage import rollup
from latencylens_collector.storage.store import Store

SIZES = tuple(
    int(size)
    for size in os.environ.get(
        "LATENCYLENS_BENCH_QUERY_SIZES", os.environ.get("LATENCYLENS_BENCH_REQUESTS", "1000000,5000000")
    ).split(",")
)
"""Request counts to load, one database each (a single small one makes a quick smoke run)."""
GROWTH_TARGET = 2.0
"""Each query's p50 at the largest size, at most this many times its p50 at the smallest."""
SPANS_PER_REQUEST = 10
RUNS = 15
PROJECT = "default"
DAY_NS = 86_400 * 1_000_000_000
BENCH_DIR = Path(__file__).resolve().parents[1] / ".latencylens" / "bench"

_SERVICES = "['chat-api', 'search-api', 'agent']"
_ROUTES = "['POST /chat', 'POST /search', 'POST /agent', 'GET /summary', 'POST /rerank', 'POST /tools']"
_MODELS = (
    "['llama-3.3-70b-versatile', 'openai/gpt-oss-20b', 'gpt-4o-mini', 'gpt-4.1', 'qwen3-32b', 'kimi-k2']"
)
_PROVIDERS = "['groq', 'groq', 'openai', 'openai', 'groq', 'groq']"

# One request per number n: dimensions from a hash of n; components in ns; e2e is their sum.
# In the second half of the day groq's queue grows by up to 150 ms, so compare has a story.
REQUESTS_SQL = f"""
INSERT INTO {{db}}.requests (project, trace_id, start_time, e2e_ns, service, name, model, provider,
  status_error, retrieval_ns, tool_ns, app_other_ns, network_ns, queue_ns, prefill_ns, decode_ns,
  model_unattributed_ns, busy_retrieval_ns, busy_tool_ns, busy_app_other_ns, busy_network_ns,
  busy_queue_ns, busy_prefill_ns, busy_decode_ns, busy_model_unattributed_ns, provenance,
  inconsistent, input_tokens, output_tokens, cache_read_input_tokens, tokens_estimated, ttft_ns,
  itl_ns, decode_tokens_per_second, model_calls, span_count, computed_at, version)
SELECT {{project:String}}, sipHash128(n),
  fromUnixTimestamp64Nano(toInt64({{end:Int64}} - intDiv(n * 86400000000, {{n:UInt64}}) * 1000), 'UTC') AS st,
  retrieval + tool + app_other + network + queue + prefill + decode + unattributed AS e2e,
  {_SERVICES}[1 + h % 3], {_ROUTES}[1 + intDiv(h, 3) % 6],
  {_MODELS}[1 + intDiv(h, 18) % 6] AS model, {_PROVIDERS}[1 + intDiv(h, 18) % 6] AS provider,
  toUInt8(h % 97 = 0),
  toInt64(cityHash64(n, 1) % 200000000) AS retrieval,
  toInt64(cityHash64(n, 2) % 300000000) AS tool,
  toInt64(5000000 + cityHash64(n, 3) % 20000000) AS app_other,
  toInt64(10000000 + cityHash64(n, 4) % 40000000) AS network,
  toInt64(cityHash64(n, 5) % 100000000
          + if(provider = 'groq' AND n < intDiv({{n:UInt64}}, 2), cityHash64(n, 12) % 150000000, 0)) AS queue,
  toInt64(5000000 + cityHash64(n, 6) % 50000000) AS prefill,
  toInt64(100000000 + cityHash64(n, 7) % 1500000000 + {{extra:Int64}}) AS decode,
  toInt64(cityHash64(n, 8) % 5000000) AS unattributed,
  retrieval, tool + toInt64(cityHash64(n, 13) % 100000000), app_other, network, queue, prefill, decode,
  unattributed,
  map('retrieval', 'measured', 'tool', 'measured', 'app_other', 'measured', 'network', 'derived',
      'queue', 'reported', 'prefill', 'reported', 'decode', 'reported', 'model_unattributed', 'derived'),
  0,
  toInt64(200 + cityHash64(n, 9) % 3800) AS input_tokens,
  toInt64(50 + cityHash64(n, 10) % 750) AS output_tokens,
  toInt64(intDiv(input_tokens * (cityHash64(n, 11) % 60), 100)), 0,
  network + queue + prefill,
  toInt64(intDiv(decode, output_tokens - 1)),
  output_tokens / (decode / 1e9),
  1, {SPANS_PER_REQUEST}, now64(6) + {{later_s:UInt32}},
  -- as row_version(): span count in the high bits, the insert stamp (ms since 2020) below
  bitOr(bitShiftLeft(toUInt64({SPANS_PER_REQUEST}), {STAMP_BITS}),
        toUInt64(toUnixTimestamp64Milli(now64(3)) + {{later_s:UInt32}} * 1000 - {STAMP_EPOCH_MS}))
FROM (SELECT number AS n, cityHash64(number) AS h FROM numbers({{n:UInt64}}) WHERE n % {{every:UInt32}} = 0)
"""

# Ten spans per request: the root, then nine children one after another across its window; the
# fifth is the model call with reported timing.
SPANS_SQL = """
INSERT INTO {db}.spans (project, trace_id, span_id, parent_span_id, service, name, span_kind, kind,
                        start_time, duration_ns, status_code, status_message, attributes, resource_attributes)
SELECT {project:String}, r.trace_id,
  toFixedString(substring(sipHash128(r.trace_id, k), 1, 8), 8),
  if(k = 0, toFixedString(repeat('\\0', 8), 8), toFixedString(substring(sipHash128(r.trace_id, 0), 1, 8), 8)),
  r.service, if(k = 0, r.name, ['', 'retrieve', 'tool a', 'tool b', 'chat', 'rerank', 'parse', 'format',
                                'cache', 'log'][k + 1]),
  if(k = 0, 'server', if(k = 4, 'client', 'internal')),
  ['request', 'retrieval', 'tool', 'tool', 'model', 'other', 'other', 'other', 'other', 'other'][k + 1],
  fromUnixTimestamp64Nano(
    toUnixTimestamp64Nano(r.start_time) + if(k = 0, 0, intDiv(r.e2e_ns * (k - 1), 9)), 'UTC'),
  if(k = 0, r.e2e_ns, intDiv(r.e2e_ns, 9)), 0, '',
  if(k = 4, map('gen_ai.operation.name', 'chat', 'gen_ai.provider.name', r.provider,
                'gen_ai.request.model', r.model, 'latencylens.provider.queue_ns', toString(r.queue_ns)),
         map('latencylens.bench', '1')),
  map('service.name', r.service)
FROM {db}.requests AS r FINAL
ARRAY JOIN range(10) AS k
WHERE r.project = {project:String}
"""


def store(requests: int) -> Store:
    database = "bench" if requests == 1_000_000 else f"bench_{requests}"
    settings = Settings(clickhouse_dsn=chdb_dsn(BENCH_DIR), database=database, environ={})
    return Store(settings)


def label(requests: int) -> str:
    return f"{requests // 1_000_000} M" if requests % 1_000_000 == 0 else f"{requests:,}"


def load(db: Store, requests: int, report: Any) -> None:
    loaded = db.query(
        f"SELECT count() AS n FROM {db.database}.requests FINAL WHERE project = {{p:String}}", {"p": PROJECT}
    )[0]["n"]
    if os.environ.get("LATENCYLENS_BENCH_REUSE") == "1" and loaded == requests:
        report.note(f"reusing {loaded:,} loaded requests")
        return
    db.command(f"DROP DATABASE IF EXISTS {db.database} SYNC")
    db.migrate()
    end = time.time_ns()
    began = time.perf_counter()
    base = {"project": PROJECT, "end": end, "n": requests}
    sql = REQUESTS_SQL.replace("{db}", db.database)
    db.command(sql, {**base, "every": 1, "extra": 0, "later_s": 0})
    # 2 % recomputed later with 5 ms more decode: the newer row must win.
    db.command(sql, {**base, "every": 50, "extra": 5_000_000, "later_s": 1})
    name = f"{label(requests)}: load requests"
    report.add(name, time.perf_counter() - began, "s", f"{requests:,} + 2 % rewritten")
    began = time.perf_counter()
    db.command(SPANS_SQL.replace("{db}", db.database), {"project": PROJECT})
    spans = db.query(f"SELECT count() AS n FROM {db.database}.spans")[0]["n"]
    report.add(f"{label(requests)}: load spans", time.perf_counter() - began, "s", f"{spans:,} spans")


def p50_ms(fn: Callable[[], object], runs: int = RUNS) -> tuple[float, float]:
    """p50 wall time and p50 CPU time of this process (all its threads, chdb's included), in ms.

    On a shared machine the wall time depends on what else runs; the CPU time much less so."""
    fn()  # warm the caches once, as a serving process would be
    walls, cpus = [], []
    for _ in range(runs):
        began, began_cpu = time.perf_counter(), _cpu_s()
        fn()
        walls.append(time.perf_counter() - began)
        cpus.append(_cpu_s() - began_cpu)
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


TARGET_MS = 150.0


def _target(name: str, p50_ms: float, requests: int) -> str:
    """The absolute target holds at 1 M requests; larger sizes are held to their growth from it."""
    if "rows only" in name or requests != 1_000_000:
        return ""
    return f"; target < {TARGET_MS:.0f} ms: {'met' if p50_ms < TARGET_MS else 'NOT met'}"


class _LiveService:
    """The service's background work beside the queries, as in a collector under light traffic:
    a body of new traces (100 traces, 500 spans) ingested every second for another project (so the
    queried data stays exactly the generated set, whatever the size), the reconciler's pass every
    5 s and the rollup's refresh every 60 s, at the service's default settings. The reconciler
    starts caught up (the generated rows carry made-up versions, so it must not rewrite the load):
    it looks at the traces ingested from now on, each twice, as in the service; :meth:`__enter__`
    returns once its passes check traces."""

    INGEST_EVERY_S: Final = 1.0
    PROJECT: Final = "live"
    WARM_UP_LIMIT_S: Final = 90.0

    def __init__(self, db: Store) -> None:
        defaults = Settings(environ={})
        self.ingestor = Ingestor(db)
        self.templates = _payloads.templates(4)
        self.ingested = 0
        self.reconciler = Reconciler(db, defaults.reconcile_settle_s, defaults.reconcile_lookback_s)
        self.reconciler.done_until_us = db.now_ns() // 1000 + self.reconciler.settle_us
        self.checked = 0
        self.schedulers = [
            Scheduler(self._ingest, self.INGEST_EVERY_S, name="bench-ingest"),
            Scheduler(self._reconcile, defaults.reconcile_interval_s, name="bench-reconciler"),
            Scheduler(
                lambda: rollup.refresh_in_service(db, defaults.rollup_settle_s),
                defaults.rollup_interval_s,
                name="bench-rollup",
            ),
        ]

    def _ingest(self) -> None:
        body = _payloads.stamp(self.templates[self.ingested % len(self.templates)])
        self.ingestor.ingest(otlp.decode(body, as_json=False, project=self.PROJECT).spans)
        self.ingested += 1

    def _reconcile(self) -> None:
        self.checked += self.reconciler.run_once().checked

    def __enter__(self) -> _LiveService:
        for scheduler in self.schedulers:
            scheduler.start()
        deadline = time.monotonic() + self.WARM_UP_LIMIT_S
        while self.checked == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
        return self

    def __exit__(self, *_: object) -> None:
        for scheduler in self.schedulers:
            scheduler.stop()


def run(report: Any) -> None:
    p50s: dict[int, dict[str, float]] = {}
    for requests in SIZES:
        p50s[requests] = run_size(requests, report)
    smallest, largest = min(SIZES), max(SIZES)
    if smallest == largest:
        return
    for name, small_ms in p50s[smallest].items():
        growth = p50s[largest][name] / small_ms
        verdict = "met" if growth <= GROWTH_TARGET else "NOT met"
        target = "" if "rows only" in name else f"; target ≤ {GROWTH_TARGET:.0f}×: {verdict}"
        report.add(
            f"{label(largest)} against {label(smallest)}: {name}",
            growth,
            "× p50",
            f"{small_ms:.0f} → {p50s[largest][name]:.0f} ms{target}",
            ratio=growth,
        )


def run_size(requests: int, report: Any) -> dict[str, float]:
    """Load (or reuse) ``requests`` requests and time every query on them; returns p50s in ms."""
    size = label(requests)
    db = store(requests)
    db.migrate()
    load(db, requests, report)
    began = time.perf_counter()
    built = rollup.refresh(db, settle_s=0)
    report.add(
        f"{size}: rollup refresh",
        time.perf_counter() - began,
        "s",
        f"{len(built)} hours rolled up (the service does it in the background, hours quiet for 30 s)",
    )
    now = datetime.now(timezone.utc)
    parts = db.query(f"SELECT count() AS n FROM system.parts WHERE database = '{db.database}' AND active")
    report.note(f"active parts: {parts[0]['n']}")
    with _LiveService(db) as live:
        p50s = _time_queries(db, requests, now, report)
    report.note(
        f"beside the queries: {live.ingested} bodies ingested ({live.ingested * _payloads.SPANS_PER_BODY:,} "
        "spans), "
        f"{live.checked:,} traces checked by the reconciler"
    )
    db.close()
    return p50s


def _time_queries(db: Store, requests: int, now: datetime, report: Any) -> dict[str, float]:
    size = label(requests)
    baseline, baseline_cpu = p50_ms(
        lambda: db.query(
            f"SELECT sum(e2e_ns) FROM {db.database}.requests WHERE project = {{p:String}}", {"p": PROJECT}
        )
    )
    report.add(f"{size}: baseline: sum(e2e_ns) scan", baseline, "ms p50", f"CPU {baseline_cpu:.1f} ms p50")
    slowest = queries.list_requests(db, PROJECT, now=now, limit=50)
    trace = slowest.requests[0].trace_id
    half = int(now.timestamp()) - 43_200
    day_ago = int(now.timestamp()) - 86_400

    def compare_halves(rollup: queries.RollupUse = "auto") -> CompareResponse:
        return queries.compare(
            db,
            PROJECT,
            now=now,
            a_since=str(day_ago),
            a_until=str(half),
            b_since=str(half),
            by=["provider", "model"],
            rollup=rollup,
        )

    cases: dict[str, Callable[[], object]] = {
        "slow list (24 h, 50 rows)": lambda: queries.list_requests(db, PROJECT, now=now, limit=50),
        "slow list, page 2 by cursor": lambda: queries.list_requests(
            db, PROJECT, now=now, limit=50, cursor=slowest.next_cursor
        ),
        "slow list, model filter": lambda: queries.list_requests(
            db, PROJECT, now=now, limit=50, filters=queries.Filters(model="gpt-4o-mini")
        ),
        "stats by model (24 h)": lambda: queries.stats(db, PROJECT, now=now, by=["model"]),
        "stats by model, rows only (no rollup)": lambda: queries.stats(
            db, PROJECT, now=now, by=["model"], rollup="never"
        ),
        "stats by provider, 1 h buckets": lambda: queries.stats(
            db, PROJECT, now=now, by=["provider"], bucket="1h"
        ),
        "explain one request": lambda: queries.request_detail(db, PROJECT, trace),
        "compare 12 h vs 12 h by provider,model": compare_halves,
        "compare …, rows only (no rollup)": lambda: compare_halves("never"),
    }
    p50s = {}
    for name, fn in cases.items():
        value, cpu = p50_ms(fn)
        p50s[name] = value
        report.add(
            f"{size}: {name}",
            value,
            "ms p50",
            f"CPU {cpu:.0f} ms p50; ratio: against the baseline scan{_target(name, value, requests)}",
            ratio=value / baseline,
        )
    result = compare_halves()
    report.note(f"compare says: {result.summary}")
    return p50s
