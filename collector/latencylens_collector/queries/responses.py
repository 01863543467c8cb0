"""Response models of the query API (also the JSON the CLI reads)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from latencylens_collector.analysis.attribution import COMPONENTS
from latencylens_collector.analysis.vocabulary import label, parts_description

_COMPONENTS: str = ", ".join(COMPONENTS)
_PARTS: str = parts_description()


class RequestSummary(BaseModel):
    """One request (trace): end-to-end time and where it went."""

    trace_id: str = Field(description="32 lowercase hex characters.")
    start_time: datetime = Field(description="Start of the root span (UTC).")
    service: str = Field(description="Service of the root span.")
    name: str = Field(description="Root span name, usually the route.")
    model: str = Field(description="Model of the call that owned most of the critical path.")
    provider: str
    status_error: bool = Field(description="The root span ended with an error status.")
    e2e_ns: int = Field(description="Duration of the root span.")
    parts: dict[str, int] = Field(
        description=f"Critical-path ns per component; sums to e2e_ns. Keys, with the label every surface "
        f"shows and their meaning (docs/glossary.md): {_PARTS}."
    )
    provenance: dict[str, str] = Field(
        description="Per component: reported, measured or derived; under ttft, where ttft_ns came from "
        "(measured by a client, or reported by a server such as vLLM); under trace, too_large when the "
        "trace had more spans than max_trace_spans (the parts are then those of its spans under the cap)."
    )
    inconsistent: bool = Field(
        description="A provider's timing did not add up: more server time than was measured (parts clipped), "
        "or a total below its own parts (their sum used)."
    )
    input_tokens: int | None = Field(
        description="Input tokens over all model calls; null when a call did not report them (unknown)."
    )
    output_tokens: int | None = Field(
        description="Output tokens over all model calls; null when a call did not report them (unknown)."
    )
    cache_read_input_tokens: int | None = Field(
        description="Input tokens read from the provider's cache; null when a call did not report them."
    )
    tokens_estimated: bool = Field(
        default=False,
        description="The token counts include an instrumentation's estimate, not only providers' usage.",
    )
    ttft_ns: int | None = Field(
        description=f"{label('ttft_ns')}: time to first content of the primary model call."
    )
    itl_ns: int | None = Field(
        description=f"{label('itl_ns')}: mean inter-token latency of the primary model call."
    )
    decode_tokens_per_second: float | None = Field(
        default=None,
        description=f"{label('decode_tokens_per_second')}: output tokens / the primary call's decode time (a "
        "span's latencylens.stream.output_tokens_per_second also counts the wait for the first token).",
    )
    model_calls: int
    span_count: int
    root_missing: bool = Field(
        default=False,
        description="The trace's root span never arrived (an upstream service that does not export): "
        "the request is rooted at its top-most received span, so e2e_ns covers that span only.",
    )


class RequestList(BaseModel):
    """Requests, slowest first."""

    requests: list[RequestSummary]
    next_cursor: str | None = Field(
        default=None, description="Pass as ``cursor`` for the next page; null on the last page."
    )


class SpanTree(BaseModel):
    """A span with its children. Times are integer ns; ``start_ns`` is since the epoch."""

    span_id: str
    parent_span_id: str | None
    name: str = Field(description="Span name; a Logfire span shows its rendered message (logfire.msg).")
    kind: str = Field(description="request, model, retrieval, tool or other.")
    span_kind: str = Field(description="OpenTelemetry span kind.")
    service: str
    start_ns: int
    duration_ns: int
    self_ns: int = Field(description="Exclusive time: duration minus the union of its children.")
    critical_ns: int = Field(description="Share of the request's critical path this span owns.")
    critical_share: float = Field(description="critical_ns / the request's e2e_ns (0–1).")
    status: str = Field(description="unset, ok or error.")
    status_message: str
    attributes: dict[str, str]
    children: list[SpanTree] = Field(default_factory=list)


class Explanation(BaseModel):
    """The component that dominated a request's critical path, and how it is known."""

    dominant: str = Field(description="The largest critical-path component.")
    dominant_ns: int
    share: float = Field(description="dominant_ns / e2e_ns (0–1).")
    provenance: str = Field(description="reported, measured or derived.")
    sentence: str = Field(description="One plain sentence saying where the time went.")


