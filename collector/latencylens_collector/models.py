"""Response models of the query API (also the JSON the CLI reads)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


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
    parts: dict[str, int] = Field(description="Critical-path ns per component; sums to e2e_ns.")
    provenance: dict[str, str] = Field(description="Per component: reported, measured or derived.")
    inconsistent: bool = Field(description="A provider reported more server time than was measured.")
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    ttft_ns: int | None = Field(description="Time to first content of the primary model call.")
    itl_ns: int | None = Field(description="Mean inter-token latency of the primary model call.")
    decode_tokens_per_second: float | None
    model_calls: int
    span_count: int


class RequestList(BaseModel):
    """Requests, slowest first."""

    requests: list[RequestSummary]


class SpanTree(BaseModel):
    """A span with its children. Times are integer ns; ``start_ns`` is since the epoch."""

    span_id: str
    parent_span_id: str | None
    name: str
    kind: str = Field(description="request, model, retrieval, tool or other.")
    span_kind: str = Field(description="OpenTelemetry span kind.")
    service: str
    start_ns: int
    duration_ns: int
    self_ns: int = Field(description="Exclusive time: duration minus the union of its children.")
    critical_ns: int = Field(description="Share of the request's critical path this span owns.")
    status: str = Field(description="unset, ok or error.")
    status_message: str
    attributes: dict[str, str]
    children: list[SpanTree] = Field(default_factory=list)


class RequestDetail(RequestSummary):
    """One request with the busy view and its span tree."""

    busy: dict[str, int] = Field(description="Exclusive ns per component summed over all spans.")
    spans: list[SpanTree] = Field(description="Root span first; orphans hang under the root.")


class Health(BaseModel):
    status: str = "ok"
