"""Hand-built ``requests`` rows (and span rows) with known numbers, for the query tests.

Rows go straight into the store the collector reads, so these tests exercise the query layer on
exact inputs; the OTLP path into those rows is covered by the end-to-end tests.
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Mapping
from typing import Any

from latencylens_collector.analysis.attribution import COMPONENTS, DERIVED, MEASURED, REPORTED
from latencylens_collector.analysis.records import REQUEST_COLUMNS

MS = 1_000_000
S = 1_000_000_000
PROVENANCE = {
    "retrieval": MEASURED,
    "tool": MEASURED,
    "app_other": MEASURED,
    "network": DERIVED,
    "queue": REPORTED,
    "prefill": REPORTED,
    "decode": REPORTED,
    "model_unattributed": DERIVED,
}


def trace_id(n: int) -> bytes:
    return n.to_bytes(16, "big")


def request_row(
    n: int,
    start_ns: int,
    parts_ms: Mapping[str, float],
    *,
    service: str = "api",
    route: str = "POST /chat",
    model: str = "m1",
    provider: str = "groq",
    ttft_ms: float | None = None,
    itl_ms: float | None = None,
    input_tokens: int | None = 0,
    output_tokens: int | None = 0,
    cached: int | None = 0,
    estimated: bool = False,
    tps: float | None = None,
    cost_nano_usd: int | None = None,
    project: str = "default",
    computed_at_us: int | None = None,
) -> dict[str, Any]:
    """A request row whose e2e is the sum of its parts (as attribution guarantees)."""
    parts = {name: round(parts_ms.get(name, 0) * MS) for name in COMPONENTS}
    row: dict[str, Any] = {
        "project": project,
        "trace_id": trace_id(n),
        "start_time": start_ns,
        "e2e_ns": sum(parts.values()),
        "service": service,
        "name": route,
        "model": model,
        "provider": provider,
        "status_error": 0,
        "provenance": PROVENANCE,
        "inconsistent": 0,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": cached,
        "tokens_estimated": int(estimated),
        "ttft_ns": round(ttft_ms * MS) if ttft_ms is not None else None,
        "itl_ns": round(itl_ms * MS) if itl_ms is not None else None,
        "decode_tokens_per_second": tps,
        "cost_nano_usd": cost_nano_usd,  # None: no price
        "price_version": "genai-prices test" if cost_nano_usd is not None else "",
        "model_calls": 1,
        "span_count": 1,
        "computed_at": computed_at_us if computed_at_us is not None else time.time_ns() // 1000,
        "is_deleted": 0,
        "root_missing": 0,
    }
    for name in COMPONENTS:
        row[f"{name}_ns"] = parts[name]
        row[f"busy_{name}_ns"] = parts[name]
    row["version"] = row["computed_at"]  # a later computation here is a more complete one
    assert set(row) == set(REQUEST_COLUMNS)
    return row


def bf16(ns: float) -> int:
    """What ``quantileBFloat16`` returns for a value: float32 with its low 16 bits cut off."""
    bits = struct.unpack(">I", struct.pack(">f", ns))[0] & 0xFFFF0000
    return round(struct.unpack(">f", bits.to_bytes(4, "big"))[0])


def nearest_rank(values: list[float], level: float) -> float:
    """The value ``quantileBFloat16`` picks before rounding: nearest rank, ceil(level × n)."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(level * len(ordered))) - 1]
