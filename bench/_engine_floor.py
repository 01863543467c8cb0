"""Engine floor for ``python -m bench ingest_engine``, in its own process (one chdb engine each).

The same benchmark bodies with the same envelope, concatenated :data:`BATCH_BODIES` at a time and
inserted through the same SQL as the collector's engine path (:meth:`Store.insert_otlp_bodies`:
the landing table, its views, the verdict read) by this one process: no HTTP, no queue, no
request rows, no Python per span. What the engine path could reach if the collector cost
nothing. Prints one JSON line: spans, seconds, spans per second, CPU-seconds.

``python -m bench._engine_floor DIR SECONDS BATCH_BODIES``
"""

from __future__ import annotations

import json
import shutil
import sys
import time
import uuid
from pathlib import Path

from bench import _payloads
from latencylens_collector.settings import Settings, chdb_dsn
from latencylens_collector.storage import otlp_sql
from latencylens_collector.storage.store import Store


def main(directory: Path, seconds: float, batch_bodies: int) -> dict[str, float]:
    shutil.rmtree(directory, ignore_errors=True)
    store = Store(Settings(clickhouse_dsn=chdb_dsn(directory / "data"), database="bench", spool_dir="off"))
    store.migrate()
    templates = _payloads.templates(8)
    checks = otlp_sql.BodyLimits(time.time_ns(), 64 * 1024, 1024 * 1024, False, 16 * 1024)

    def insert(count: int) -> None:
        batch = uuid.uuid4().hex
        bodies = (_payloads.stamp(templates[i % len(templates)]) for i in range(count))
        data = otlp_sql.framed(
            (body, otlp_sql.envelope("default", batch, seq, checks)) for seq, body in enumerate(bodies)
        )
        store.insert_otlp_bodies(data, batch)

    insert(batch_bodies)  # views created, first query compiled
    spans = 0
    began, cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - began < seconds:
        insert(batch_bodies)
        spans += batch_bodies * _payloads.SPANS_PER_BODY
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    store.close()
    return {"spans": spans, "seconds": elapsed, "spans_per_s": spans / elapsed, "cpu_s": cpu}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]))))
