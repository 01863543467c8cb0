"""Collector ingest, OTLP/HTTP protobuf → ClickHouse (embedded), sustained, against a baseline.

``latencylens serve`` runs in a subprocess on a fresh chdb directory (``.latencylens/bench-ingest``)
with its spool on; :data:`SENDERS` threads of this process post pre-encoded bodies of 500 realistic
LLM spans (see :mod:`bench._payloads`) with httpx for :data:`SECONDS` seconds after a warm-up, each
waiting for its answer (which comes once the spans are durable) before sending the next. We report
spans per second acknowledged, request latency p50/p99, and the collector's memory: its RSS is read
every second, and the growth over the second half of the window (after warm-up: chdb's caches and
thread pools, allocator arenas) is the slope that tells a leak from a plateau. Then the same
collector serves :data:`FEW_SENDERS` senders for :data:`FEW_SECONDS` seconds: with few exports in
flight, throughput depends on the writer flushing as soon as nothing more is being decoded.

Baseline, same run, own subprocess: :mod:`bench._ingest_baseline` decodes the same bodies with
``opentelemetry-proto`` and inserts the same columns with ``client.insert_arrow`` (no HTTP, no
validation, no request rows). Target: at least half its throughput, with flat memory.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench import _collector, _payloads

SECONDS = float(os.environ.get("LATENCYLENS_BENCH_INGEST_SECONDS") or 90.0)
"""Measured window; the environment variable shortens it while iterating (reported runs use 90 s)."""
WARMUP_S = 4.0
BASELINE_SECONDS = min(15.0, SECONDS)
SENDERS = int(os.environ.get("LATENCYLENS_BENCH_INGEST_SENDERS") or 32)
FEW_SENDERS = 8
"""The second row: few exporting processes, so batches are small and flushing early matters."""
FEW_SECONDS = min(20.0, SECONDS)
SETTLE_S = 2.0
"""After dropping to :data:`FEW_SENDERS`: the other senders' last exports are answered."""
BATCH_BODIES = 10
"""Bodies per baseline insert (5,000 spans), close to what the collector's writer batches."""
TARGET = 0.5
FLAT_PERCENT_PER_MIN = 1.0
"""Second-half RSS growth under this (% of RSS per minute) counts as flat: a leak of even 10 bytes
per span at these rates is about 10 MiB/min, ≈ 1.5 %/min. Over 45 s the slope still swings by
≈ ±10 MiB/min with chdb's merges; longer windows narrow it."""
RSS_EVERY_S = 1.0
DIRECTORY = _collector.ROOT / ".latencylens" / "bench-ingest"
RSS_CSV = DIRECTORY / "rss.csv"
MIB = 1024 * 1024


def baseline() -> dict[str, float]:
    command = [
        sys.executable,
        "-m",
        "bench._ingest_baseline",
        str(DIRECTORY / "baseline"),
        str(BASELINE_SECONDS),
        str(BATCH_BODIES),
    ]
    out = subprocess.run(command, cwd=_collector.ROOT, check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


class _Load:
    """Sender threads posting stamped bodies; latencies kept only inside a measured window.

    Sender ``i`` runs while ``i < active``, so lowering ``active`` retires the highest ones after
    their current export."""

    def __init__(
        self,
        url: str,
        templates: list[bytes],
        senders: int,
        stamp: Callable[[bytes], bytes] = _payloads.stamp,
    ) -> None:
        self.url = url + "/v1/traces"
        self.templates = templates
        self.stamp = stamp
        self.senders = senders
        self.active = senders
        self.measuring = False
        self.latencies: list[float] = []
        self.spans = 0
        self.refused: dict[int, int] = {}
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._send, args=(i,), daemon=True) for i in range(senders)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self.active = 0
        for thread in self._threads:
            thread.join(60)

    def window(self, seconds: float) -> tuple[list[float], int, float]:
        """Measure for ``seconds``: (sorted latencies, spans acknowledged, elapsed seconds)."""
        with self._lock:
            self.latencies, self.spans, self.measuring = [], 0, True
        began = time.perf_counter()
        time.sleep(seconds)
        with self._lock:
            self.measuring = False
            return sorted(self.latencies), self.spans, time.perf_counter() - began

    def _send(self, index: int) -> None:
        headers = {"content-type": "application/x-protobuf"}
        with httpx.Client(timeout=60.0) as client:
            count = index
            while index < self.active:
                body = self.stamp(self.templates[count % len(self.templates)])
                count += self.senders
                began = time.perf_counter()
                status = client.post(self.url, content=body, headers=headers).status_code
                elapsed = time.perf_counter() - began
                with self._lock:
                    if status != 200:
                        self.refused[status] = self.refused.get(status, 0) + 1
                    elif self.measuring:
                        self.latencies.append(elapsed)
                        self.spans += _payloads.SPANS_PER_BODY
                if status == 429:
                    time.sleep(0.05)


