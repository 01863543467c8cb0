"""One process's timing for ``python -m bench rows``: ``python -m bench._rows_timing BODIES``.

Prints one JSON line: whether the compiled build ran, spans, traces, the median CPU µs per span
of 7 passes over every trace, and a digest of the rows (to compare the two builds).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import time

from bench import _payloads
from latencylens_collector.analysis import _compiled
from latencylens_collector.analysis.request_rows import group_by_trace, trace_rows
from latencylens_collector.intake import otlp

PASSES = 7
BASE_NS = 1_780_000_000_000_000_000


def main(bodies: int) -> dict[str, object]:
    # The templates as they are (not re-stamped) at a fixed time: the same rows in every process.
    limits = otlp.Limits(now_ns=BASE_NS + 3600 * 10**9)
    templates = _payloads.templates(bodies, base_ns=BASE_NS)
    spans = [span for body in templates for span in otlp.decode(body, False, limits=limits).spans]
    traces = list(group_by_trace(spans).values())
    rows: list[object] = []
    times = []
    for _ in range(PASSES):
        began = time.process_time()
        rows = [trace_rows(trace, version=1, computed_at_us=1) for trace in traces]
        times.append(time.process_time() - began)
    digest = hashlib.sha256(repr(rows).encode()).hexdigest()
    return {
        "compiled": _compiled.in_use(),
        "spans": len(spans),
        "traces": len(traces),
        "us_per_span": statistics.median(times) / len(spans) * 1e6,
        "digest": digest,
    }


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]))))