class RequestDetail(RequestSummary):
    """One request with the busy view, an explanation and its span tree."""

    busy: dict[str, int] = Field(description="Exclusive ns per component summed over all spans.")
    explanation: Explanation
    spans: list[SpanTree] = Field(description="Root span first; orphans hang under the root.")
    cost_usd: float | None = Field(
        default=None,
        description="US dollars for the request's tokens at its model and provider (genai-prices' bundled "
        "data, offline); null when the data has no price for them, a count was not reported, or the "
        "request made more than one model call (their models are not all known here).",
    )
    price_data: str | None = Field(default=None, description="The price data cost_usd comes from.")


class Quantiles(BaseModel):
    """Percentiles in integer ns; null when the group has no value for the metric."""

    p50: int | None
    p90: int | None
    p95: int | None
    p99: int | None


class ComponentStats(Quantiles):
    """A component's percentiles over requests and its share of the group's total time."""

    share: float | None = Field(description="Sum of this component / sum of e2e (0–1).")


class CostStats(BaseModel):
    """What the group's requests cost, priced at ingest (US dollars; genai-prices' bundled data or
    the configured prices). Requests without a price (a model the data does not know, a count not
    reported) are counted in ``no_price`` and left out of every figure, never counted as 0."""

    total_usd: float | None = Field(description="Sum over the priced requests; null when none is priced.")
    mean_usd: float | None = Field(description="Cost per priced request; null when none is priced.")
    p50_usd: float | None = Field(description="Median cost per priced request (8 significant bits).")
    p95_usd: float | None = Field(description="95th percentile cost per priced request (8 significant bits).")
    priced: int = Field(description="Requests with a price.")
    no_price: int = Field(description="Requests without a price (also those stored before costs were kept).")


class StatsGroup(BaseModel):
    """Aggregates of one group (and time bucket)."""

    key: dict[str, str] = Field(description="Group-by field → value; empty without group-by.")
    bucket_start: datetime | None
    count: int
    e2e_ns: Quantiles
    ttft_ns: Quantiles
    itl_ns: Quantiles
    components: dict[str, ComponentStats] = Field(description=f"Per component: {_COMPONENTS}.")
    output_tokens_per_second: float | None = Field(
        description=f"Mean {label('decode_tokens_per_second')} (output tokens / decode time) of the primary "
        "call, over requests with reported output tokens."
    )
    cached_token_ratio: float | None = Field(
        description="Cache-read input tokens / input tokens, over requests whose counts were both "
        "reported (unknown and estimated counts are left out)."
    )
    cost: CostStats | None = Field(default=None, description="What the requests cost.")


class StatsResponse(BaseModel):
    """Aggregates of requests in [since, until)."""

    since: datetime
    until: datetime
    by: list[str]
    bucket: str | None
    groups: list[StatsGroup]


class CompareSide(BaseModel):
    count: int
    value_ns: int | None
    cost_per_request_usd: float | None = Field(
        default=None, description="Mean cost of the range's priced requests; null when none is priced."
    )
    no_price: int = Field(default=0, description="Requests of the range without a price (left out).")


class ComponentDelta(BaseModel):
    name: str
    a_ns: int | None
    b_ns: int | None
    delta_ns: int | None


class CompareGroup(BaseModel):
    key: dict[str, str]
    a_ns: int | None
    b_ns: int | None
    delta_ns: int | None
    top_component: str | None
    top_component_delta_ns: int | None
    a_cost_per_request_usd: float | None = None
    b_cost_per_request_usd: float | None = None
    cost_ratio: float | None = Field(default=None, description="b / a of the cost per request.")


class CompareResponse(BaseModel):
    """A metric's percentile in two time ranges, what changed most, and where."""

    metric: str
    quantile: str
    a: CompareSide
    b: CompareSide
    delta_ns: int | None = Field(description="b − a.")
    cost_ratio: float | None = Field(
        default=None,
        description="b's cost per request / a's: 1.25 is 25 % dearer per request; null when either "
        "side has no priced request.",
    )
    components: list[ComponentDelta] = Field(description="The metric's components, by |delta| desc.")
    groups: list[CompareGroup] = Field(description="By |delta| desc; groups seen in both ranges first.")
    summary: str


class TraceIdMatches(BaseModel):
    """Stored trace ids that start with a given prefix, in order."""

    trace_ids: list[str] = Field(description="32 lowercase hex characters each; at most the limit.")
    truncated: bool = Field(description="More trace ids match than are listed.")


class Health(BaseModel):
    status: str = "ok"
