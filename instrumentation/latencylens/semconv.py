"""Every span attribute name LatencyLens reads or writes, defined once.

OpenTelemetry GenAI semantic-convention names (v1.41.0) come first; names of our own live under
``latencylens.``. Durations of our own are integer nanoseconds and say so in their name (``_ns``).
The collector imports this module too, so producer and consumer can never disagree on a key.
"""

from __future__ import annotations

from typing import Final

# --- OpenTelemetry GenAI semantic conventions (v1.41.0) -------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
"""What the span does: ``chat``, ``text_completion``, ``retrieval``, ``execute_tool``, ..."""
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
"""Who served a model call: ``openai``, ``groq``, ``anthropic``, ..."""
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
"""Model the caller asked for."""
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
"""Model that answered, as the provider reports it."""
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
"""Provider's id of the completion, e.g. ``chatcmpl-123``."""
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
"""Finish reasons, one per choice (string array)."""
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
"""True when the model call returned a stream."""
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
"""Seconds (double) from request start to the first non-empty content chunk, client-measured."""
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
"""All input tokens, cached ones included."""
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
"""All output tokens, reasoning ones included."""
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
"""Input tokens served from the provider's prompt cache (a subset of input tokens)."""
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
"""Input tokens written to the provider's prompt cache (a subset of input tokens)."""
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
"""Output tokens spent reasoning (a subset of output tokens)."""
GEN_AI_DATA_SOURCE_ID: Final = "gen_ai.data_source.id"
"""Store a retrieval read from (index, collection, table)."""
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
"""Name of the tool a tool-call span executed."""
ERROR_TYPE: Final = "error.type"
"""Class of the error that ended the operation."""
SERVER_ADDRESS: Final = "server.address"
"""Host the model call went to."""
SERVER_PORT: Final = "server.port"
"""Port the model call went to."""

# Deprecated GenAI names still emitted by some producers (vLLM, older instrumentations).
GEN_AI_SYSTEM_DEPRECATED: Final = "gen_ai.system"
"""Deprecated for ``gen_ai.provider.name``."""
GEN_AI_USAGE_PROMPT_TOKENS_DEPRECATED: Final = "gen_ai.usage.prompt_tokens"
"""Deprecated for ``gen_ai.usage.input_tokens``."""
GEN_AI_USAGE_COMPLETION_TOKENS_DEPRECATED: Final = "gen_ai.usage.completion_tokens"
"""Deprecated for ``gen_ai.usage.output_tokens``."""

# Operation names (values of gen_ai.operation.name).
OPERATION_CHAT: Final = "chat"
OPERATION_TEXT_COMPLETION: Final = "text_completion"
OPERATION_GENERATE_CONTENT: Final = "generate_content"
OPERATION_RETRIEVAL: Final = "retrieval"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"

# --- LatencyLens's own attributes ----------------------------------------------------------------
SPAN_KIND: Final = "latencylens.span.kind"
"""Which kind of work a span is: one of ``request``, ``model``, ``retrieval``, ``tool``."""

# Span-kind values.
KIND_REQUEST: Final = "request"
KIND_MODEL: Final = "model"
KIND_RETRIEVAL: Final = "retrieval"
KIND_TOOL: Final = "tool"

# Provider-reported server time, normalised by the provider adapters to integer nanoseconds.
PROVIDER_QUEUE_NS: Final = "latencylens.provider.queue_ns"
"""ns the request waited in the provider's queue, as the provider reported it."""
PROVIDER_PREFILL_NS: Final = "latencylens.provider.prefill_ns"
"""ns the provider spent processing the prompt (prefill), as reported."""
PROVIDER_DECODE_NS: Final = "latencylens.provider.decode_ns"
"""ns the provider spent generating output tokens (decode), as reported."""
PROVIDER_SERVER_TOTAL_NS: Final = "latencylens.provider.server_total_ns"
"""ns of all server-side time for the call (queue included), as reported or summed from reports."""
PROVIDER_INFERENCE_NS: Final = "latencylens.provider.inference_ns"
"""ns of prefill + decode together, where the provider does not split them (TGI ``x-inference-time``)."""
PROVIDER_FIELDS_REPORTED: Final = "latencylens.provider.fields_reported"
"""Provider fields the adapter found in the response (string array), e.g. ``usage.queue_time``."""
PROVIDER_FIELDS_MISSING: Final = "latencylens.provider.fields_missing"
"""Fields the adapter expected but did not find (string array): the response shape was not known."""
PROVIDER_EXTRACT_ERRORS: Final = "latencylens.provider.extract_errors"
"""Count of failures inside extraction; the user's call was not affected."""

