"""Worker of ``python -m bench engine_events``, in its own process (one chdb engine each).

The ingest benchmark's bodies (500 spans, 200 of them model calls) with ``EVENTS`` stream chunk
events on every model call, as OpenLLMetry records a streamed call (``gen_ai.content.completion
.chunk``, no attributes, spread over the call). Three ways to store them, all in this process with
the request rows built and written, measured in CPU-seconds (chdb's threads included):

* ``python``: the Python path, :func:`~latencylens_collector.intake.otlp.decode` of each body,
  then one :meth:`Ingestor.ingest` of the batch's spans (the writer's group commit);
* ``engine``: :meth:`Ingestor.ingest_bodies` of the batch: bodies with span events go to the views
  that store them, the others to the views of spans without events;
* ``engine_without_event_views``: the same with every body sent to the views of spans without
  events, which refuse those with events: they take the Python path as above (the engine path
  before the views with events).

Prints one JSON line: CPU µs per span for each, by events per model call.

``python -m bench._engine_events DIR BATCH_BODIES ROUNDS``
"""

from __future__ import annotations

import json
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench import _payloads
from latencylens import semconv
from latencylens_collector.intake import otlp
from latencylens_collector.pipeline import ingest
from latencylens_collector.pipeline.ingest import Ingestor
from latencylens_collector.settings import Settings, chdb_dsn
from latencylens_collector.storage import otlp_sql
from latencylens_collector.storage.store import Store

EVENTS = (0, 5, 20, 100)
CHUNK_EVENT = "gen_ai.content.completion.chunk"


def with_chunk_events(template: bytes, count: int) -> bytes:
    """``template`` with ``count`` chunk events spread over each model call."""
    request = ExportTraceServiceRequest.FromString(template)
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                kinds = [kv.value.string_value for kv in span.attributes if kv.key == semconv.SPAN_KIND]
                if kinds != [semconv.KIND_MODEL]:
                    continue
                step = (span.end_time_unix_nano - span.start_time_unix_nano) // (count + 1)
                for index in range(count):
                    span.events.add(
                        name=CHUNK_EVENT, time_unix_nano=span.start_time_unix_nano + step * (index + 1)
                    )
    return request.SerializeToString()


def main(directory: Path, batch_bodies: int, rounds: int) -> dict[str, dict[str, float]]:
    shutil.rmtree(directory, ignore_errors=True)
    store = Store(Settings(clickhouse_dsn=chdb_dsn(directory / "data"), database="bench", spool_dir="off"))
    store.migrate()
    now = time.time_ns()
    limits = otlp.Limits(now_ns=now)
    checks = otlp_sql.BodyLimits(
        now, limits.max_attribute_bytes, limits.max_span_bytes, False, limits.max_content_bytes
    )
    templates = _payloads.templates(4)

    def python_path(bodies: list[bytes]) -> None:
        spans = [row for body in bodies for row in otlp.decode(body, False, "default", limits).spans]
        Ingestor(store).ingest(spans, dedup_token=uuid.uuid4().hex)

    def engine_path(bodies: list[bytes]) -> None:
        batch = [("default", body, checks) for body in bodies]
        verdicts = Ingestor(store).ingest_bodies(batch, uuid.uuid4().hex)
        refused = [
            body
            for body, verdict in zip(bodies, verdicts, strict=True)
            if not (verdict and verdict.stored_all)
        ]
        if refused:
            python_path(refused)

    def without_event_views(bodies: list[bytes]) -> None:
        has_events, ingest.otlp_sql.has_span_events = ingest.otlp_sql.has_span_events, lambda body: False
        try:
            engine_path(bodies)
        finally:
            ingest.otlp_sql.has_span_events = has_events

    ways: dict[str, Callable[[list[bytes]], None]] = {
        "python": python_path,
        "engine": engine_path,
        "engine_without_event_views": without_event_views,
    }
    out: dict[str, dict[str, float]] = {}
    for events in EVENTS:
        bodies = [with_chunk_events(template, events) for template in templates]
        for name, way in ways.items():
            way([_payloads.stamp(bodies[i % len(bodies)]) for i in range(batch_bodies)])  # warm
            cpu = time.process_time()
            for _ in range(rounds):
                way([_payloads.stamp(bodies[i % len(bodies)]) for i in range(batch_bodies)])
            spans = rounds * batch_bodies * _payloads.SPANS_PER_BODY
            out.setdefault(str(events), {})[name] = (time.process_time() - cpu) / spans * 1e6
    store.close()
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))))
