"""``latencylens stats --cache``: cached and uncached requests apart (``GET /api/stats/cache``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from latencylens_collector.cli.output import MISSING, Column, Table, ms, percent, render, utc

CLASSES: Final = ("cached", "uncached")


def cache_text(body: Mapping[str, Any], columns: int | None = None) -> str:
    """One row per group and class: requests, the cached share of their input, TTFT p50/p95 and
    prefill p50 (ms) and prefill ms per 1k uncached input tokens."""
    title = f"Cached vs uncached {utc(body['since'])} – {utc(body['until'])} (ms)"
    groups = body["groups"]
    if not groups:
        return f"{title}\n\nno requests in this window"
    by: Sequence[str] = body["by"]
    keys = [Column(field, wraps=True) for field in by] + [Column("requests")]
    table = Table(
        title,
        [
            *keys,
            *(
                Column(header, numeric=True)
                for header in ("n", "cached", "ttft p50", "ttft p95", "prefill", "per 1k")
            ),
        ],
        notes=[
            "cached requests read input from the provider's cache, uncached ones none; cached = the "
            "cache-read share of their input; prefill = its p50; per 1k = prefill ms per 1000 uncached "
            "input tokens (providers that split prefill)"
        ],
        keys=len(keys),
    )
    unknown = 0
    for group in groups:
        unknown += int(group["unknown"])
        for name in CLASSES:
            part = group[name]
            table.add(
                *(group["key"].get(field, "") or MISSING for field in by),
                name,
                part["count"],
                percent(part["cached_input_share"]),
                ms(part["ttft_ns"]["p50"]),
                ms(part["ttft_ns"]["p95"]),
                ms(part["prefill_ns"]["p50"]),
                ms(part["prefill_per_1k_uncached_tokens_ns"]),
            )
    text = render(table, columns)
    if unknown:
        text += f"\n{unknown} request(s) did not report input or cache-read counts."
    return text
