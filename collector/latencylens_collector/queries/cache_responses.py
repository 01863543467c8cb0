"""Response models of ``GET /api/stats/cache`` (also the JSON ``latencylens stats --cache --json`` prints)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class P50P95(BaseModel):
    """p50 and p95 in integer ns; null without values."""

    p50: int | None
    p95: int | None


class CacheClass(BaseModel):
    """Requests that read input from the provider's cache (cached) or none of it (uncached)."""

    count: int
    share_of_requests: float = Field(description="count / the group's requests (0–1).")
    cached_input_share: float | None = Field(description="Cache-read input tokens / input tokens (0–1).")
    e2e_ns: P50P95
    ttft_ns: P50P95
    prefill_ns: P50P95
    prefill_requests: int = Field(description="Requests whose provider split prefill (the rate's rows).")
    prefill_per_1k_uncached_tokens_ns: int | None = Field(
        description="Prefill time per 1000 uncached input tokens (summed prefill / summed uncached input "
        "tokens × 1000); null when no provider split prefill."
    )


class CacheGroup(BaseModel):
    key: dict[str, str] = Field(description="Group-by field → value; empty without group-by.")
    count: int
    unknown: int = Field(description="Requests whose input or cache-read counts were not reported.")
    cached: CacheClass
    uncached: CacheClass


class CacheResponse(BaseModel):
    """Cached and uncached requests apart, per group, over requests started in [since, until)."""

    since: datetime
    until: datetime
    by: list[str]
    groups: list[CacheGroup] = Field(description="By request count, largest first.")


__all__ = [
    "P50P95",
    "CacheClass",
    "CacheGroup",
    "CacheResponse",
]
