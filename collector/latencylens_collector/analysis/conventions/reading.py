"""Per-span reading: whichever convention wrote a model span, its facts under our names.

:func:`canonical_attributes` copies tokens, model, provider and stream timing found under another
instrumentation's names onto the names our SDK writes, so everything downstream (attribution,
request rows) reads one set of names. It only fills gaps: a name already present is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from latencylens import semconv
from latencylens_collector.analysis.attribution import ModelTiming
from latencylens_collector.analysis.conventions import (
    aisdk,
    genai,
    logfire,
    openinference,
    openlit,
    openllmetry,
    vllm,
)
from latencylens_collector.analysis.conventions.events import FIRST_CONTENT_NS, LAST_CHUNK_NS
from latencylens_collector.analysis.conventions.values import (
    first_int,
    first_ms_ns,
    first_seconds_ns,
    first_text,
    parse_int,
)

INPUT_TOKEN_KEYS: Final = (*genai.INPUT_TOKENS, *openinference.INPUT_TOKENS, *aisdk.INPUT_TOKENS)
OUTPUT_TOKEN_KEYS: Final = (*genai.OUTPUT_TOKENS, *openinference.OUTPUT_TOKENS, *aisdk.OUTPUT_TOKENS)
TOTAL_TOKEN_KEYS: Final = (*openllmetry.TOTAL_TOKENS, *openinference.TOTAL_TOKENS)
CACHE_READ_TOKEN_KEYS: Final = (
    *genai.CACHE_READ_TOKENS,
    *openllmetry.CACHE_READ_TOKENS,
    *openinference.CACHE_READ_TOKENS,
    *openlit.CACHE_READ_TOKENS,
    *vllm.CACHE_READ_TOKENS,
    *aisdk.CACHE_READ_TOKENS,
)
MODEL_KEYS: Final = (*genai.MODEL, *openinference.MODEL, *aisdk.MODEL)
PROVIDER_KEYS: Final = (*genai.PROVIDER, *openinference.PROVIDER)
FIRST_CHUNK_SECONDS_KEYS: Final = (*genai.FIRST_CHUNK_SECONDS, *logfire.FIRST_CHUNK_SECONDS)
"""Client-measured seconds to the first chunk, written on streamed calls only."""
FIRST_CHUNK_MS_KEYS: Final = aisdk.FIRST_CHUNK_MS
"""The same in milliseconds."""
LAST_CHUNK_MS_KEYS: Final = aisdk.FINISH_MS
"""Client-measured milliseconds to the stream's last part (the AI SDK's finish part)."""
_OWN_STREAM_PREFIX: Final = semconv.STREAM_COMPLETED.rsplit(".", 1)[0] + "."

# Usage keys per request-row column, canonical name first.
TOKEN_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "input_tokens": INPUT_TOKEN_KEYS,
    "output_tokens": OUTPUT_TOKEN_KEYS,
    "cache_read_input_tokens": CACHE_READ_TOKEN_KEYS,
}


def token_counts(attributes: Mapping[str, str]) -> dict[str, int]:
    """Input, output and cache-read tokens under any known name (absent ones omitted).

    A total alone (OpenLLMetry's ``llm.usage.total_tokens``, OpenInference's
    ``llm.token_count.total``) completes whichever of input or output is missing.
    """
    found = {
        semconv.GEN_AI_USAGE_INPUT_TOKENS: first_int(attributes, *INPUT_TOKEN_KEYS),
        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: first_int(attributes, *OUTPUT_TOKEN_KEYS),
        semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: first_int(attributes, *CACHE_READ_TOKEN_KEYS),
    }
    total = first_int(attributes, *TOTAL_TOKEN_KEYS)
    inputs, outputs = found[semconv.GEN_AI_USAGE_INPUT_TOKENS], found[semconv.GEN_AI_USAGE_OUTPUT_TOKENS]
    if total is not None and (inputs is None) != (outputs is None):
        if inputs is None and outputs is not None and total >= outputs:
            found[semconv.GEN_AI_USAGE_INPUT_TOKENS] = total - outputs
        elif outputs is None and inputs is not None and total >= inputs:
            found[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = total - inputs
    return {key: value for key, value in found.items() if value is not None}


def first_chunk_ns(attributes: Mapping[str, str]) -> int | None:
    """Client-measured ns from call start to the first content, under any known name."""
    own = parse_int(attributes.get(semconv.STREAM_FIRST_CONTENT_NS))
    if own is not None:
        return own
    first = first_seconds_ns(attributes, *FIRST_CHUNK_SECONDS_KEYS)
    if first is None:
        first = first_ms_ns(attributes, *FIRST_CHUNK_MS_KEYS)
    # OpenLIT's gen_ai.server.time_to_first_token starts after the headers, not at the call's
    # start: it is read with the trace (openlit.with_stream_start), never here.
    return first


def canonical_attributes(attributes: Mapping[str, str], duration_ns: int) -> dict[str, str]:
    """A model span's attributes with tokens, model, provider and stream timing under our names.

    Other instrumentations end a streamed call's span when its last chunk arrives, and record no
    last-chunk time: for them the last chunk is taken as the span's end, so decode is measured as
    end − first chunk. Our SDK records both itself (``latencylens.stream.*``). Chunk events
    (:mod:`.events`, summarised at decode) give the first content when no attribute does, and the
    last chunk; they are not read when our SDK recorded the stream.
    """
    result = dict(attributes)
    for key, value in token_counts(attributes).items():
        result.setdefault(key, str(value))
    model = first_text(attributes, *MODEL_KEYS)
    if model and not first_text(attributes, *genai.MODEL):
        result[semconv.GEN_AI_RESPONSE_MODEL] = model
    provider = provider_name(attributes)
    if provider and not attributes.get(semconv.GEN_AI_PROVIDER_NAME):
        result[semconv.GEN_AI_PROVIDER_NAME] = provider
    # Whether our SDK recorded the stream is asked only where it matters: it scans every key.
    first = first_chunk_ns(attributes)
    if first is None:
        from_events = parse_int(attributes.get(FIRST_CONTENT_NS))
        if from_events is not None and not _own_stream_record(attributes):
            first = from_events
    if first is not None and semconv.STREAM_FIRST_CONTENT_NS not in attributes:
        result[semconv.STREAM_FIRST_CONTENT_NS] = str(first)
        last = parse_int(attributes.get(LAST_CHUNK_NS))
        if last is None:
            last = first_ms_ns(attributes, *LAST_CHUNK_MS_KEYS)
        if last is None or last < first:
            last = duration_ns
        if last >= first and not _own_stream_record(attributes):
            result[semconv.STREAM_LAST_CHUNK_NS] = str(last)
    return result


def _own_stream_record(attributes: Mapping[str, str]) -> bool:
    """Whether our SDK measured the stream itself (it writes ``latencylens.stream.*``)."""
    return any(key.startswith(_OWN_STREAM_PREFIX) for key in attributes)


def model_timing(attributes: Mapping[str, str]) -> ModelTiming:
    """What is known about a model call's server time and stream (integer ns)."""
    return ModelTiming(
        queue_ns=parse_int(attributes.get(semconv.PROVIDER_QUEUE_NS)),
        prefill_ns=parse_int(attributes.get(semconv.PROVIDER_PREFILL_NS)),
        decode_ns=parse_int(attributes.get(semconv.PROVIDER_DECODE_NS)),
        server_total_ns=parse_int(attributes.get(semconv.PROVIDER_SERVER_TOTAL_NS)),
        inference_ns=parse_int(attributes.get(semconv.PROVIDER_INFERENCE_NS)),
        first_content_ns=first_chunk_ns(attributes),
        last_chunk_ns=parse_int(attributes.get(semconv.STREAM_LAST_CHUNK_NS)),
    )


def usage_estimated(attributes: Mapping[str, str]) -> bool:
    """Whether a model span's token counts are an instrumentation's estimate, not the provider's
    usage: OpenLIT's own (:func:`.openlit.usage_estimated`; the others leave counts out when the
    provider sent none, which reads as unknown), or taken from such a span of the same call
    (:data:`~latencylens.semconv.PROVENANCE_USAGE`)."""
    return attributes.get(semconv.PROVENANCE_USAGE) == semconv.SOURCE_ESTIMATED or openlit.usage_estimated(
        attributes
    )


def model_name(attributes: Mapping[str, str]) -> str:
    """The model that answered, else the one asked for."""
    return first_text(attributes, *MODEL_KEYS)


def provider_name(attributes: Mapping[str, str]) -> str:
    """The provider, under the current, the deprecated or another instrumentation's name (the AI
    SDK's ``openai.chat``, also its deprecated ``gen_ai.system``, is ``openai``)."""
    return (
        attributes.get(semconv.GEN_AI_PROVIDER_NAME)
        or aisdk.provider(attributes)
        or first_text(attributes, *PROVIDER_KEYS)
    )
