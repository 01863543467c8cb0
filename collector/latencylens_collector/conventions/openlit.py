"""OpenLIT (``openlit``): GenAI semconv names, plus timing and usage names of its own.

Names as in ``openlit`` 1.45 (``openlit/semcov``). Its ``gen_ai.server.time_to_first_token`` span
attribute is measured in the client (request start to first chunk), despite the name; on calls that
did not stream it is the whole call's duration, so it is read only for streamed calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from latencylens import semconv

GEN_AI_SERVER_TIME_TO_FIRST_TOKEN: Final = "gen_ai.server.time_to_first_token"
"""Seconds from request start to the first chunk (client-measured in OpenLIT)."""
GEN_AI_SERVER_TIME_PER_OUTPUT_TOKEN: Final = "gen_ai.server.time_per_output_token"
"""Mean seconds between chunks (client-measured in OpenLIT); informational."""
GEN_AI_USAGE_PROMPT_CACHED_TOKENS: Final = "gen_ai.usage.prompt_tokens_details.cached_tokens"
"""Cached input tokens as OpenAI reports them (OpenLIT's name)."""
OPERATION_VECTORDB: Final = "vectordb"
"""``gen_ai.operation.name`` of OpenLIT's vector-database spans."""

KIND_BY_OPERATION: Final[Mapping[str, str]] = {OPERATION_VECTORDB: semconv.KIND_RETRIEVAL}
FIRST_CHUNK_SECONDS_WHEN_STREAMED: Final = (GEN_AI_SERVER_TIME_TO_FIRST_TOKEN,)
CACHE_READ_TOKENS: Final = (GEN_AI_USAGE_PROMPT_CACHED_TOKENS,)


def kind(attributes: Mapping[str, str]) -> str | None:
    return KIND_BY_OPERATION.get(attributes.get(semconv.GEN_AI_OPERATION_NAME, ""))
