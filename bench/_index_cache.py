"""Does an uncompressed cache for index blocks make reads by trace id cheaper?

``python -m bench._index_cache [SPANS]`` (default 16 M; not part of ``make bench``: the engine's
cache size is a server setting, fixed when chdb starts, so this runs in a process of its own whose
first store starts the engine with it, as the collector does). ``bench read_back`` shows that
with random trace ids the stamps and the read-back of a batch look at the set index over trace
ids in about one granule a trace, and the server's ``index_uncompressed_cache_size`` is 0 by
default: each set looked at is read and decompressed again (the collector's embedded engine
starts with 256 MiB, ``LATENCYLENS_INDEX_CACHE_BYTES``). Here the engine starts with a 1 GiB
cache; the spans of ``bench read_back``'s largest size are stored as it stores them (random ids,
merged, then a batch of its own), and the batch's stamps and read-back are timed with the cache
kept, then with it dropped before each read (as with no cache). Medians of 7, process CPU.
"""

from __future__ import annotations

import sys
from typing import Final

from bench import _stored_traces
from bench.read_back import _RANDOM, _last_batch, _median_cpu_ms, fill, store_with_source
from latencylens_collector.storage import trace_state

CACHE_BYTES: Final = 1 << 30
REPEATS: Final = 7


def main(spans_stored: int) -> None:
    store, source_spans = store_with_source("bench_index_cache", index_cache_bytes=CACHE_BYTES)
    [cache] = store.query(
        "SELECT value FROM system.server_settings WHERE name = 'index_uncompressed_cache_size'"
    )
    assert int(cache["value"]) == CACHE_BYTES, cache  # this store started the process's engine
    spans = store.table("spans")
    try:
        store.command(f"TRUNCATE TABLE {spans}")
        stored, _ = fill(store, _RANDOM, source_spans, spans_stored)
        batch, near = _last_batch(store)

        def stamps() -> object:
            return trace_state.stamps(store, batch, "default", near)

        def read_back() -> object:
            return trace_state.stored_traces_unparsed(store, batch, "default", near=near)

        def drop() -> None:
            store.command("SYSTEM DROP INDEX UNCOMPRESSED CACHE")

        print(f"{stored:,} spans stored, random ids; a batch of {len(batch):,} traces; ms CPU, medians")
        print("| round | stamps, cache kept | stamps, dropped first | read-back, kept | read-back, dropped |")
        print("|---:|---:|---:|---:|---:|")
        for round_ in (1, 2):
            figures = tuple(
                _median_cpu_ms(read, before, REPEATS)
                for read, before in ((stamps, None), (stamps, drop), (read_back, None), (read_back, drop))
            )
            print(f"| {round_} | " + " | ".join(f"{figure:.1f}" for figure in figures) + " |", flush=True)
    finally:
        _stored_traces.drop(store)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 16_000_000)
