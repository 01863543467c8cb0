"""The embedded engine starts with LatencyLens's server settings (``latencylens-engine.xml`` in its
directory): a cache of decompressed index blocks, so the reads by trace id after each insert do not
decompress the same blocks of the set index over trace ids again.

chdb reads server settings once, when a process's engine starts, so each case runs in a process of
its own. The engine counts the cache's hits and misses in ``system.events`` (``UncompressedCache*``:
data columns do not use that cache by default, so every count here is an index block's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from latencylens_collector.settings import DEFAULT_INDEX_CACHE_BYTES, chdb_dsn, env_var
from latencylens_collector.storage.store import ENGINE_CONFIG_FILE

_READS_TWICE = """
import json, time
from latencylens_collector.settings import Settings
from latencylens_collector.storage import trace_state
from latencylens_collector.storage.store import Store

store = Store.connect(Settings())
store.migrate()
spans = store.table("spans")
now = time.time_ns()
store.command(
    f"INSERT INTO {spans} (project, trace_id, span_id, start_time, duration_ns) "
    "SELECT 'default', sipHash128(number % 8000), reinterpretAsFixedString(sipHash64(number)), "
    "fromUnixTimestamp64Nano({start:Int64}), 1000 FROM numbers(40000)",
    {"start": now},
)
store.command(f"OPTIMIZE TABLE {spans} FINAL")
ids = [bytes(row["trace_id"]) for row in store.query(f"SELECT DISTINCT trace_id FROM {spans} LIMIT 20")]
near = trace_state.Near.of(now, now)
events = "SELECT event, value FROM system.events WHERE event LIKE 'UncompressedCache%'"

def counts():
    return {row["event"]: row["value"] for row in store.query(events)}

[size] = store.query(
    "SELECT value FROM system.server_settings WHERE name = 'index_uncompressed_cache_size'"
)
reads = []
for half in (ids[::2], ids[1::2]):  # other ids each time, in the same granules
    before = counts()
    assert len(trace_state.stamps(store, half, "default", near)) == len(half)
    after = counts()
    reads.append({event: after.get(event, 0) - before.get(event, 0) for event in after})
print(json.dumps({"size": int(size["value"]), "reads": reads}))
"""


def _reads_twice(data: Path, **settings: str) -> dict[str, object]:
    env = {
        **os.environ,
        env_var("clickhouse_dsn"): chdb_dsn(data),
        env_var("data_dir"): str(data),
        **{env_var(name): value for name, value in settings.items()},
    }
    done = subprocess.run(
        [sys.executable, "-c", _READS_TWICE], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_embedded_engine_keeps_the_index_blocks_a_read_decompressed(tmp_path: Path) -> None:
    result = _reads_twice(tmp_path / "data")
    assert result["size"] == DEFAULT_INDEX_CACHE_BYTES
    first, second = result["reads"]  # type: ignore[misc]
    assert first.get("UncompressedCacheMisses", 0) > 0, result  # the first read decompresses the blocks
    assert second.get("UncompressedCacheMisses", 0) == 0, result  # the second finds them kept
    assert second.get("UncompressedCacheHits", 0) > 0, result
    config = (tmp_path / "data" / ENGINE_CONFIG_FILE).read_text()
    assert f"<index_uncompressed_cache_size>{DEFAULT_INDEX_CACHE_BYTES}<" in config


def test_index_cache_bytes_0_starts_the_engine_without_the_cache(tmp_path: Path) -> None:
    result = _reads_twice(tmp_path / "data", index_cache_bytes="0")
    assert result["size"] == 0
    first, second = result["reads"]  # type: ignore[misc]
    assert first.get("UncompressedCacheHits", 0) == second.get("UncompressedCacheHits", 0) == 0, result
