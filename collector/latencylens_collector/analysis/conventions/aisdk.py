"""Vercel's AI SDK (the TypeScript ``ai`` package), whose telemetry is OpenTelemetry spans.

Two span formats, both observed with ``ai`` 7.0 and ``@ai-sdk/otel`` 1.0 around ``@ai-sdk/openai``
(``tests/e2e/test_ai_sdk.py`` runs them):

* ``OpenTelemetry`` (ai 7's recommended integration) writes GenAI names: :mod:`.genai` classifies
  its ``chat {model}`` span (CLIENT, the provider call) and ``execute_tool {name}``; its root
  ``invoke_agent {model}`` and ``step {n}`` (``agent_step``) spans are application work. Its time
  to first chunk is ``gen_ai.client.operation.time_to_first_chunk`` (seconds, to the first output
  chunk), a name pydantic-ai writes too (read with :mod:`.logfire`'s).
* ``LegacyOpenTelemetry``, and the ``experimental_telemetry`` of ai 3.3 to 6, name spans by
  operation (``ai.operationId``): the provider call (``ai.streamText.doStream``,
  ``ai.generateText.doGenerate`` and the object variants) is the model call, ``ai.toolCall`` a tool,
  ``ai.embed.doEmbed`` and ``ai.embedMany.doEmbed`` retrieval; the operation around them
  (``ai.streamText``, ...) is application work. A streamed call records milliseconds (floats) from
  its start: ``ai.response.msToFirstChunk`` to the first output chunk and ``ai.response.msToFinish``
  to the finish part, which the provider's stream sends last. Usage is ``ai.usage.*`` (ai 3 and 4:
  ``promptTokens``, ``completionTokens``; later ``inputTokens``, ``outputTokens``,
  ``cachedInputTokens``) besides the GenAI names, and ``ai.model.provider`` (also written as the
  deprecated ``gen_ai.system``) is the provider and its API, ``openai.chat``: the provider is its
  first part.

The legacy provider call stays open while the tools the model asked for run: its ``ai.toolCall``
spans are its children. :func:`tools_beside_calls` gives attribution the call as it was (it ended
at its finish part) with its tools beside it.

Prompts and completions (``ai.prompt``, ``ai.response.text``, ...) are content: :mod:`.content`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Final

from latencylens import semconv
from latencylens_collector.analysis.conventions.values import first_ms_ns
from latencylens_collector.analysis.records import SpanRow

OPERATION_ID: Final = "ai.operationId"
"""The legacy format's span type: ``ai.streamText``, ``ai.streamText.doStream``, ``ai.toolCall``, ..."""
MODEL_PROVIDER: Final = "ai.model.provider"
"""The provider and its API (``openai.chat``, ``anthropic.messages``, ``google.generative-ai``)."""

KIND_BY_OPERATION_ID: Final[Mapping[str, str]] = {
    "ai.generateText.doGenerate": semconv.KIND_MODEL,
    "ai.streamText.doStream": semconv.KIND_MODEL,
    "ai.generateObject.doGenerate": semconv.KIND_MODEL,
    "ai.streamObject.doStream": semconv.KIND_MODEL,
    "ai.toolCall": semconv.KIND_TOOL,
    "ai.embed.doEmbed": semconv.KIND_RETRIEVAL,
    "ai.embedMany.doEmbed": semconv.KIND_RETRIEVAL,
}
"""Operations around these (``ai.streamText``, ``ai.embed``, ...) are application work: no entry."""

FIRST_CHUNK_MS: Final[tuple[str, ...]] = ("ai.response.msToFirstChunk",)
FINISH_MS: Final[tuple[str, ...]] = ("ai.response.msToFinish",)
INPUT_TOKENS: Final[tuple[str, ...]] = ("ai.usage.inputTokens", "ai.usage.promptTokens")
OUTPUT_TOKENS: Final[tuple[str, ...]] = ("ai.usage.outputTokens", "ai.usage.completionTokens")
CACHE_READ_TOKENS: Final[tuple[str, ...]] = (
    "ai.usage.cachedInputTokens",
    "ai.usage.inputTokenDetails.cacheReadTokens",
)
MODEL: Final[tuple[str, ...]] = ("ai.response.model", "ai.model.id")


def kind(attributes: Mapping[str, str]) -> str | None:
    return KIND_BY_OPERATION_ID.get(attributes.get(OPERATION_ID, ""))


def provider(attributes: Mapping[str, str]) -> str:
    """The provider of an AI SDK span (``openai`` of ``openai.chat``), else ``""``."""
    return attributes.get(MODEL_PROVIDER, "").split(".", 1)[0]


def tools_beside_calls(spans: Sequence[SpanRow]) -> Sequence[SpanRow]:
    """``spans`` with each AI SDK provider call that holds tools cut to the call itself, and its
    tools moved up to its parent, as its siblings (the input is not changed).

    The call ends at its finish part (``ai.response.msToFinish``); a call without one (not
    streamed: its whole answer came before any tool ran) where its first tool began. A model span
    is a leaf to attribution, so left whole it would take its tools' time as its own."""
    calls = {
        row.span_id: row
        for row in spans
        if row.kind == semconv.KIND_MODEL and row.has_parent and OPERATION_ID in row.attributes
    }
    if not calls:
        return spans
    tools: dict[bytes, list[SpanRow]] = {}
    for row in spans:
        if row.kind == semconv.KIND_TOOL and row.parent_span_id in calls:
            tools.setdefault(row.parent_span_id, []).append(row)
    if not tools:
        return spans
    durations: dict[bytes, int] = {}
    for call_id, inside in tools.items():
        call = calls[call_id]
        finish = first_ms_ns(call.attributes, *FINISH_MS)
        end = finish if finish is not None else min(tool.start_ns for tool in inside) - call.start_ns
        durations[call_id] = max(0, min(end, call.duration_ns))
    resolved = []
    for row in spans:
        if row.span_id in durations:
            resolved.append(dataclasses.replace(row, duration_ns=durations[row.span_id]))
        elif row.kind == semconv.KIND_TOOL and row.parent_span_id in tools:
            resolved.append(dataclasses.replace(row, parent_span_id=calls[row.parent_span_id].parent_span_id))
        else:
            resolved.append(row)
    return resolved
