"""What ``EXPLAIN indexes = 1`` says an index kept of a read, for tests that check a read touches
only the parts or granules it should."""

from __future__ import annotations

import re
from typing import Any, Literal

from latencylens_collector.storage.store import Store


def kept_by_index(
    store: Store, sql: str, params: dict[str, Any], after: str, unit: Literal["Parts", "Granules"]
) -> tuple[int, int]:
    """(kept, given) of ``unit`` in the plan's first block after the line holding ``after``:
    ``"Indexes:"`` for the first index (the min-max of the partition key), ``"Name: trace_id_set"``
    for a skip index by name."""
    plan = "\n".join(row["explain"] for row in store.query(f"EXPLAIN indexes = 1 {sql}", params))
    block = plan.split(after, 1)[1]
    found = re.search(rf"{unit}: (\d+)/(\d+)", block)
    assert found, f"no {unit} figure after {after!r} in the plan:\n{plan}"
    kept, given = found.groups()
    return int(kept), int(given)
