"""Bodies whose model calls carry stream chunk events, stored by the engine path and the Python path.

OpenLLMetry records a streamed call as one event per chunk. The Python path decodes each event;
the engine path sends a body with span events to its views that store them
(:mod:`latencylens_collector.storage.otlp_sql`). :mod:`bench._engine_events` measures, in one
process with the request rows built and written, the CPU per span of the Python path (the
baseline), of the engine path, and of the engine path without those views (bodies with events
refused and decoded by the Python path: what it did before), at 0, 5, 20 and 100 events per model
call (200 of each body's 500 spans).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from bench import _collector

BATCH_BODIES = 16
"""Bodies per INSERT (and per Python-path batch): as the engine floor's."""
ROUNDS = 3
DIRECTORY = _collector.ROOT / ".latencylens" / "bench-engine-events"


def run(report: Any) -> None:
    command = [sys.executable, "-m", "bench._engine_events", str(DIRECTORY), str(BATCH_BODIES), str(ROUNDS)]
    out = subprocess.run(command, cwd=_collector.ROOT, check=True, capture_output=True, text=True).stdout
    results: dict[str, dict[str, float]] = json.loads(out.strip().splitlines()[-1])
    for events, ways in results.items():
        python = ways["python"]
        for name, label in (
            ("python", "Python path"),
            ("engine", "engine path"),
            ("engine_without_event_views", "engine path without the views of span events"),
        ):
            report.add(
                f"{label}, {events} chunk events per model call",
                ways[name],
                "µs CPU per span",
                f"{BATCH_BODIES} bodies of 500 spans per batch, {ROUNDS} batches, request rows included",
                ratio=ways[name] / python,
            )
