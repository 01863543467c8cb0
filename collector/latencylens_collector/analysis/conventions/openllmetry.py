"""OpenLLMetry (Traceloop: ``traceloop-sdk`` and the ``opentelemetry-instrumentation-*`` packages).

Names as in ``opentelemetry-semantic-conventions-ai`` 0.5 (``SpanAttributes``); older releases
wrote ``llm.*`` names and the deprecated GenAI usage names, which are read too. Current releases
also write ``gen_ai.operation.name``, so :mod:`.genai` classifies their model spans first.

Meanings observed with ``opentelemetry-instrumentation-openai`` 0.62 around the real ``openai``
SDK: the ``openai.chat`` span (CLIENT) starts before the request and, when streamed, ends when the
stream is exhausted; it records no time-to-first-token attribute but one span event,
``gen_ai.content.completion.chunk``, per chunk of any kind (the first may be a role-only chunk).
Usage is the provider's; a stream without usage has no count at all (unknown, never estimated).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from latencylens import semconv

TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
"""Span kind of a decorated function: ``workflow``, ``task``, ``agent``, ``tool``, ``unknown``."""
LLM_REQUEST_TYPE: Final = "llm.request.type"
"""Kind of model call (older releases): ``chat``, ``completion``, ``embedding``, ``rerank``."""
LLM_USAGE_TOTAL_TOKENS: Final = "llm.usage.total_tokens"
"""Input + output tokens (older releases)."""
GEN_AI_USAGE_TOTAL_TOKENS: Final = "gen_ai.usage.total_tokens"
"""Input + output tokens (current releases; not a GenAI semconv name)."""
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS_OLD: Final = "gen_ai.usage.cache_read_input_tokens"
"""Cached input tokens, before 0.5 changed the name to ``gen_ai.usage.cache_read.input_tokens``."""
GEN_AI_IS_STREAMING: Final = "gen_ai.is_streaming"
"""True when the call streamed (current releases)."""
LLM_IS_STREAMING: Final = "llm.is_streaming"
"""True when the call streamed (older releases)."""
CHUNK_EVENT: Final = "gen_ai.content.completion.chunk"
"""Span event per streamed chunk received (its time; content only when content capture is on)."""

KIND_BY_SPAN_KIND: Final[Mapping[str, str]] = {"tool": semconv.KIND_TOOL}
"""``workflow``, ``task`` and ``agent`` are application work: no entry, the default applies."""
KIND_BY_REQUEST_TYPE: Final[Mapping[str, str]] = {
    "chat": semconv.KIND_MODEL,
    "completion": semconv.KIND_MODEL,
    "embedding": semconv.KIND_RETRIEVAL,
    "rerank": semconv.KIND_RETRIEVAL,
}

TOTAL_TOKENS: Final = (GEN_AI_USAGE_TOTAL_TOKENS, LLM_USAGE_TOTAL_TOKENS)
CACHE_READ_TOKENS: Final = (GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS_OLD,)
STREAMED: Final = (GEN_AI_IS_STREAMING, LLM_IS_STREAMING)


def kind(attributes: Mapping[str, str]) -> str | None:
    by_type = KIND_BY_REQUEST_TYPE.get(attributes.get(LLM_REQUEST_TYPE, ""))
    if by_type is not None:
        return by_type
    return KIND_BY_SPAN_KIND.get(attributes.get(TRACELOOP_SPAN_KIND, ""))
