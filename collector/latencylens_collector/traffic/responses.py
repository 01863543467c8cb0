"""Response models of the replay routes: a selected shape and a run beside its production."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ShapeRow(BaseModel):
    """One recorded request: arrival offset (ns after the first) and its token counts."""

    offset_ns: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    source_trace_id: str
    route: str
    model: str
    provider: str


class ShapeResponse(BaseModel):
    """Recorded requests of a window, oldest first (a sample when ``sample`` was given)."""

    since_ns: int
    until_ns: int
    requests: list[ShapeRow]


class Percentiles(BaseModel):
    """p50/p95/p99 in integer ns; null without values."""

    p50: int | None
    p95: int | None
    p99: int | None


class Slo(BaseModel):
    """Targets a request must all meet to count as good (ns; null: not a target)."""

    ttft_ns: int | None = None
    itl_ns: int | None = None
    e2e_ns: int | None = None


class Side(BaseModel):
    """One side of the comparison: the production requests or the replayed ones."""

    requests: int
    failed: int
    ttft: Percentiles
    itl: Percentiles
    e2e: Percentiles
    parts_mean_ns: dict[str, int] = Field(description="Mean ns per component over the side's requests.")
    input_tokens: int
    output_tokens: int
    decode_tokens_per_s_p50: float | None
    output_tokens_per_s: float | None = Field(description="Output tokens over the side's wall span.")
    wall_s: float
    good: int
    good_share: float | None
    goodput_per_s: float | None = Field(description="Good requests per second of wall span.")
    priced: int = Field(description="Requests whose model and provider genai-prices knows.")
    cost_usd: float | None = Field(description="US dollars of the priced requests; null when none is.")


class Distance(BaseModel):
    """How far apart two distributions are: the two-sample Kolmogorov–Smirnov statistic (0 equal,
    1 disjoint) and the replay's percentiles over production's."""

    ks: float | None
    p50_ratio: float | None
    p95_ratio: float | None
    matches: bool


class ReplayComparison(BaseModel):
    """A replay run beside the production requests it copied, and what differs, in words."""

    run_id: str
    slo: Slo
    production: Side
    replay: Side
    ttft: Distance
    itl: Distance
    findings: list[str]


__all__ = ["Distance", "Percentiles", "ReplayComparison", "ShapeResponse", "ShapeRow", "Side", "Slo"]
