"""Cold start: what ``import latencylens`` costs an app, and how long ``latencylens serve`` takes to be ready.

Import time is the median wall time of ``python -c "import latencylens"`` minus that of
``python -c pass`` (fresh interpreters, runs interleaved), next to ``import opentelemetry.trace``
measured the same way: the API the SDK cannot do without, so the ratio shows what LatencyLens adds.
The same child process lists any heavy module the import pulled in (there must be none).
Serve-to-ready is from starting ``latencylens serve`` on an empty embedded database (migrations
included) to the first ``/readyz`` 200, median of :data:`SERVE_RUNS`.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from typing import Any

from bench import _collector

IMPORT_RUNS = 9
SERVE_RUNS = 3
HEAVY = (
    "chdb",
    "clickhouse_connect",
    "fastapi",
    "latencylens_collector",
    "openai",
    "groq",
    "anthropic",
    "pyarrow",
    "opentelemetry.sdk",
)
"""Modules importing the SDK must not load (the OpenTelemetry SDK only arrives with ``configure()``)."""


def _wall_s(code: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - began


def import_times() -> dict[str, float]:
    codes = {"pass": "pass", "otel": "import opentelemetry.trace", "ours": "import latencylens"}
    times: dict[str, list[float]] = {name: [] for name in codes}
    for _ in range(IMPORT_RUNS):
        for name, code in codes.items():
            times[name].append(_wall_s(code))
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {"otel": medians["otel"] - medians["pass"], "ours": medians["ours"] - medians["pass"]}


def heavy_modules() -> list[str]:
    code = (
        f"import sys, latencylens; heavy = {HEAVY!r}; "
        "print(','.join(sorted(m for m in sys.modules "
        "if any(m == h or m.startswith(h + '.') for h in heavy))))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return [name for name in out.strip().split(",") if name]


def serve_ready_s() -> float:
    times = []
    for _ in range(SERVE_RUNS):
        collector = _collector.start(_collector.ROOT / ".latencylens" / "bench-coldstart")
        times.append(collector.ready_s)
        collector.stop()
    return statistics.median(times)


def run(report: Any) -> None:
    imports = import_times()
    heavy = heavy_modules()
    report.add(
        "import opentelemetry.trace (reference)", imports["otel"] * 1000, "ms", "the API the SDK needs anyway"
    )
    report.add(
        "import latencylens",
        imports["ours"] * 1000,
        "ms",
        "heavy modules loaded: " + (", ".join(heavy) if heavy else "none (no chdb, fastapi, provider SDK)"),
        ratio=imports["ours"] / imports["otel"] if imports["otel"] > 0 else None,
    )
    report.add(
        "latencylens serve → /readyz 200", serve_ready_s(), "s", "fresh chdb directory, migrations applied"
    )