# Client-side streaming measurements, offsets from the span's start in integer nanoseconds.
STREAM_FIRST_CONTENT_NS: Final = "latencylens.stream.first_content_ns"
"""ns from call start to the first chunk with non-empty content (TTFT, client-measured)."""
STREAM_LAST_CHUNK_NS: Final = "latencylens.stream.last_chunk_ns"
"""ns from call start to the end of generation, where decode ends: the last chunk received, or the
last content chunk when the provider's stream ends with bookkeeping events (Anthropic)."""
STREAM_CHUNKS: Final = "latencylens.stream.chunks"
"""Number of chunks the stream delivered (all of them, empty ones included)."""
STREAM_CONTENT_CHUNKS: Final = "latencylens.stream.content_chunks"
"""Number of chunks that carried non-empty content."""
STREAM_COMPLETED: Final = "latencylens.stream.completed"
"""False when the caller abandoned the stream or it failed before the end."""
STREAM_END_REASON: Final = "latencylens.stream.end_reason"
"""How the stream ended: ``completed``, ``abandoned`` (closed or dropped early) or ``error``."""
STREAM_ITL_NS: Final = "latencylens.stream.itl_ns"
"""Inter-token latency, ns (NVIDIA): (last chunk − first content chunk) / (output tokens − 1)."""
STREAM_OUTPUT_TOKENS_PER_SECOND: Final = "latencylens.stream.output_tokens_per_second"
"""Output tokens per second of this request (double): output tokens / (last chunk − call start)."""
STREAM_GAP_MEAN_NS: Final = "latencylens.stream.gap.mean_ns"
"""Mean ns between consecutive content chunks (integer, rounded down)."""
STREAM_GAP_P50_NS: Final = "latencylens.stream.gap.p50_ns"
"""Median ns between consecutive content chunks (nearest-rank percentile)."""
STREAM_GAP_P90_NS: Final = "latencylens.stream.gap.p90_ns"
"""90th percentile ns between consecutive content chunks (nearest-rank)."""
STREAM_GAP_P99_NS: Final = "latencylens.stream.gap.p99_ns"
"""99th percentile ns between consecutive content chunks (nearest-rank)."""
STREAM_GAP_MAX_NS: Final = "latencylens.stream.gap.max_ns"
"""Longest ns between consecutive content chunks (the worst stall the user saw)."""

# Provenance of each timing: was it reported by the provider, derived from reported fields, or measured
# on the client clock? Values are the PROVENANCE_* constants below.
PROVENANCE_QUEUE: Final = "latencylens.provenance.queue"
"""Source of ``latencylens.provider.queue_ns``."""
PROVENANCE_PREFILL: Final = "latencylens.provenance.prefill"
"""Source of ``latencylens.provider.prefill_ns``."""
PROVENANCE_DECODE: Final = "latencylens.provenance.decode"
"""Source of ``latencylens.provider.decode_ns``."""
PROVENANCE_INFERENCE: Final = "latencylens.provenance.inference"
"""Source of ``latencylens.provider.inference_ns``."""
PROVENANCE_SERVER_TOTAL: Final = "latencylens.provenance.server_total"
"""Source of ``latencylens.provider.server_total_ns``."""
PROVENANCE_TTFT: Final = "latencylens.provenance.ttft"
"""Source of ``latencylens.stream.first_content_ns`` (always ``measured``)."""
PROVENANCE_ITL: Final = "latencylens.provenance.itl"
"""Source of ``latencylens.stream.itl_ns``: ``measured`` (token count from usage) or ``estimated``
(usage never came, so content chunks stand in for tokens)."""

