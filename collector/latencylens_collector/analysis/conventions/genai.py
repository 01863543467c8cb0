"""OpenTelemetry GenAI semantic conventions (v1.41.0), current and deprecated names.

Our SDK writes these names; OpenLLMetry, OpenLIT and pydantic-ai write most of them too. The
names themselves live in :mod:`latencylens.semconv`; this module says what they mean here:

* An inference span covers the whole call, from issuing the request to the last chunk of a
  stream (the ``gen_ai.client.operation.duration`` interval).
* ``gen_ai.response.time_to_first_chunk`` is client-measured seconds from issuing the request to
  the first chunk, on streamed calls only.
* ``gen_ai.usage.*`` are the provider's billable counts; absent means not reported (unknown). The
  conventions define no estimate flag: a producer that estimates is recognised in its own module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from latencylens import semconv

OPERATION_EMBEDDINGS: Final = "embeddings"
"""``gen_ai.operation.name`` of an embeddings call."""

# gen_ai.operation.name -> our span kind. Embedding a query is part of fetching context, so it
# counts as retrieval; the model components describe generation calls.
KIND_BY_OPERATION: Final[Mapping[str, str]] = {
    semconv.OPERATION_CHAT: semconv.KIND_MODEL,
    semconv.OPERATION_TEXT_COMPLETION: semconv.KIND_MODEL,
    semconv.OPERATION_GENERATE_CONTENT: semconv.KIND_MODEL,
    semconv.OPERATION_RETRIEVAL: semconv.KIND_RETRIEVAL,
    OPERATION_EMBEDDINGS: semconv.KIND_RETRIEVAL,
    semconv.OPERATION_EXECUTE_TOOL: semconv.KIND_TOOL,
}

INPUT_TOKENS: Final = (semconv.GEN_AI_USAGE_INPUT_TOKENS, semconv.GEN_AI_USAGE_PROMPT_TOKENS_DEPRECATED)
OUTPUT_TOKENS: Final = (
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
    semconv.GEN_AI_USAGE_COMPLETION_TOKENS_DEPRECATED,
)
CACHE_READ_TOKENS: Final = (semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,)
MODEL: Final = (semconv.GEN_AI_RESPONSE_MODEL, semconv.GEN_AI_REQUEST_MODEL)
PROVIDER: Final = (semconv.GEN_AI_PROVIDER_NAME, semconv.GEN_AI_SYSTEM_DEPRECATED)
FIRST_CHUNK_SECONDS: Final = (semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,)
"""Client-measured seconds to the first chunk; present on streamed calls only."""
STREAMED: Final = (semconv.GEN_AI_REQUEST_STREAM,)


def kind(attributes: Mapping[str, str]) -> str | None:
    return KIND_BY_OPERATION.get(attributes.get(semconv.GEN_AI_OPERATION_NAME, ""))