@dataclass
class _RssSampler:
    """The collector's RSS and anonymous RSS every :data:`RSS_EVERY_S`, from ``/proc`` (no load on it)."""

    collector: _collector.RunningCollector
    samples: list[tuple[float, int, int]] = field(default_factory=list)
    """(seconds since start, VmRSS bytes, RssAnon bytes)."""
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._began = time.perf_counter()
        self._thread.start()

    def _run(self) -> None:
        while True:
            rss, anon = self.collector.rss_bytes(), self.collector.rss_anon_bytes()
            self.samples.append((time.perf_counter() - self._began, rss, anon))
            if self._stop.wait(RSS_EVERY_S):
                return

    def stop(self) -> list[tuple[float, int, int]]:
        self._stop.set()
        self._thread.join(10)
        return self.samples


def theil_sen(points: list[tuple[float, float]]) -> float:
    """Median of the pairwise slopes: robust to the per-flush and per-merge spikes in RSS, which
    would tilt a least-squares fit of a 45 s window by tens of MiB/min."""
    slopes = [
        (y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(points) for x2, y2 in points[i + 1 :] if x2 > x1
    ]
    return statistics.median(slopes) if slopes else 0.0


def memory(samples: list[tuple[float, int, int]]) -> dict[str, float]:
    """Start / middle / end RSS and the Theil–Sen slopes of both halves of the window (MiB/min)."""
    first, last = samples[0][0], samples[-1][0]
    middle = (first + last) / 2
    halves = [[s for s in samples if s[0] <= middle], [s for s in samples if s[0] >= middle]]

    def slope(half: list[tuple[float, int, int]], column: int) -> float:
        return theil_sen([(s[0], s[column] / MIB) for s in half]) * 60

    second_level = statistics.median(s[1] for s in halves[1]) / MIB
    return {
        "rss_start": samples[0][1] / MIB,
        "rss_middle": min(samples, key=lambda s: abs(s[0] - middle))[1] / MIB,
        "rss_end": samples[-1][1] / MIB,
        "first_half_mib_min": slope(halves[0], 1),
        "second_half_mib_min": slope(halves[1], 1),
        "second_half_anon_mib_min": slope(halves[1], 2),
        "second_half_median": second_level,
        "second_half_percent_min": 100 * slope(halves[1], 1) / second_level,
        "second_half_s": last - middle,
    }


def ours(report: Any) -> dict[str, Any]:
    templates = _payloads.templates(8)
    collector = _collector.start(DIRECTORY / "collector")
    few: tuple[list[float], int, float] | None = None
    try:
        load = _Load(collector.url, templates, SENDERS)
        load.start()
        time.sleep(WARMUP_S)
        sampler = _RssSampler(collector)
        latencies, spans, elapsed = load.window(SECONDS)
        samples = sampler.stop()
        peak = collector.peak_rss_bytes() / MIB
        if FEW_SENDERS < SENDERS:
            load.active = FEW_SENDERS
            time.sleep(SETTLE_S)
            few = load.window(FEW_SECONDS)
        load.stop()
    finally:
        collector.stop()
    if load.refused:
        report.note(f"refused answers (status: count): {load.refused}")
    with RSS_CSV.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["seconds", "rss_mib", "rss_anon_mib"])
        writer.writerows((f"{t:.1f}", f"{rss / MIB:.1f}", f"{anon / MIB:.1f}") for t, rss, anon in samples)
    return {
        "main": _throughput(latencies, spans, elapsed),
        "few": _throughput(*few) if few is not None else None,
        "memory": memory(samples),
        "rss_peak": peak,
    }


