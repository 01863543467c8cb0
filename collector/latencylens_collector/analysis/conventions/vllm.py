"""vLLM's per-request server span (``llm_request``, kind SERVER).

vLLM honours an incoming ``traceparent``, so its span is a child of the client's model-call span
(possibly via an HTTP client span). Names and units as in ``vllm/tracing/utils.py``
(``SpanAttributes``); every ``gen_ai.latency.*`` value is in seconds. Usage uses the deprecated
GenAI names (``gen_ai.usage.prompt_tokens`` / ``completion_tokens``), read by :mod:`.genai`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from latencylens import semconv
from latencylens_collector.analysis.conventions.values import first_seconds_ns

SPAN_NAME: Final = "llm_request"
"""Name of vLLM's per-request span."""
PROVIDER: Final = "vllm"
"""Provider name given to calls that only vLLM's span describes."""

GEN_AI_LATENCY_TIME_IN_QUEUE: Final = "gen_ai.latency.time_in_queue"
"""Seconds waiting in the scheduler queue (scheduled − queued)."""
GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL: Final = "gen_ai.latency.time_in_model_prefill"
"""Seconds of prefill (first token − scheduled)."""
GEN_AI_LATENCY_TIME_IN_MODEL_DECODE: Final = "gen_ai.latency.time_in_model_decode"
"""Seconds of decode (last token − first token)."""
GEN_AI_LATENCY_TIME_IN_MODEL_INFERENCE: Final = "gen_ai.latency.time_in_model_inference"
"""Seconds of prefill + decode (last token − scheduled)."""
GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN: Final = "gen_ai.latency.time_to_first_token"
"""Seconds from arrival to the first token (tokenization + queue + prefill)."""
GEN_AI_LATENCY_E2E: Final = "gen_ai.latency.e2e"
"""Seconds from arrival to the last token: the server's whole time for the request."""
GEN_AI_USAGE_CACHED_TOKENS: Final = "gen_ai.usage.cached_tokens"
"""Prompt tokens served from the prefix cache (defined by vLLM; not emitted by every release)."""

LATENCY_KEYS: Final = (
    GEN_AI_LATENCY_TIME_IN_QUEUE,
    GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL,
    GEN_AI_LATENCY_TIME_IN_MODEL_DECODE,
    GEN_AI_LATENCY_TIME_IN_MODEL_INFERENCE,
    GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN,
    GEN_AI_LATENCY_E2E,
)
CACHE_READ_TOKENS: Final = (GEN_AI_USAGE_CACHED_TOKENS,)


_LATENCY_KEY_SET: Final = frozenset(LATENCY_KEYS)


def is_server_span(attributes: Mapping[str, str]) -> bool:
    """A vLLM request span, or SGLang's (which reuses the names; :mod:`.sglang` tells them apart):
    it carries vLLM's latency attributes (whatever the span's name).

    Asked of every span at decode and again per trace: one C-level set test, no Python loop."""
    if type(attributes) is dict:
        return not _LATENCY_KEY_SET.isdisjoint(attributes)
    return any(key in attributes for key in LATENCY_KEYS)


def server_timing(attributes: Mapping[str, str]) -> dict[str, int]:
    """vLLM's reported queue, prefill, decode and server total (e2e) under our ``latencylens.``
    names, in integer ns; absent ones omitted. Decode falls back to inference − prefill."""
    queue = first_seconds_ns(attributes, GEN_AI_LATENCY_TIME_IN_QUEUE)
    prefill = first_seconds_ns(attributes, GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL)
    decode = first_seconds_ns(attributes, GEN_AI_LATENCY_TIME_IN_MODEL_DECODE)
    inference = first_seconds_ns(attributes, GEN_AI_LATENCY_TIME_IN_MODEL_INFERENCE)
    if decode is None and inference is not None and prefill is not None and inference >= prefill:
        decode = inference - prefill
    e2e = first_seconds_ns(attributes, GEN_AI_LATENCY_E2E)
    values = {
        semconv.PROVIDER_QUEUE_NS: queue,
        semconv.PROVIDER_PREFILL_NS: prefill,
        semconv.PROVIDER_DECODE_NS: decode,
        semconv.PROVIDER_SERVER_TOTAL_NS: e2e,
    }
    return {key: value for key, value in values.items() if value is not None}


def server_stream_offsets(attributes: Mapping[str, str]) -> dict[str, int]:
    """First and last token as offsets from the span's start, for calls only vLLM describes."""
    first = first_seconds_ns(attributes, GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN)
    last = first_seconds_ns(attributes, GEN_AI_LATENCY_E2E)
    values = {semconv.STREAM_FIRST_CONTENT_NS: first, semconv.STREAM_LAST_CHUNK_NS: last}
    return {key: value for key, value in values.items() if value is not None}


def reported_first_token(client: Mapping[str, str], server: Mapping[str, str]) -> dict[str, str]:
    """vLLM's time to first token (and e2e as the last token) for a client call that measured no
    first content, marked ``reported`` (``latencylens.provenance.ttft``); empty otherwise.

    vLLM counts from the request's arrival at the server, so this TTFT leaves out the network to
    and from it: it is the server's share of the client's TTFT, never more."""
    if semconv.STREAM_FIRST_CONTENT_NS in client:
        return {}
    offsets = server_stream_offsets(server)
    if semconv.STREAM_FIRST_CONTENT_NS not in offsets:
        return {}
    found = {key: str(value) for key, value in offsets.items() if key not in client}
    found[semconv.PROVENANCE_TTFT] = semconv.SOURCE_REPORTED
    return found
