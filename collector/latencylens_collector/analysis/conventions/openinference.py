"""OpenInference (Arize Phoenix: ``openinference-instrumentation-*``).

Names as in ``openinference-semantic-conventions`` 0.1 (``SpanAttributes``,
``OpenInferenceSpanKindValues``); meanings observed with ``openinference-instrumentation-openai``
0.1 around the real ``openai`` SDK:

* The ``LLM`` span (INTERNAL) starts before the request and, when streamed, ends when the stream
  is exhausted (or closed), so its end is the last chunk.
* It records no time-to-first-token attribute: a streamed call carries one span event, ``First
  Token Stream Event``, at the first chunk of any kind (a role-only chunk counts).
* ``llm.token_count.*`` are the provider's usage. A stream without usage (no ``include_usage``)
  has no count at all: unknown, never an estimate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from latencylens import semconv

OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
"""``LLM``, ``RETRIEVER``, ``RERANKER``, ``EMBEDDING``, ``TOOL``, ``CHAIN``, ``AGENT``, ..."""
LLM_MODEL_NAME: Final = "llm.model_name"
"""Model that answered (the response's model when known)."""
LLM_PROVIDER: Final = "llm.provider"
"""Who hosted the model: ``openai``, ``azure``, ``groq``, ..."""
LLM_SYSTEM: Final = "llm.system"
"""API family of the model: ``openai``, ``anthropic``, ..."""
LLM_TOKEN_COUNT_PROMPT: Final = "llm.token_count.prompt"
"""All input tokens."""
LLM_TOKEN_COUNT_COMPLETION: Final = "llm.token_count.completion"
"""All output tokens."""
LLM_TOKEN_COUNT_TOTAL: Final = "llm.token_count.total"
"""Input + output tokens."""
LLM_TOKEN_COUNT_PROMPT_CACHE_READ: Final = "llm.token_count.prompt_details.cache_read"
"""Input tokens read from the provider's prompt cache (a subset of the prompt tokens)."""
FIRST_TOKEN_EVENT: Final = "First Token Stream Event"
"""Span event at the first streamed chunk of any kind (its time, no attributes)."""

KIND_BY_SPAN_KIND: Final[Mapping[str, str]] = {
    "LLM": semconv.KIND_MODEL,
    "RETRIEVER": semconv.KIND_RETRIEVAL,
    "RERANKER": semconv.KIND_RETRIEVAL,
    "EMBEDDING": semconv.KIND_RETRIEVAL,
    "TOOL": semconv.KIND_TOOL,
}
"""``CHAIN``, ``AGENT``, ``GUARDRAIL``, ... are application work: no entry, the default applies."""

INPUT_TOKENS: Final = (LLM_TOKEN_COUNT_PROMPT,)
OUTPUT_TOKENS: Final = (LLM_TOKEN_COUNT_COMPLETION,)
TOTAL_TOKENS: Final = (LLM_TOKEN_COUNT_TOTAL,)
CACHE_READ_TOKENS: Final = (LLM_TOKEN_COUNT_PROMPT_CACHE_READ,)
MODEL: Final = (LLM_MODEL_NAME,)
PROVIDER: Final = (LLM_PROVIDER, LLM_SYSTEM)


def kind(attributes: Mapping[str, str]) -> str | None:
    return KIND_BY_SPAN_KIND.get(attributes.get(OPENINFERENCE_SPAN_KIND, "").upper())


def declares_kind(attributes: Mapping[str, str]) -> bool:
    """Whether the span says what it is: then its word beats names from other conventions."""
    return OPENINFERENCE_SPAN_KIND in attributes
