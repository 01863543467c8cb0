"""Message content (prompts, completions, tool arguments, retrieved text): dropped at ingest.

LatencyLens measures time; it does not need what was said. Instrumentations record content by
default under their own names, so the collector drops every attribute known to hold content, on
spans and on span events, before anything is stored. What was dropped is kept as a count and a
size on the span (or event): ``latencylens.content.dropped_attributes`` and
``latencylens.content.dropped_bytes`` (UTF-8 bytes of the dropped values). Events that exist only
to carry content (GenAI ``gen_ai.user.message``, ``gen_ai.choice``, OpenLIT's
``gen_ai.content.prompt``, ...) keep their name, time and a few descriptive attributes.

Opting in (``LATENCYLENS_STORE_CONTENT=true``) keeps content, each value cut to
``LATENCYLENS_CONTENT_MAX_BYTES``.

Cost on the hot path: attribute keys repeat from span to span, so keys already found not to be
content are remembered; a span whose keys are all known costs one C-level set test.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from latencylens_collector.settings import DEFAULT_CONTENT_MAX_BYTES

# --- names, per convention -----------------------------------------------------------------------
GENAI: Final = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.retrieval.query.text",
    "gen_ai.retrieval.documents",
    "gen_ai.prompt",  # deprecated: "use Event API to report prompt contents"
    "gen_ai.completion",  # deprecated likewise
)
"""OpenTelemetry GenAI semantic conventions (v1.41.0): the Opt-In content attributes."""
GENAI_CONTENT_EVENTS: Final = (
    "gen_ai.system.message",
    "gen_ai.user.message",
    "gen_ai.assistant.message",
    "gen_ai.tool.message",
    "gen_ai.choice",
    "gen_ai.client.inference.operation.details",
)
"""GenAI events that carry messages (the per-message events up to v1.36, then one details event)."""

OPENLLMETRY: Final = (
    "traceloop.entity.input",
    "traceloop.entity.output",
    "traceloop.prompt.template",
    "traceloop.prompt.template_variables",
)
"""OpenLLMetry (``opentelemetry-semantic-conventions-ai`` 0.5); its current releases write the GenAI
``gen_ai.input.messages`` / ``gen_ai.output.messages``, older ones the indexed names below."""
OPENLLMETRY_INDEXED: Final = (
    "gen_ai.prompt.<n>.*",
    "gen_ai.completion.<n>.*",
    "llm.prompts.<n>.*",
    "llm.completions.<n>.*",
)
"""Flattened message lists of older OpenLLMetry releases (``gen_ai.prompt.0.content``, ...)."""

OPENINFERENCE: Final = (
    "input.value",
    "output.value",
    "llm.prompts",
    "llm.prompt_template.template",
    "llm.prompt_template.variables",
    "llm.function_call",
    "reranker.query",
)
"""OpenInference (``openinference-semantic-conventions`` 0.1)."""
OPENINFERENCE_INDEXED: Final = (
    "llm.input_messages.<n>.*",
    "llm.output_messages.<n>.*",
    "llm.prompts.<n>.*",
    "llm.choices.<n>.*",
    "retrieval.documents.<n>.document.content",
    "reranker.input_documents.<n>.document.content",
    "reranker.output_documents.<n>.document.content",
    "embedding.embeddings.<n>.embedding.text",
)

OPENLIT: Final = (
    "gen_ai.content.prompt",
    "gen_ai.content.completion",
    "gen_ai.content.revised_prompt",
    "gen_ai.content.reasoning",
    "gen_ai.tool.input",
    "gen_ai.tool.output",
    "gen_ai.tool.args",
    "gen_ai.tool.result",
    "gen_ai.tool.input_kwargs",
    "gen_ai.workflow.input",
    "gen_ai.workflow.output",
    "gen_ai.retrieval.query",
    "gen_ai.message.content",
    "gen_ai.agent.human_input",
    "gen_ai.agent.actual_output",
    "gen_ai.agent.step_messages",
    "gen_ai.agent.final_result",
    "gen_ai.request.speech.prompt",
    "gen_ai.response.audio.text",
)
"""OpenLIT (``openlit`` 1.45 ``semcov``), beyond the GenAI names it also writes."""
OPENLIT_CONTENT_EVENTS: Final = ("gen_ai.content.prompt", "gen_ai.content.completion")

LOGFIRE: Final = (
    "request_data",
    "response_data",
    "events",
    "prompt",
    "all_messages_events",
    "pydantic_ai.all_messages",
    "final_result",
    "tool_arguments",
    "tool_response",
)
"""Logfire's LLM integrations (``logfire`` 5.4: ``request_data``, ``response_data``, ``events``)
and pydantic-ai's (2.68, plus ``all_messages_events`` of its older instrumentation). Their
``logfire.json_schema`` only names these attributes and is kept."""

AI_SDK: Final = (
    "ai.prompt",
    "ai.prompt.messages",
    "ai.request.text",
    "ai.response.text",
    "ai.response.reasoning",
    "ai.response.toolCalls",
    "ai.response.files",
    "ai.response.object",
    "ai.toolCall.args",
    "ai.toolCall.result",
    "ai.value",
    "ai.values",
    "ai.embedding",
    "ai.embeddings",
    "ai.documents",
    "ai.ranking",
)
"""Vercel's AI SDK, its legacy spans (``@ai-sdk/otel`` 1.0 ``LegacyOpenTelemetry``: what it records
only when inputs or outputs are recorded, and the ``ai.*`` names of ai 3.3 to 6); its current
integration writes the GenAI names. Tool definitions, schemas and provider metadata stay."""

CONTENT_KEYS: Final = frozenset((*GENAI, *OPENLLMETRY, *OPENINFERENCE, *OPENLIT, *LOGFIRE, *AI_SDK))
"""Attribute names dropped wherever they appear."""
INDEXED: Final = tuple(dict.fromkeys((*OPENLLMETRY_INDEXED, *OPENINFERENCE_INDEXED)))
"""Flattened lists: ``<n>`` is an index, ``*`` any field. For documents only the text is content;
ids and scores stay."""


def _indexed_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = []
    for name in names:
        head, tail = name.split(".<n>")
        rest = r"(?:\..*)?" if tail == ".*" else re.escape(tail)
        alternatives.append(rf"{re.escape(head)}\.\d+{rest}")
    return re.compile("(?:" + "|".join(alternatives) + ")$", re.DOTALL)


_INDEXED: Final = _indexed_pattern(INDEXED)
INDEXED_PATTERN: Final = _INDEXED.pattern
"""The same, as text (with ``re.DOTALL``, matched from the start), for the SQL that drops content."""
CONTENT_EVENTS: Final = frozenset((*GENAI_CONTENT_EVENTS, *OPENLIT_CONTENT_EVENTS))
"""Events whose attributes are content except :data:`EVENT_KEPT_KEYS`."""
EVENT_KEPT_KEYS: Final = frozenset(
    {
        "gen_ai.system",
        "gen_ai.provider.name",
        "gen_ai.operation.name",
        "gen_ai.request.model",
        "gen_ai.response.model",
        "gen_ai.response.id",
        "gen_ai.response.finish_reasons",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "server.address",
        "server.port",
        "error.type",
        "index",
        "finish_reason",
        "role",
    }
)
"""What a content event keeps: who answered, which choice, why it stopped; never a message."""

# --- what the collector writes --------------------------------------------------------------------
DROPPED_ATTRIBUTES: Final = "latencylens.content.dropped_attributes"
"""How many content attributes the collector dropped from this span (or event)."""
DROPPED_BYTES: Final = "latencylens.content.dropped_bytes"
"""UTF-8 bytes of the content values the collector dropped from this span (or event)."""


def is_content_key(key: str) -> bool:
    """Whether an attribute of this name holds message content, in any known convention."""
    return key in CONTENT_KEYS or _INDEXED.match(key) is not None


_PLAIN_KEYS: set[str] = set()
"""Keys seen and found not to be content. Cleared when full, so it stays small."""
_PLAIN_KEYS_MAX: Final = 8192


def content_keys(attributes: Mapping[str, str]) -> list[str]:
    """The content keys among ``attributes`` (usually none, found with one set test)."""
    plain = _PLAIN_KEYS
    if plain.issuperset(attributes):
        return []
    found = []
    for key in attributes:
        if key in plain:
            continue
        if is_content_key(key):
            found.append(key)
        else:
            if len(plain) >= _PLAIN_KEYS_MAX:
                plain.clear()
            plain.add(key)
    return found


@dataclass(frozen=True)
class ContentPolicy:
    """Whether content is stored (opt-in) and, then, how much of each value."""

    store: bool = False
    max_bytes: int = DEFAULT_CONTENT_MAX_BYTES


@dataclass
class ContentTally:
    """What one export lost to the policy: attributes dropped and bytes removed (dropped values,
    and the cut part of values kept with content on)."""

    attributes: int = 0
    bytes: int = 0


class ContentFilter:
    """Applies a :class:`ContentPolicy` to the spans and events of one export, adding up what it
    removed in ``tally``. ``cut(value, limit)`` shortens a kept value (with a marker) and says how
    many bytes it removed."""

    def __init__(self, policy: ContentPolicy, cut: Callable[[str, int], tuple[str, int]]) -> None:
        self.policy, self.cut = policy, cut
        self.tally = ContentTally()

    def attributes(self, attributes: dict[str, str], keys: list[str] | None = None) -> dict[str, str]:
        """``attributes`` without their content (or with it cut, when stored): the same dict when
        there is none. ``keys``: the content keys, when the caller knows them already."""
        found = content_keys(attributes) if keys is None else keys
        if not found:
            return attributes
        if self.policy.store:
            return self._cut(attributes, found)
        kept = dict(attributes)
        dropped = 0
        for key in found:
            dropped += _size(kept.pop(key))
        self.tally.attributes += len(found)
        self.tally.bytes += dropped
        kept[DROPPED_ATTRIBUTES] = str(len(found))
        kept[DROPPED_BYTES] = str(dropped)
        return kept

    def event(self, name: str, attributes: dict[str, str]) -> dict[str, str]:
        """An event's attributes: a content event keeps only :data:`EVENT_KEPT_KEYS`."""
        if name not in CONTENT_EVENTS or not attributes:
            return self.attributes(attributes)
        return self.attributes(attributes, [key for key in attributes if key not in EVENT_KEPT_KEYS])

    def _cut(self, attributes: dict[str, str], keys: list[str]) -> dict[str, str]:
        limit = self.policy.max_bytes
        out = attributes
        for key in keys:
            value = attributes[key]
            if len(value) * 4 <= limit:  # cannot be over the limit: skip encoding
                continue
            cut, removed = self.cut(value, limit)
            if removed:
                if out is attributes:
                    out = dict(attributes)
                out[key] = cut
                self.tally.bytes += removed
        return out


def _size(value: str) -> int:
    return len(value) if value.isascii() else len(value.encode("utf-8"))
