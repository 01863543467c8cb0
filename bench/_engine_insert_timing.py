"""One process's timings for ``python -m bench engine_insert`` (one chdb engine per process).

``python -m bench._engine_insert_timing DIR ROUNDS`` prints one JSON line: for each case, the
median wall and CPU milliseconds of one statement (the process's CPU, chdb's threads included),
the cases interleaved round by round so the machine's drift falls on all of them alike.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import clickhouse_connect
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench import _payloads
from latencylens_collector.settings import Settings, chdb_dsn
from latencylens_collector.storage import otlp_sql
from latencylens_collector.storage.store import Store

MANY_BODIES = 16
"""As the engine floor's INSERT (``bench.ingest_engine.FLOOR_BATCH_BODIES``)."""
WARMUP_ROUNDS = 2


def one_span_body(template: bytes) -> bytes:
    """``template`` cut to its first span: an INSERT of it costs what any INSERT costs."""
    request = ExportTraceServiceRequest.FromString(template)
    del request.resource_spans[1:]
    del request.resource_spans[0].scope_spans[1:]
    del request.resource_spans[0].scope_spans[0].spans[1:]
    return request.SerializeToString()


def main(directory: Path, rounds: int) -> dict[str, dict[str, float]]:
    shutil.rmtree(directory, ignore_errors=True)
    dsn = chdb_dsn(directory / "data")
    store = Store(Settings(clickhouse_dsn=dsn, database="bench", spool_dir="off"))
    store.migrate()
    settings = store.ensure_otlp_views()[False]
    landing = otlp_sql.landing_table(store.database)
    flat = landing.replace(otlp_sql.LANDING, otlp_sql.FLAT)
    bare = f"{store.database}.bench_bare_landing"
    store.command(f"CREATE TABLE {bare} AS {landing} ENGINE = Null")
    templates = _payloads.templates(8)
    single = one_span_body(templates[0])
    checks = otlp_sql.BodyLimits(time.time_ns(), 64 * 1024, 1024 * 1024, False, 16 * 1024)
    client = clickhouse_connect.get_client(dsn=dsn)  # a handle of its own, as the store's writer has

    def insert(table: str, bodies: list[bytes]) -> Callable[[], None]:
        def run() -> None:
            batch = uuid.uuid4().hex
            data = otlp_sql.framed(
                (_payloads.stamp(body), otlp_sql.envelope("default", batch, seq, checks))
                for seq, body in enumerate(bodies)
            )
            per_insert = {**settings, "insert_deduplication_token": batch}
            client.raw_insert(table, insert_block=data, fmt="Protobuf", settings=per_insert)

        return run

    many = [templates[i % len(templates)] for i in range(MANY_BODIES)]
    view = flat.replace(otlp_sql.FLAT, f"{otlp_sql.FLAT}_mv").split(".", 1)[1]
    found = store.query(
        "SELECT as_select FROM system.tables WHERE database = {db:String} AND name = {view:String}",
        {"db": store.database, "view": view},
    )
    planning = ", ".join(  # the INSERT's own settings: they change how the view is planned
        f"{name} = {value!r}" if isinstance(value, str) else f"{name} = {value}"
        for name, value in otlp_sql.INSERT_SETTINGS.items()
        if not name.startswith("format_")
    )
    plan_flat = f"EXPLAIN PLAN {found[0]['as_select']} SETTINGS {planning}"
    cases: dict[str, Callable[[], None]] = {
        "raw": insert(bare, many),
        "raw_one_span": insert(bare, [single]),
        "one_span": insert(landing, [single]),
        "one_body": insert(landing, [templates[0]]),
        "many_bodies": insert(landing, many),
        "after_flat_one_row": lambda: store.command(
            f"INSERT INTO {flat} SELECT *, 'bench', 0, true FROM {store.table('spans')} LIMIT 1"
        ),
        "spans_one_row": lambda: store.command(
            f"INSERT INTO {store.table('spans')} SELECT * FROM {store.table('spans')} LIMIT 1"
        ),
        "plan_flat": lambda: store.command(plan_flat),
        "parse_flat": lambda: store.command(f"EXPLAIN AST {found[0]['as_select']}"),
        "read_one_row": lambda: store.command(f"SELECT * FROM {store.table('spans')} LIMIT 1"),
    }
    walls: dict[str, list[float]] = {name: [] for name in cases}
    cpus: dict[str, list[float]] = {name: [] for name in cases}
    for round_ in range(WARMUP_ROUNDS + rounds):
        for name, case in cases.items():
            wall, cpu = time.perf_counter(), time.process_time()
            case()
            if round_ >= WARMUP_ROUNDS:
                walls[name].append(time.perf_counter() - wall)
                cpus[name].append(time.process_time() - cpu)
    client.close()
    store.close()
    return {
        name: {"wall_ms": statistics.median(walls[name]) * 1e3, "cpu_ms": statistics.median(cpus[name]) * 1e3}
        for name in cases
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), int(sys.argv[2]))))