# Provenance values.
SOURCE_REPORTED: Final = "reported"
SOURCE_DERIVED: Final = "derived"
SOURCE_MEASURED: Final = "measured"
SOURCE_ESTIMATED: Final = "estimated"

# Values of latencylens.stream.end_reason.
END_COMPLETED: Final = "completed"
END_ABANDONED: Final = "abandoned"
END_ERROR: Final = "error"

# Derived by the collector when it reads a whole trace; the SDK never writes these.
SAME_CALL_AS: Final = "latencylens.same_call_as"
"""On a span that describes a model call another span counts: that span's id (hex). It owns no time."""
WRAPS_MODEL_CALLS: Final = "latencylens.wraps_model_calls"
"""On a model span around several model calls: how many; it is application work around them."""
PROVENANCE_USAGE: Final = "latencylens.provenance.usage"
"""On a model call whose token counts were taken from another span of the same call:
``estimated`` when that span's counts were its instrumentation's estimate (OpenLIT's)."""

# Written by the collector at intake when a span or trace is over a limit (docs/collector.md#limits).
SPAN_BUDGET_CUT_BYTES: Final = "latencylens.span_budget.cut_bytes"
"""UTF-8 bytes removed from the span's attributes (and its events') to fit the per-span budget."""
SPAN_BUDGET_DROPPED_ATTRIBUTES: Final = "latencylens.span_budget.dropped_attributes"
"""Attributes dropped whole to fit the per-span budget (only when cutting values was not enough)."""
TRACE_TOO_LARGE: Final = "latencylens.trace.too_large"
"""``true`` on each span admitted after its trace already had the per-trace span cap: the trace is
stored whole but too large to attribute."""

# Set by ``latencylens replay`` on every span of a replayed request (docs/replay.md).
REPLAY_RUN_ID: Final = "latencylens.replay.run_id"
"""The replay run that sent this request (a string id printed by ``latencylens replay``)."""
REPLAY_SOURCE_TRACE_ID: Final = "latencylens.replay.source_trace_id"
"""Hex trace id of the recorded request whose shape this replayed request copies."""

ALL_OWN_ATTRIBUTES: Final = (
    SPAN_KIND,
    PROVIDER_QUEUE_NS,
    PROVIDER_PREFILL_NS,
    PROVIDER_DECODE_NS,
    PROVIDER_SERVER_TOTAL_NS,
    PROVIDER_FIELDS_REPORTED,
    PROVIDER_FIELDS_MISSING,
    PROVIDER_EXTRACT_ERRORS,
    STREAM_FIRST_CONTENT_NS,
    STREAM_LAST_CHUNK_NS,
    STREAM_CHUNKS,
    STREAM_CONTENT_CHUNKS,
    STREAM_COMPLETED,
    PROVIDER_INFERENCE_NS,
    STREAM_END_REASON,
    STREAM_ITL_NS,
    STREAM_OUTPUT_TOKENS_PER_SECOND,
    STREAM_GAP_MEAN_NS,
    STREAM_GAP_P50_NS,
    STREAM_GAP_P90_NS,
    STREAM_GAP_P99_NS,
    STREAM_GAP_MAX_NS,
    PROVENANCE_QUEUE,
    PROVENANCE_PREFILL,
    PROVENANCE_DECODE,
    PROVENANCE_INFERENCE,
    PROVENANCE_SERVER_TOTAL,
    PROVENANCE_TTFT,
    PROVENANCE_ITL,
    SAME_CALL_AS,
    WRAPS_MODEL_CALLS,
    PROVENANCE_USAGE,
    SPAN_BUDGET_CUT_BYTES,
    SPAN_BUDGET_DROPPED_ATTRIBUTES,
    TRACE_TOO_LARGE,
    REPLAY_RUN_ID,
    REPLAY_SOURCE_TRACE_ID,
)
"""Every ``latencylens.`` name above, for tests that pin the namespace."""
