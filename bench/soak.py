"""Soak under a hostile mix: does normal traffic keep its latency and throughput, and is anything
acknowledged lost, while other senders try to knock the collector over?

Each phase runs on a fresh ``latencylens serve`` (subprocess, embedded ClickHouse, spool on, API
keys on: normal traffic in project ``normal``, the hostile mix in project ``hostile``, as two
tenants of one collector) for :data:`SECONDS`:

0. **probe** (on the clean phase's collector, before it): :data:`PROBE_SENDERS` senders post
   back to back for :data:`PROBE_S`; what it serves is the collector's capacity on this machine
   now. *Normal traffic* is then :data:`LOAD_FRACTION` of it (at most :data:`MAX_OFFERED`
   spans/s), sent by :data:`NORMAL_SENDERS` senders at a fixed period: a load the collector
   serves comfortably, not a saturating one, so the two phases compare like with like.
1. **clean**: normal traffic alone (realistic 500-span OTLP/protobuf bodies, :mod:`bench._payloads`).
2. **hostile**: the same normal traffic beside
   - *huge attributes*: gzip bodies of one span with 250 attributes of 60 KB (14 MiB inflated, the
     issue's bomb: refused at ``max_body_bytes``) alternating with 100 such attributes (6 MiB:
     taken, the span cut to ``max_span_bytes``);
   - *deep chains*: an 8,000-span chain, every span carrying ``gen_ai.latency.e2e`` (the issue's
     720 KB export that held the writer for 20 s);
   - *slow clients*: :data:`SLOW_CLIENTS` connections that send nothing, trickle their headers a
     byte at a time, or send headers and trickle the body, each reopened when the server closes it;
   - *10× bursts*: every :data:`BURST_EVERY_S`, for :data:`BURST_S`, ten times the normal senders.

The load generator shares the machine with the collector, so it does no per-request encoding:
every body of every phase (each with its own trace ids, so stored spans can be counted) is built,
and the gzip ones compressed, before the phases start; a sender only posts bytes. Its CPU and the
collector's are both reported, with the load average during each phase.

Reported: normal traffic's offered and served spans/s and p50/p99 export latency in each phase
and their ratios (hostile / clean; target p99 ≤ 2× and spans/s ≥ ½), the collector's peak RSS
against :data:`RSS_BOUND_MIB`, the slowest ``/healthz`` while hostile, and, per kind of sender, the
spans acknowledged (200, minus any ``partial_success`` rejections) against the distinct spans
stored in ClickHouse plus those kept in the spool (counted after the collector stopped): target 0
lost.

``LATENCYLENS_BENCH_SOAK_SECONDS`` sets each phase's length (default 90 s: about 5 minutes in all).
It runs only when named (``python -m bench soak``), not in ``make bench``.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import os
import resource
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from bench import _collector, _payloads
from latencylens_collector.auth import KeyStore

SECONDS = float(os.environ.get("LATENCYLENS_BENCH_SOAK_SECONDS") or 90.0)
WARMUP_S = 4.0
PROBE_S = 8.0
PROBE_SENDERS = 4
LOAD_FRACTION = 0.25
"""Normal traffic offers this share of what the probe served: comfortably within capacity."""
MAX_OFFERED = 4_000
"""Normal traffic never offers more spans/s than this (on a fast machine a quarter of capacity
would be more than "normal")."""
NORMAL_SENDERS = 4
BURST_EVERY_S = 20.0
BURST_S = 3.0
BURST_SENDERS = 10 * NORMAL_SENDERS
SLOW_CLIENTS = 150
CHAIN_SPANS = 8_000
CHAIN_BODIES = 60
HUGE_BODIES = 80
HUGE_VALUE_BYTES = 60_000
RSS_BOUND_MIB = 1536
"""Stated bound on the collector's peak RSS under the hostile mix: the queue's 256 MiB, a 32 MiB
batch in flight and its Arrow copy, chdb's own ≈ 600 MiB under load, and room for bodies being read."""
P99_RATIO_TARGET = 2.0
DIRECTORY = _collector.ROOT / ".latencylens" / "bench-soak"
MIB = 1024 * 1024

