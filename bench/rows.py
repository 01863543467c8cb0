"""Request rows built by the compiled modules against the same modules in Python, in one run.

The ingest benchmark's bodies (100 RAG traces of 5 spans each, decoded by the collector's OTLP
decoder) are grouped by trace, and each trace's rows are built as both ingest paths build them
(:func:`~latencylens_collector.analysis.request_rows.trace_rows`), in two processes: one running the
compiled build (:mod:`latencylens_collector.analysis._compiled`, made by ``make native``), one with
``LATENCYLENS_PURE_PYTHON=1`` (the baseline). The two alternate, :data:`ROUNDS` times each; each
process reports the median CPU per span of its passes, and the figures are the medians of those.
The rows of both are compared after the run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from typing import Any

from latencylens_collector.analysis import _compiled

ROUNDS = 5
BODIES = 8


def _measure(pure: bool) -> dict[str, Any]:
    env = {**os.environ}
    if pure:
        env[_compiled.PURE_ENV] = "1"
    else:
        env.pop(_compiled.PURE_ENV, None)
    command = [sys.executable, "-m", "bench._rows_timing", str(BODIES)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def run(report: Any) -> None:
    compiled, python = [], []
    for _ in range(ROUNDS):
        python.append(_measure(pure=True))
        compiled.append(_measure(pure=False))
    if not all(result["compiled"] for result in compiled):
        report.note("no compiled build matches the sources (run `make native`): nothing to compare")
        return
    python_us = statistics.median(result["us_per_span"] for result in python)
    compiled_us = statistics.median(result["us_per_span"] for result in compiled)
    spans = python[0]["spans"]
    report.add(
        "request rows, Python modules (baseline)",
        python_us,
        "µs CPU per span",
        f"{spans:,} spans in {python[0]['traces']:,} traces, median of {ROUNDS} processes",
    )
    same = all(result["digest"] == python[0]["digest"] for result in python + compiled)
    report.add(
        "request rows, compiled modules",
        compiled_us,
        "µs CPU per span",
        f"rows {'identical' if same else 'DIFFERENT'} to the Python modules'",
        ratio=compiled_us / python_us,
    )