def _throughput(latencies: list[float], spans: int, elapsed: float) -> dict[str, float]:
    def quantile(q: float) -> float:
        if not latencies:
            return float("nan")
        return latencies[min(len(latencies) - 1, int(len(latencies) * q))] * 1000

    return {
        "spans_per_s": spans / elapsed,
        "p50_ms": quantile(0.5),
        "p99_ms": quantile(0.99),
        "requests": len(latencies),
        "seconds": elapsed,
    }


def run(report: Any) -> None:
    base = baseline()
    report.add(
        "baseline: opentelemetry-proto decode + insert_arrow",
        base["spans_per_s"],
        "spans/s",
        f"{int(base['spans']):,} spans in {base['seconds']:.0f} s, one process, no HTTP",
    )
    result = ours(report)
    main = result["main"]
    ratio = main["spans_per_s"] / base["spans_per_s"]
    report.add(
        "LatencyLens OTLP/HTTP → ClickHouse",
        main["spans_per_s"],
        "spans/s",
        f"{SENDERS} senders, {main['seconds']:.0f} s, {int(main['requests'])} requests of "
        f"{_payloads.SPANS_PER_BODY} spans; target ≥ {TARGET:.0%} of baseline: {_met(ratio >= TARGET)}",
        ratio=ratio,
    )
    report.add("request latency p50", main["p50_ms"], "ms", "answer once spans are durable")
    report.add("request latency p99", main["p99_ms"], "ms")
    mem = result["memory"]
    report.add(
        "collector RSS start / middle / end",
        mem["rss_end"],
        "MiB (end)",
        f"{mem['rss_start']:.0f} / {mem['rss_middle']:.0f} / {mem['rss_end']:.0f} MiB over the "
        f"{SECONDS:.0f} s; read every {RSS_EVERY_S:.0f} s ({RSS_CSV.relative_to(_collector.ROOT)})",
    )
    flat = mem["second_half_percent_min"] < FLAT_PERCENT_PER_MIN  # shrinking is no leak
    report.add(
        "collector RSS growth, second half",
        mem["second_half_mib_min"],
        "MiB/min",
        f"{mem['second_half_percent_min']:+.1f} %/min of {mem['second_half_median']:.0f} MiB over the last "
        f"{mem['second_half_s']:.0f} s (anonymous {mem['second_half_anon_mib_min']:+.1f} MiB/min; first "
        f"half {mem['first_half_mib_min']:+.1f} MiB/min); Theil–Sen slope; flat "
        f"(growth < {FLAT_PERCENT_PER_MIN:.0f} %/min): {_met(flat)}",
    )
    report.add("collector peak RSS (VmHWM)", result["rss_peak"], "MiB")
    few = result["few"]
    if few is not None:
        few_ratio = few["spans_per_s"] / base["spans_per_s"]
        report.add(
            f"same collector, {FEW_SENDERS} senders",
            few["spans_per_s"],
            "spans/s",
            f"{few['seconds']:.0f} s after the run above, {int(few['requests'])} requests; p50 / p99 "
            f"{few['p50_ms']:.0f} / {few['p99_ms']:.0f} ms; target ≥ {TARGET:.0%} of baseline: "
            f"{_met(few_ratio >= TARGET)}",
            ratio=few_ratio,
        )


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"