# First byte of each kind's trace ids: how stored spans are counted per kind.
PROBE, NORMAL, BURST, CHAIN, HUGE = 0xA0, 0xA1, 0xB4, 0xB2, 0xB3
_KINDS = {
    PROBE: "probe",
    NORMAL: "normal",
    BURST: "burst (10×)",
    CHAIN: "deep chain",
    HUGE: "huge attributes",
}
PROTOBUF = {"content-type": "application/x-protobuf"}
GZIP_PROTOBUF = {**PROTOBUF, "content-encoding": "gzip"}

Body = tuple[bytes, int, dict[str, str]]
"""A ready export: its bytes, its spans, its headers."""


def _trace_id(kind: int, number: int) -> bytes:
    return struct.pack(">QQ", (kind << 56) | number, 1)


@dataclass
class Tally:
    """What one kind of sender sent and had acknowledged."""

    statuses: Counter[int] = field(default_factory=Counter)
    """Answers by status (0: the connection failed)."""
    acknowledged: int = 0
    latencies: list[float] = field(default_factory=list)
    measuring: bool = False
    exhausted: bool = False
    """Its pre-built bodies ran out (the pool was too small for the phase)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, status: int, spans: int, rejected: int, elapsed: float) -> None:
        with self.lock:
            self.statuses[status] += 1
            if status == 200:
                self.acknowledged += spans - rejected
                if self.measuring:
                    self.latencies.append(elapsed)


def _rejected(response: httpx.Response) -> int:
    if response.status_code != 200 or not response.content:
        return 0
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(response.content)
    return int(answer.partial_success.rejected_spans)


class Pool:
    """Bodies built before a phase, handed out once each (a refused one goes back for a retry)."""

    def __init__(self, bodies: list[Body]) -> None:
        self._bodies = deque(bodies)

    def take(self) -> Body | None:
        try:
            return self._bodies.popleft()
        except IndexError:
            return None

    def give_back(self, body: Body) -> None:
        self._bodies.appendleft(body)


class Sender(threading.Thread):
    """Posts bodies from ``pool`` with ``key``, one every ``period_s`` (at once when the last took
    longer) while ``active()``; counts answers in ``tally``."""

    def __init__(
        self,
        url: str,
        key: str,
        pool: Pool,
        period_s: float,
        tally: Tally,
        active: Callable[[], bool],
        stop: threading.Event,
    ) -> None:
        super().__init__(daemon=True)
        self.url, self.pool, self.period_s, self.tally = url + "/v1/traces", pool, period_s, tally
        self.active, self.stop = active, stop
        self.auth = {"authorization": f"Bearer {key}"}

    def run(self) -> None:
        with httpx.Client(timeout=120.0) as client:
            next_at = time.perf_counter()
            while not self.stop.is_set():
                if not self.active():
                    self.stop.wait(0.05)
                    next_at = time.perf_counter()
                    continue
                ready = self.pool.take()
                if ready is None:
                    self.tally.exhausted = True
                    return
                body, spans, headers = ready
                began = time.perf_counter()
                try:
                    response = client.post(self.url, content=body, headers={**headers, **self.auth})
                    status, rejected = response.status_code, _rejected(response)
                except httpx.HTTPError:
                    status, rejected = 0, 0
                elapsed = time.perf_counter() - began
                self.tally.record(status, spans, rejected, elapsed)
                if status in (0, 429, 503):
                    self.pool.give_back(ready)  # not acknowledged: the same spans are sent again
                # A fixed schedule (open loop); when an answer took longer, the next goes at once.
                next_at = max(next_at + self.period_s, time.perf_counter())
                if status == 429:
                    next_at = max(next_at, time.perf_counter() + 0.1)
                self.stop.wait(max(0.0, next_at - time.perf_counter()))


@functools.cache
def _templates() -> list[bytes]:
    return _payloads.templates(8)


def normal_pool(kind: int, count: int, first: int = 1) -> list[Body]:
    """``count`` 500-span bodies with trace ids of ``kind``, numbered from ``first``."""
    templates = _templates()
    return [
        (
            templates[i % len(templates)].replace(_payloads.MARKER, _trace_id(kind, first + i)[:8]),
            _payloads.SPANS_PER_BODY,
            PROTOBUF,
        )
        for i in range(count)
    ]


def chain_pool(count: int) -> list[Body]:
    """8,000-span chains, each span carrying vLLM's ``gen_ai.latency.e2e``."""
    marker = struct.pack(">QQ", 0xFEEDFACE_CAFEBEEF, 0xFEEDFACE_CAFEBEEF)
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add()
    scope.resource.attributes.append(_payloads._kv("service.name", "vllm"))
    spans = scope.scope_spans.add()
    start = time.time_ns() - 600 * 1_000_000_000
    for level in range(CHAIN_SPANS):
        span = Span(
            trace_id=marker,
            span_id=struct.pack(">Q", level + 1),
            parent_span_id=struct.pack(">Q", level) if level else b"",
            name="llm_request",
            kind=Span.SPAN_KIND_SERVER,
            start_time_unix_nano=start + level * 1_000,
            end_time_unix_nano=start + 10_000_000_000 - level * 1_000,
        )
        span.attributes.append(_payloads._kv("gen_ai.latency.e2e", 9.5))
        spans.spans.append(span)
    template = request.SerializeToString()
    return [(template.replace(marker, _trace_id(CHAIN, i + 1)), CHAIN_SPANS, PROTOBUF) for i in range(count)]


