"""Collector ingest, OTLP/HTTP protobuf → ClickHouse (embedded), sustained, against a baseline.

``latencylens serve`` runs in a subprocess on a fresh chdb directory (``.latencylens/bench-ingest``)
with its spool on; :data:`SENDERS` threads of this process post pre-encoded bodies of 500 realistic
LLM spans (see :mod:`bench._payloads`) with httpx for :data:`SECONDS` seconds after a warm-up, each
waiting for its answer (which comes once the spans are durable) before sending the next. We report
spans per second acknowledged, the p99 request latency, and the collector's RSS at the start,
middle and end of the run plus its peak (``VmHWM``).

Baseline, same run, own subprocess: :mod:`bench._ingest_baseline` decodes the same bodies with
``opentelemetry-proto`` and inserts the same columns with ``client.insert_arrow`` (no HTTP, no
validation, no request rows). Target: at least half its throughput, with flat memory.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import httpx

from bench import _collector, _payloads

SECONDS = float(os.environ.get("LATENCYLENS_BENCH_INGEST_SECONDS") or 30.0)
"""Measured window; the environment variable shortens it while iterating (reported runs use 30 s)."""
WARMUP_S = 4.0
BASELINE_SECONDS = min(15.0, SECONDS)
SENDERS = int(os.environ.get("LATENCYLENS_BENCH_INGEST_SENDERS") or 32)
BATCH_BODIES = 10
"""Bodies per baseline insert (5,000 spans), close to what the collector's writer batches."""
TARGET = 0.5
DIRECTORY = _collector.ROOT / ".latencylens" / "bench-ingest"


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
    """Sender threads posting stamped bodies; latencies kept only inside the measured window."""

    def __init__(self, url: str, templates: list[bytes]) -> None:
        self.url = url + "/v1/traces"
        self.templates = templates
        self.measuring = False
        self.stopping = False
        self.latencies: list[float] = []
        self.spans = 0
        self.refused: dict[int, int] = {}
        self._lock = threading.Lock()

    def sender(self, index: int) -> None:
        headers = {"content-type": "application/x-protobuf"}
        with httpx.Client(timeout=60.0) as client:
            count = index
            while not self.stopping:
                body = _payloads.stamp(self.templates[count % len(self.templates)])
                count += SENDERS
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


def ours(report: Any) -> dict[str, float]:
    templates = _payloads.templates(8)
    collector = _collector.start(DIRECTORY / "collector")
    try:
        load = _Load(collector.url, templates)
        threads = [threading.Thread(target=load.sender, args=(i,), daemon=True) for i in range(SENDERS)]
        for thread in threads:
            thread.start()
        time.sleep(WARMUP_S)
        rss = [collector.rss_bytes()]
        load.measuring = True
        began = time.perf_counter()
        time.sleep(SECONDS / 2)
        rss.append(collector.rss_bytes())
        time.sleep(SECONDS / 2)
        load.measuring = False
        elapsed = time.perf_counter() - began
        rss.append(collector.rss_bytes())
        load.stopping = True
        for thread in threads:
            thread.join(60)
        peak = collector.peak_rss_bytes()
    finally:
        collector.stop()
    latencies = sorted(load.latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else float("nan")
    if load.refused:
        report.note(f"refused answers (status: count): {load.refused}")
    return {
        "spans_per_s": load.spans / elapsed,
        "p50_ms": statistics.median(latencies) * 1000 if latencies else float("nan"),
        "p99_ms": p99 * 1000,
        "rss_start": rss[0],
        "rss_middle": rss[1],
        "rss_end": rss[2],
        "rss_peak": peak,
        "requests": len(latencies),
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
    ratio = result["spans_per_s"] / base["spans_per_s"]
    met = "met" if ratio >= TARGET else "NOT met"
    report.add(
        "LatencyLens OTLP/HTTP → ClickHouse",
        result["spans_per_s"],
        "spans/s",
        f"{SENDERS} senders, {SECONDS:.0f} s, {int(result['requests'])} requests of "
        f"{_payloads.SPANS_PER_BODY} spans; target ≥ {TARGET:.0%} of baseline: {met}",
        ratio=ratio,
    )
    report.add("request latency p50", result["p50_ms"], "ms", "answer once spans are durable")
    report.add("request latency p99", result["p99_ms"], "ms")
    mib = 1024 * 1024
    start, middle, end = (result[key] / mib for key in ("rss_start", "rss_middle", "rss_end"))
    report.add(
        "collector RSS start / middle / end",
        end,
        "MiB (end)",
        f"{start:.0f} / {middle:.0f} / {end:.0f} MiB; {(end - start) / start:+.0%} over the run",
    )
    report.add("collector peak RSS (VmHWM)", result["rss_peak"] / mib, "MiB")
