"""An instrumented app process: ``python queries_workload.py COLLECTOR_URL``.

One request runs two tools in parallel threads (30 ms and 80 ms of sleep), then 20 ms of its own
work, exporting with the real OTLP exporter ``latencylens.configure`` installs. Prints one JSON
line: the trace id and what the process measured itself.
"""

from __future__ import annotations

import contextvars
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from opentelemetry import trace

import latencylens


def parallel_tools() -> dict[str, object]:
    measured: dict[str, float] = {}

    def timed_sleep(name: str, seconds: float) -> None:
        began = time.perf_counter()
        time.sleep(seconds)
        measured[name] = time.perf_counter() - began

    @latencylens.tool(name="short")
    def short() -> None:
        timed_sleep("short_s", 0.030)

    @latencylens.tool(name="long")
    def long() -> None:
        timed_sleep("long_s", 0.080)

    def handle() -> str:
        with ThreadPoolExecutor(max_workers=2) as pool:
            # Each thread runs in a copy of this context, so its tool span is a child of the request.
            futures = [pool.submit(contextvars.copy_context().run, fn) for fn in (short, long)]
            for future in futures:
                future.result()
        timed_sleep("step_s", 0.020)
        return trace.get_current_span().get_span_context().trace_id.to_bytes(16, "big").hex()

    # The first request pays one-off costs (thread start, the SDK's lazy set-up): warm up under
    # another route, outside the measured request.
    latencylens.request(name="warm-up")(handle)()
    measured.clear()
    began = time.perf_counter()
    trace_id = latencylens.request(name="parallel-tools")(handle)()
    measured["request_s"] = time.perf_counter() - began
    return {"trace_id": trace_id, **measured}


if __name__ == "__main__":
    os.environ["LATENCYLENS_ENDPOINT"] = sys.argv[1]
    latencylens.configure(service_name="queries-e2e")
    result = parallel_tools()
    provider = trace.get_tracer_provider()
    provider.force_flush()  # type: ignore[attr-defined]
    provider.shutdown()  # type: ignore[attr-defined]
    print(json.dumps(result))