def huge_pool(count: int) -> list[Body]:
    """Gzip bodies of one span of 250 (refused: 14 MiB inflated) or 100 (taken: 6 MiB) attributes
    of 60 KB, alternately."""
    marker = struct.pack(">QQ", 0xFEEDFACE_CAFEBEEF, 0xFEEDFACE_CAFEBEEF)
    start = time.time_ns() - 600 * 1_000_000_000
    raw: dict[int, bytes] = {}
    for attributes in (250, 100):
        request = ExportTraceServiceRequest()
        scope = request.resource_spans.add()
        scope.resource.attributes.append(_payloads._kv("service.name", "bloat"))
        span = scope.scope_spans.add().spans.add()
        span.trace_id, span.span_id, span.name = marker, struct.pack(">Q", 1), "bloat"
        span.start_time_unix_nano, span.end_time_unix_nano = start, start + 1_000_000
        span.attributes.extend(_payloads._kv(f"a{i}", "x" * HUGE_VALUE_BYTES) for i in range(attributes))
        raw[attributes] = request.SerializeToString()
    return [
        (
            gzip.compress(raw[250 if i % 2 == 0 else 100].replace(marker, _trace_id(HUGE, i + 1)), 1),
            1,
            GZIP_PROTOBUF,
        )
        for i in range(count)
    ]


