"""The request rows a benchmark collector stored, one digest per template trace.

``python -m bench._request_rows DIRECTORY`` opens the stopped collector's embedded ClickHouse in
``DIRECTORY/data`` (a process of its own: chdb binds one directory per process) and prints, as one
JSON line, ``[template trace, row digest, rows]`` for every distinct row. Every trace the load
sends is a stamped copy of a template trace (:func:`bench._payloads.stamp` changes the first 8
bytes of its id only), so every copy must get the same row, on either ingest path: the digest
covers every column but the trace id and what says when the row was written (``computed_at``,
``version``). :func:`differing` compares collectors.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

WRITTEN_WHEN = ("trace_id", "computed_at", "version")
"""The columns left out of the digest: the stamped id, and when (by whose clock) it was written."""


def digests(directory: Path) -> list[tuple[str, str, int]]:
    from latencylens_collector.analysis.records import REQUEST_COLUMNS
    from latencylens_collector.settings import Settings, chdb_dsn
    from latencylens_collector.storage.store import Store

    store = Store(
        Settings(clickhouse_dsn=chdb_dsn(directory / "data"), database="bench", spool_dir="off", environ={})
    )
    compared = ", ".join(column for column in REQUEST_COLUMNS if column not in WRITTEN_WHEN)
    rows = store.query(
        "SELECT hex(substring(trace_id, 9, 8)) AS template, "
        f"toString(cityHash64(tuple({compared}))) AS digest, count() AS n "
        f"FROM {store.table('requests')} FINAL GROUP BY template, digest"
    )
    return [(row["template"], row["digest"], int(row["n"])) for row in rows]


def collected(directory: Path) -> list[tuple[str, str, int]]:
    """:func:`digests` of ``directory``, computed in a subprocess."""
    out = subprocess.run(
        [sys.executable, "-m", "bench._request_rows", str(directory)],
        cwd=Path(__file__).resolve().parents[1],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [(str(t), str(d), int(n)) for t, d, n in json.loads(out.strip().splitlines()[-1])]


def differing(directories: Sequence[Path]) -> tuple[dict[Path, int], int, list[str]]:
    """(rows per collector, template traces seen, template traces whose rows differ anywhere)."""
    seen: dict[str, set[str]] = defaultdict(set)
    rows: dict[Path, int] = {}
    for directory in directories:
        found = collected(directory)
        rows[directory] = sum(n for _, _, n in found)
        for template, digest, _ in found:
            seen[template].add(digest)
    return rows, len(seen), sorted(template for template, found in seen.items() if len(found) > 1)


if __name__ == "__main__":
    print(json.dumps(digests(Path(sys.argv[1]))))
