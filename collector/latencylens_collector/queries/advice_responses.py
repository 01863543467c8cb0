"""Response models of ``GET /api/advice`` (also the JSON ``latencylens advise --json`` prints)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class AdvicePercentiles(BaseModel):
    """p50 and p95 in integer ns; null without values."""

    p50: int | None
    p95: int | None


class AdviceChange(BaseModel):
    """Per metric, in integer ns: a change (after − before, negative is faster) or a value after it."""

    e2e_p50: int | None
    e2e_p95: int | None
    ttft_p50: int | None
    ttft_p95: int | None


class AdviceEndpoint(BaseModel):
    """Network time of a group's requests to one provider endpoint."""

    endpoint: str | None = Field(
        description="The model call's server.address; null for requests whose spans did not carry one."
    )
    requests: int
    network_p50_ns: int | None
    network_p95_ns: int | None


class AdviceLever(BaseModel):
    """One lever for one group: what it would change, on what evidence, and how sure that is."""

    lever: str = Field(
        description="shorten_outputs, prefix_caching, queue_alternative, network_reuse, parallel_calls "
        "or switch_model."
    )
    title: str
    recommended: bool = Field(description="It cuts p95 end-to-end time or p95 TTFT by at least 5 %.")
    summary: str = Field(description="What to do and what it buys, or in one line why it does not apply.")
    change: AdviceChange | None = Field(
        description="Estimated change (after − before, ns); null when the lever does not apply."
    )
    after: AdviceChange | None = Field(description="Estimated values after the change (ns).")
    evidence: dict[str, str | int | float | None] = Field(
        description="The measurements behind the estimate: the dominant part, sample sizes, rates (ns)."
    )
    confidence: str = Field(description="high, medium or low (sample size and how direct the evidence is).")
    assumptions: list[str] = Field(description="What the estimate takes as given beyond the measured rows.")
    network_by_endpoint: list[AdviceEndpoint] | None = Field(
        default=None,
        description="network_reuse only: network time per provider endpoint (server.address), slowest "
        "p50 first; null on the other levers.",
    )


class AdviceGroup(BaseModel):
    """A group of requests (default: route × model) with enough requests to advise on."""

    key: dict[str, str]
    count: int
    dominant: str = Field(description="The component with the most critical-path time in the group.")
    dominant_share: float = Field(description="Its share of the group's summed end-to-end time (0–1).")
    e2e_ns: AdvicePercentiles
    ttft_ns: AdvicePercentiles
    cost_per_request_usd: float | None = Field(
        description="US dollars for the group's mean request (mean input, cached-input and output "
        "tokens of the requests that reported them) at its model and provider; null: no price."
    )
    priced_requests: int = Field(description="Requests whose token counts the cost is computed from.")
    levers: list[AdviceLever] = Field(
        description="Recommended levers first, by p95 end-to-end saving; the others (with all=true) "
        "after them, each saying why not."
    )


class SmallGroup(BaseModel):
    key: dict[str, str]
    count: int


class AdviceResponse(BaseModel):
    """What to change first, per group of requests started in [since, until)."""

    since: datetime
    until: datetime
    by: list[str]
    min_requests: int = Field(description="Groups with fewer requests are listed under small_groups.")
    price_data: str | None = Field(
        description="The price data costs come from (offline); null: none installed."
    )
    method: list[str] = Field(description="How every estimate is made (docs/advice.md has the details).")
    groups: list[AdviceGroup] = Field(description="By request count, largest first.")
    small_groups: list[SmallGroup] = Field(description="Groups below min_requests (not advised on).")


__all__ = [
    "AdviceChange",
    "AdviceEndpoint",
    "AdviceGroup",
    "AdviceLever",
    "AdvicePercentiles",
    "AdviceResponse",
    "SmallGroup",
]
