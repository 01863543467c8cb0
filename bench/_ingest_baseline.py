"""Baseline for the ingest benchmark, run in its own process (chdb allows one engine per process).

The least a Python collector must do with the same bodies: parse each with ``opentelemetry-proto``
(upb), turn spans into columns in one Python loop (ids, times, attributes as text), and insert
them into the same ``spans`` table with the fastest chdb route, ``client.insert_arrow`` of a
pyarrow table. No HTTP, no validation, no classification, no request rows: an upper bound for
the work LatencyLens does per span. Prints one JSON line: spans, seconds, spans per second.

``python -m bench._ingest_baseline DIR SECONDS BATCH_BODIES``
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench import _payloads
from latencylens_collector.settings import Settings, chdb_dsn
from latencylens_collector.storage.store import Store

_MAP = pa.map_(pa.string(), pa.string())


def _text(value: Any) -> str:
    which = value.WhichOneof("value")
    if which == "string_value":
        return str(value.string_value)
    if which is None:
        return ""
    if which == "array_value":
        return json.dumps([_text(item) for item in value.array_value.values])
    return str(getattr(value, which))


def columns(bodies: list[bytes]) -> pa.Table:
    """Parse ``bodies`` and return their spans as one Arrow table of the ``spans`` columns."""
    cols: dict[str, list[Any]] = {name: [] for name in _NAMES}
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            resource = {kv.key: _text(kv.value) for kv in resource_spans.resource.attributes}
            service = resource.get("service.name", "")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    cols["project"].append("default")
                    cols["trace_id"].append(span.trace_id)
                    cols["span_id"].append(span.span_id)
                    cols["parent_span_id"].append(span.parent_span_id or bytes(8))
                    cols["service"].append(service)
                    cols["name"].append(span.name)
                    cols["span_kind"].append(str(span.kind))
                    cols["kind"].append("")
                    cols["start_time"].append(span.start_time_unix_nano)
                    cols["duration_ns"].append(span.end_time_unix_nano - span.start_time_unix_nano)
                    cols["status_code"].append(span.status.code)
                    cols["status_message"].append(span.status.message)
                    cols["attributes"].append({kv.key: _text(kv.value) for kv in span.attributes})
                    cols["resource_attributes"].append(resource)
    return pa.Table.from_arrays([pa.array(cols[name], _TYPES[name]) for name in _NAMES], names=_NAMES)


_TYPES = {
    "project": pa.string(),
    "trace_id": pa.binary(16),
    "span_id": pa.binary(8),
    "parent_span_id": pa.binary(8),
    "service": pa.string(),
    "name": pa.string(),
    "span_kind": pa.string(),
    "kind": pa.string(),
    "start_time": pa.timestamp("ns", tz="UTC"),
    "duration_ns": pa.int64(),
    "status_code": pa.uint8(),
    "status_message": pa.string(),
    "attributes": _MAP,
    "resource_attributes": _MAP,
}
_NAMES = list(_TYPES)


def main(directory: Path, seconds: float, batch_bodies: int) -> dict[str, float]:
    shutil.rmtree(directory, ignore_errors=True)
    store = Store(Settings(clickhouse_dsn=chdb_dsn(directory), database="baseline", environ={}))
    store.migrate()
    client = store.client
    templates = _payloads.templates(8)
    spans, began = 0, time.perf_counter()
    index = 0
    while time.perf_counter() - began < seconds:
        bodies = [_payloads.stamp(templates[(index + i) % len(templates)]) for i in range(batch_bodies)]
        index += batch_bodies
        table = columns(bodies)
        client.insert_arrow("baseline.spans", table)
        spans += table.num_rows
    elapsed = time.perf_counter() - began
    stored = store.query("SELECT count() AS n FROM baseline.spans")[0]["n"]
    return {"spans": spans, "stored": stored, "seconds": elapsed, "spans_per_s": spans / elapsed}


if __name__ == "__main__":
    result = main(Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]))
    print(json.dumps(result), flush=True)
