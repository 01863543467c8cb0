"""Ingest over time with trace ids as SDKs make them (random) against the ascending ids the other
ingest benchmarks stamp, on the default path (``auto``, which is the engine under this load).

After each INSERT the collector reads back the traces it touched (``bench read_back``): with
ascending ids they sit together at the end of ``spans``' key, with random ones they fall in
nearly every granule, and what the read touches grows with the spans stored. So a collector fed
random ids serves fewer spans/s the longer it runs, where the ingest benchmarks' figures stay
flat. Each run is a fresh collector (``.latencylens/bench-ingest-ids``) and :data:`SENDERS`
senders for :data:`WINDOWS` windows of :data:`WINDOW_S`; the baseline is the ascending ids' first
window, in the same run.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import Any, Final

from bench import _collector, _payloads
from bench.ingest import WARMUP_S, _Load

SENDERS: Final = 32
WINDOWS: Final = 6
WINDOW_S: Final = 15.0
DIRECTORY: Final = _collector.ROOT / ".latencylens" / "bench-ingest-ids"


def _windows(stamp: Callable[[bytes], bytes]) -> list[tuple[float, int]]:
    """(spans/s, spans acknowledged in the windows so far) of each window."""
    shutil.rmtree(DIRECTORY, ignore_errors=True)
    collector = _collector.start(DIRECTORY)
    try:
        load = _Load(collector.url, _payloads.templates(8), SENDERS, stamp)
        load.start()
        time.sleep(WARMUP_S)
        out, stored = [], 0
        for _ in range(WINDOWS):
            _, spans, elapsed = load.window(WINDOW_S)
            stored += spans
            rate = spans / elapsed
            out.append((rate, stored))
            print(f"    {stamp.__name__}: {rate:,.0f} spans/s, {stored:,} acknowledged", flush=True)
        load.stop()
        return out
    finally:
        collector.stop()
        shutil.rmtree(DIRECTORY, ignore_errors=True)


def run(report: Any) -> None:
    runs = {"ascending": _windows(_payloads.stamp), "random": _windows(_payloads.stamp_random)}
    base = runs["ascending"][0][0]
    window = f"{SENDERS} senders, {WINDOW_S:.0f} s"
    report.add("ascending ids, first window (baseline)", base, "spans/s", window)
    for ids, windows in runs.items():
        if ids != "ascending":
            report.add(f"{ids} ids, first window", windows[0][0], "spans/s", ratio=windows[0][0] / base)
        report.add(
            f"{ids} ids, last window",
            windows[-1][0],
            "spans/s",
            f"after {windows[-2][1]:,} spans acknowledged",
            ratio=windows[-1][0] / base,
        )
