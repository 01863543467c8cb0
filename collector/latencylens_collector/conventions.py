"""What a span means, whichever instrumentation produced it.

The collector reads spans from our SDK and from any OpenTelemetry source. This module is the one
place that maps attribute names onto our span kinds, model-call timing and token counts, so a new
convention (another instrumentation's names, a server's own span) is taught here only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from latencylens import semconv
from latencylens_collector.attribution import ModelTiming

KIND_OTHER: Final = "other"
KNOWN_KINDS: Final = frozenset(
    {semconv.KIND_REQUEST, semconv.KIND_MODEL, semconv.KIND_RETRIEVAL, semconv.KIND_TOOL, KIND_OTHER}
)
# gen_ai.operation.name values that are a model call (GenAI semantic conventions).
MODEL_OPERATIONS: Final = frozenset(
    {semconv.OPERATION_CHAT, semconv.OPERATION_TEXT_COMPLETION, semconv.OPERATION_GENERATE_CONTENT}
)


def classify(attributes: Mapping[str, str], has_parent: bool) -> str:
    """Our span kind: explicit ``latencylens.span.kind``, else from the GenAI operation name."""
    explicit = attributes.get(semconv.SPAN_KIND)
    if explicit in KNOWN_KINDS:
        return explicit
    operation = attributes.get(semconv.GEN_AI_OPERATION_NAME)
    if operation in MODEL_OPERATIONS:
        return semconv.KIND_MODEL
    if operation == semconv.OPERATION_RETRIEVAL:
        return semconv.KIND_RETRIEVAL
    if operation == semconv.OPERATION_EXECUTE_TOOL:
        return semconv.KIND_TOOL
    return KIND_OTHER if has_parent else semconv.KIND_REQUEST


def parse_int(value: str | None) -> int | None:
    """An attribute value as an integer (attributes are stored as text)."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return round(float(value))
    except (ValueError, OverflowError):
        return None


def first_int(attributes: Mapping[str, str], *keys: str) -> int | None:
    for key in keys:
        value = parse_int(attributes.get(key))
        if value is not None:
            return value
    return None


def model_timing(attributes: Mapping[str, str]) -> ModelTiming:
    """What the SDK recorded about a model call's server time and stream."""
    first = parse_int(attributes.get(semconv.STREAM_FIRST_CONTENT_NS))
    if first is None:
        try:
            seconds = float(attributes[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK])
            first = round(seconds * 1e9)
        except (KeyError, ValueError, OverflowError):
            first = None
    return ModelTiming(
        queue_ns=parse_int(attributes.get(semconv.PROVIDER_QUEUE_NS)),
        prefill_ns=parse_int(attributes.get(semconv.PROVIDER_PREFILL_NS)),
        decode_ns=parse_int(attributes.get(semconv.PROVIDER_DECODE_NS)),
        server_total_ns=parse_int(attributes.get(semconv.PROVIDER_SERVER_TOTAL_NS)),
        first_content_ns=first,
        last_chunk_ns=parse_int(attributes.get(semconv.STREAM_LAST_CHUNK_NS)),
    )


def model_name(attrs: Mapping[str, str]) -> str:
    """The model that answered, else the one asked for."""
    return attrs.get(semconv.GEN_AI_RESPONSE_MODEL) or attrs.get(semconv.GEN_AI_REQUEST_MODEL) or ""


def provider_name(attrs: Mapping[str, str]) -> str:
    """The provider, under the current or the deprecated GenAI name."""
    return attrs.get(semconv.GEN_AI_PROVIDER_NAME) or attrs.get(semconv.GEN_AI_SYSTEM_DEPRECATED) or ""


# Usage keys per row column; the deprecated names (vLLM, older instrumentations) are fallbacks.
TOKEN_KEYS: dict[str, tuple[str, ...]] = {
    "input_tokens": (semconv.GEN_AI_USAGE_INPUT_TOKENS, semconv.GEN_AI_USAGE_PROMPT_TOKENS_DEPRECATED),
    "output_tokens": (semconv.GEN_AI_USAGE_OUTPUT_TOKENS, semconv.GEN_AI_USAGE_COMPLETION_TOKENS_DEPRECATED),
    "cache_read_input_tokens": (semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,),
}