class SlowClients(threading.Thread):
    """``count`` connections that never finish a request: a third send nothing, a third trickle
    their headers, a third send headers and trickle the body; each is reopened once closed."""

    def __init__(self, url: str, count: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.address, self.count, self.stop = (host, int(port)), count, stop
        self.closed_by_server = 0

    def _open(self, index: int) -> socket.socket | None:
        try:
            connection = socket.create_connection(self.address, timeout=5)
        except OSError:
            return None
        connection.setblocking(False)
        head = b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
        with_body = head + b"Content-Length: 100000\r\n\r\n"
        first = {0: b"", 1: head, 2: with_body}[index % 3]
        try:
            connection.send(first)
        except OSError:
            pass
        return connection

    def run(self) -> None:
        connections: dict[int, socket.socket | None] = {i: self._open(i) for i in range(self.count)}
        while not self.stop.wait(1.0):
            for index, connection in list(connections.items()):
                if connection is None:
                    connections[index] = self._open(index)
                    continue
                try:
                    if connection.recv(65536) == b"":
                        raise ConnectionResetError
                except BlockingIOError:
                    try:
                        if index % 3:
                            connection.send(b"X" if index % 3 == 1 else b"\x00")
                    except OSError:
                        pass
                    continue
                except OSError:
                    pass
                self.closed_by_server += 1
                connection.close()
                connections[index] = self._open(index)
        for connection in connections.values():
            if connection is not None:
                connection.close()


@dataclass
class Phase:
    name: str
    tallies: dict[int, Tally]
    seconds: float
    peak_rss_mib: float
    healthz_max_ms: float
    spooled_spans: int
    stored: dict[int, int]
    slow_closed: int
    normal_window_spans: int
    load_average: float
    """Mean 1-minute load average of the machine over the window."""
    generator_cpu_s: float
    collector_cpu_s: float
    gc_pauses: tuple[int, int, float] = (0, 0, 0.0)
    """The collector's garbage collections: how many, how many held it 50 ms or more, seconds in all."""


@dataclass
class Traffic:
    """Normal traffic's rate and the bodies of one phase (built before it starts)."""

    period_s: float
    offered: float
    normal: list[Body]
    burst: list[Body]
    chain: list[Body]
    huge: list[Body]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000 if ordered else float("nan")


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _keys(directory: Any) -> tuple[str, str]:
    keys = KeyStore(f"sqlite:///{directory / 'metadata.db'}")
    normal_key, hostile_key = keys.create("normal")[1], keys.create("hostile")[1]
    keys.close()
    return normal_key, hostile_key


def _probe(collector: _collector.RunningCollector, key: str, tally: Tally, report: Any) -> float:
    """Spans/s the collector serves to :data:`PROBE_SENDERS` senders posting back to back."""
    stop = threading.Event()
    pool = Pool(normal_pool(PROBE, 600))
    senders = [Sender(collector.url, key, pool, 0.0, tally, lambda: True, stop) for _ in range(PROBE_SENDERS)]
    for sender in senders:
        sender.start()
    time.sleep(2.0)
    before, began = tally.acknowledged, time.perf_counter()
    time.sleep(PROBE_S)
    served = (tally.acknowledged - before) / (time.perf_counter() - began)
    stop.set()
    for sender in senders:
        sender.join(120)
    report.note(f"probe: {served:,.0f} spans/s served to {PROBE_SENDERS} senders posting back to back")
    return served


def _traffic(served: float) -> Traffic:
    """Normal traffic at :data:`LOAD_FRACTION` of ``served``, and every body the phases post."""
    offered = max(float(_payloads.SPANS_PER_BODY), min(MAX_OFFERED, LOAD_FRACTION * served))
    period = NORMAL_SENDERS * _payloads.SPANS_PER_BODY / offered
    window = WARMUP_S + SECONDS + 20.0
    normal = math.ceil(NORMAL_SENDERS * window / period) + NORMAL_SENDERS
    bursts = math.ceil(SECONDS / BURST_EVERY_S) + 1
    burst = BURST_SENDERS * bursts * (math.ceil((BURST_S + 1.0) / period) + 1)
    return Traffic(
        period,
        NORMAL_SENDERS * _payloads.SPANS_PER_BODY / period,
        normal_pool(NORMAL, normal),
        normal_pool(BURST, burst),
        chain_pool(CHAIN_BODIES),
        huge_pool(HUGE_BODIES),
    )


def _phase(
    name: str,
    hostile: bool,
    report: Any,
    traffic: Traffic,
    collector: _collector.RunningCollector,
    keys: tuple[str, str],
    tallies: dict[int, Tally],
) -> Phase:
    report.note(
        f"{name} phase: normal traffic {traffic.offered:,.0f} spans/s offered "
        f"({NORMAL_SENDERS} senders, a body every {traffic.period_s:.2f} s), {SECONDS:.0f} s measured"
    )
    directory = DIRECTORY / name
    normal_key, hostile_key = keys
    stop = threading.Event()
    bursting = threading.Event()
    always: Callable[[], bool] = lambda: True  # noqa: E731
    normal = Pool(traffic.normal)
    threads: list[threading.Thread] = [
        Sender(collector.url, normal_key, normal, traffic.period_s, tallies[NORMAL], always, stop)
        for _ in range(NORMAL_SENDERS)
    ]
    slow = SlowClients(collector.url, SLOW_CLIENTS, stop)
    if hostile:
        bursts = Pool(traffic.burst)
        url = collector.url
        threads += [Sender(url, hostile_key, Pool(traffic.chain), 0.0, tallies[CHAIN], always, stop)]
        threads += [Sender(url, hostile_key, Pool(traffic.huge), 0.0, tallies[HUGE], always, stop)]
        threads += [
            Sender(url, hostile_key, bursts, traffic.period_s, tallies[BURST], bursting.is_set, stop)
            for _ in range(BURST_SENDERS)
        ]
        threads.append(slow)
    for thread in threads:
        thread.start()
    healthz: list[float] = []
    loads: list[float] = []
    try:
        time.sleep(WARMUP_S)
        for tally in tallies.values():
            tally.measuring = True
        window_began = time.perf_counter()
        cpu_began, collector_cpu_began = _cpu_self(), collector.cpu_seconds()
        acknowledged_before = tallies[NORMAL].acknowledged
        with httpx.Client(timeout=60.0) as client:
            while (elapsed := time.perf_counter() - window_began) < SECONDS:
                if hostile and elapsed % BURST_EVERY_S < BURST_S:
                    bursting.set()
                else:
                    bursting.clear()
                asked = time.perf_counter()
                client.get(f"{collector.url}/healthz")
                healthz.append(time.perf_counter() - asked)
                loads.append(os.getloadavg()[0])
                time.sleep(0.5)
        for tally in tallies.values():
            tally.measuring = False
        seconds = time.perf_counter() - window_began
        normal_spans = tallies[NORMAL].acknowledged - acknowledged_before
        generator_cpu, collector_cpu = _cpu_self() - cpu_began, collector.cpu_seconds() - collector_cpu_began
        bursting.clear()
        stop.set()
        report.note(f"{name} phase: measured; waiting for exports in flight")
        for thread in threads:
            thread.join(150)
        peak = collector.peak_rss_bytes() / MIB
        gc_pauses = _gc_pauses(httpx.get(f"{collector.url}/metrics", timeout=30).text)
        spooled = int(httpx.get(f"{collector.url}/readyz", timeout=30).json().get("spool_pending_spans", 0))
    finally:
        stop.set()
        collector.stop()
    spool_files = sum(
        int(path.name.rsplit("-", 1)[1].split(".")[0])
        for path in (directory / "spool").rglob("*.spool")
        if path.name.rsplit("-", 1)[1].split(".")[0].isdigit()
    )
    return Phase(
        name,
        tallies,
        seconds,
        peak,
        max(healthz) * 1000 if healthz else float("nan"),
        max(spooled, spool_files),
        _stored(directory),
        slow.closed_by_server,
        normal_spans,
        sum(loads) / len(loads) if loads else float("nan"),
        generator_cpu,
        collector_cpu,
        gc_pauses,
    )


def _gc_pauses(exposition: str) -> tuple[int, int, float]:
    """Collections, those of 50 ms or more, and their seconds, from ``latencylens_gc_pause_seconds``."""
    count = under = 0.0
    seconds = 0.0
    for line in exposition.splitlines():
        if not line.startswith("latencylens_gc_pause_seconds"):
            continue
        value = float(line.rsplit(" ", 1)[1])
        if line.startswith("latencylens_gc_pause_seconds_count"):
            count += value
        elif line.startswith("latencylens_gc_pause_seconds_sum"):
            seconds += value
        elif 'le="0.05"' in line:
            under += value
    return int(count), int(count - under), seconds


def _stored(directory: Any) -> dict[int, int]:
    """Distinct (trace, span) stored per kind, read in a subprocess once the collector stopped
    (one process per chdb directory)."""
    script = (
        "import json, sys\n"
        "from latencylens_collector.settings import Settings, chdb_dsn\n"
        "from latencylens_collector.storage.store import Store\n"
        "store = Store(Settings(clickhouse_dsn=chdb_dsn(sys.argv[1]), database='bench', environ={}))\n"
        'rows = store.query("SELECT reinterpretAsUInt8(substring(trace_id, 1, 1)) AS kind, '
        'uniqExact(trace_id, span_id) AS spans FROM " + store.table(\'spans\') + " GROUP BY kind")\n'
        "print(json.dumps({int(r['kind']): int(r['spans']) for r in rows}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(directory / "data")],
        cwd=_collector.ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {int(kind): spans for kind, spans in json.loads(out.strip().splitlines()[-1]).items()}


def _normal(phase: Phase) -> dict[str, float]:
    tally = phase.tallies[NORMAL]
    return {
        "spans_per_s": phase.normal_window_spans / phase.seconds,
        "p50_ms": _quantile(tally.latencies, 0.5),
        "p99_ms": _quantile(tally.latencies, 0.99),
        "requests": len(tally.latencies),
    }


def _tallies() -> dict[int, Tally]:
    return {kind: Tally() for kind in (PROBE, NORMAL, BURST, CHAIN, HUGE)}


def run(report: Any) -> None:
    if "soak" not in sys.argv[1:]:
        report.note("skipped: runs only when named (python -m bench soak), as it takes minutes")
        return
    report.note("clean phase: starting a collector and probing what it serves")
    collector = _collector.start(DIRECTORY / "clean")
    keys = _keys(DIRECTORY / "clean")
    clean_tallies = _tallies()
    try:
        served = _probe(collector, keys[0], clean_tallies[PROBE], report)
        built = time.perf_counter()
        traffic = _traffic(served)
    except BaseException:
        collector.stop()
        raise
    report.note(
        f"built every body of both phases in {time.perf_counter() - built:.1f} s: "
        f"{len(traffic.normal)} normal, {len(traffic.burst)} burst, {len(traffic.chain)} chain, "
        f"{len(traffic.huge)} huge"
    )
    clean = _phase("clean", False, report, traffic, collector, keys, clean_tallies)
    collector = _collector.start(DIRECTORY / "hostile")
    hostile = _phase("hostile", True, report, traffic, collector, _keys(DIRECTORY / "hostile"), _tallies())
    a, b = _normal(clean), _normal(hostile)
    p99_ratio, rate_ratio = b["p99_ms"] / a["p99_ms"], b["spans_per_s"] / a["spans_per_s"]
    report.add(
        "probe: spans/s served to senders posting back to back",
        served,
        "spans/s",
        f"{PROBE_SENDERS} senders, {PROBE_S:.0f} s; normal traffic offers {LOAD_FRACTION:.0%} of it "
        f"(at most {MAX_OFFERED:,})",
    )
    for label, figures, phase in (("clean", a, clean), ("hostile", b, hostile)):
        report.add(
            f"normal traffic, {label}: spans/s served",
            figures["spans_per_s"],
            "spans/s",
            f"{traffic.offered:,.0f} offered by {NORMAL_SENDERS} senders, {phase.seconds:.0f} s, "
            f"{int(figures['requests'])} exports; p50 / p99 "
            f"{figures['p50_ms']:.0f} / {figures['p99_ms']:.0f} ms; load average {phase.load_average:.1f}; "
            f"CPU-s collector {phase.collector_cpu_s:.0f}, load generator {phase.generator_cpu_s:.0f}",
            ratio=rate_ratio if label == "hostile" else None,
        )
    report.add(
        "normal traffic p99 export latency, hostile / clean",
        p99_ratio,
        "×",
        f"{b['p99_ms']:.0f} vs {a['p99_ms']:.0f} ms; target ≤ {P99_RATIO_TARGET:.0f}×: "
        f"{'met' if p99_ratio <= P99_RATIO_TARGET else 'NOT met'}; spans/s ratio {rate_ratio:.2f} "
        f"(target ≥ 0.5: {'met' if rate_ratio >= 0.5 else 'NOT met'})",
    )
    for phase in (clean, hostile):
        report.add(
            f"collector peak RSS, {phase.name}",
            phase.peak_rss_mib,
            "MiB",
            f"VmHWM; bound {RSS_BOUND_MIB} MiB: "
            f"{'met' if phase.peak_rss_mib <= RSS_BOUND_MIB else 'NOT met'}",
        )
    report.add("slowest /healthz while hostile", hostile.healthz_max_ms, "ms", "asked every 0.5 s")
    for phase in (clean, hostile):
        collections, long_ones, paused_s = phase.gc_pauses
        report.add(
            f"garbage collections of 50 ms or more, {phase.name}",
            long_ones,
            "",
            f"of {collections:,} collections in the phase, {paused_s * 1000:,.0f} ms paused in all",
        )
    report.add(
        "slow connections ended by the server",
        hostile.slow_closed,
        "",
        f"{SLOW_CLIENTS} kept open: silent, trickling headers, trickling a body; answered or closed",
    )
    lost_total = 0
    for phase in (clean, hostile):
        missing = 0
        for kind, tally in phase.tallies.items():
            if not tally.statuses:
                continue
            stored = phase.stored.get(kind, 0)
            missing += max(0, tally.acknowledged - stored)
            answers = ", ".join(f"{status}: {count}" for status, count in sorted(tally.statuses.items()))
            report.add(
                f"{phase.name}: {_KINDS[kind]} spans acknowledged",
                tally.acknowledged,
                "spans",
                f"distinct stored {stored:,}; answers (status: count) {answers}; p50 of those "
                f"acknowledged in the window {_quantile(tally.latencies, 0.5):,.0f} ms"
                + ("; ran out of pre-built bodies" if tally.exhausted else ""),
            )
        lost_total += max(0, missing - phase.spooled_spans)  # spooled spans are kept, not lost
    report.add(
        "acknowledged spans lost",
        lost_total,
        "spans",
        f"spooled at stop: clean {clean.spooled_spans}, hostile {hostile.spooled_spans}; "
        f"target 0: {'met' if lost_total == 0 else 'NOT met'}",
    )
