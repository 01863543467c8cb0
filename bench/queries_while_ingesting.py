"""API queries while the collector ingests at full load, against the same queries when it is idle.

A dashboard is read while spans arrive. On the embedded engine every statement used to take turns
behind one lock, so a query waited for the writer's INSERT in progress (≈ 100 ms and more at 32
senders); a store now lends each statement its own engine handle
(:data:`~latencylens_collector.storage.store.ENGINE_HANDLES`), and a query waits for CPU only.

One ``latencylens serve`` subprocess (default settings, ``ingest_path = auto``, fresh embedded
ClickHouse), the ingest benchmark's bodies from :data:`SENDERS` httpx senders; for
:data:`SECONDS` one client asks the slow list and the stats (``/api/requests``, ``/api/stats``)
in turn, one query every :data:`PAUSE_S`. Then the senders stop and the same client asks the same
queries of the same data for as many rounds: the idle baseline, same run.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from typing import Any

import httpx

from bench import _collector, _payloads
from bench.ingest import _Load

SECONDS = float(os.environ.get("LATENCYLENS_BENCH_ENGINE_SECONDS") or 20.0)
SENDERS = 32
WARMUP_S = 4.0
SETTLE_S = 3.0
PAUSE_S = 0.1
QUERIES = {
    "slow list": ("/api/requests", {"limit": 50}),
    "stats by model": ("/api/stats", {"by": "model"}),
}
DIRECTORY = _collector.ROOT / ".latencylens" / "bench-queries-while-ingesting"


def _ask(client: httpx.Client, stop: threading.Event | None, rounds: int) -> dict[str, list[float]]:
    """Each query's latencies (ms), asked in turn until ``stop`` is set or ``rounds`` are done."""
    taken: dict[str, list[float]] = {name: [] for name in QUERIES}
    done = 0
    while (stop is None or not stop.is_set()) and (not rounds or done < rounds):
        for name, (path, params) in QUERIES.items():
            started = time.perf_counter()
            answer = client.get(path, params=params)
            taken[name].append((time.perf_counter() - started) * 1000)
            answer.raise_for_status()
            time.sleep(PAUSE_S)
        done += 1
    return taken


def _quantiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]


def run(report: Any) -> None:
    collector = _collector.start(DIRECTORY)
    try:
        load = _Load(collector.url, _payloads.templates(8), SENDERS)
        load.start()
        time.sleep(WARMUP_S)
        stop = threading.Event()
        busy: dict[str, list[float]] = {}
        with httpx.Client(base_url=collector.url, timeout=60) as client:
            asker = threading.Thread(target=lambda: busy.update(_ask(client, stop, 0)))
            asker.start()
            _, spans, elapsed = load.window(SECONDS)
            stop.set()
            asker.join()
            load.stop()
            time.sleep(SETTLE_S)
            idle = _ask(client, None, min(len(taken) for taken in busy.values()))
    finally:
        collector.stop()
    report.note(f"{spans / elapsed:,.0f} spans/s ingested meanwhile ({SENDERS} senders)")
    for name in QUERIES:
        (busy_p50, busy_p90), (idle_p50, idle_p90) = _quantiles(busy[name]), _quantiles(idle[name])
        report.add(
            f"{name} while ingesting",
            busy_p50,
            "ms p50",
            f"p90 {busy_p90:.0f} ms; idle p50 / p90 {idle_p50:.0f} / {idle_p90:.0f} ms; "
            f"{len(busy[name])} queries each; ratio: p50 against idle",
            ratio=busy_p50 / idle_p50,
        )
