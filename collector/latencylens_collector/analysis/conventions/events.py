"""Stream times from span events, for instrumentations that record chunks as events.

* OpenLLMetry adds ``gen_ai.content.completion.chunk`` (``llm.content.completion.chunk`` before
  ``opentelemetry-semantic-conventions-ai`` 0.5) each time a chunk arrives, without attributes,
  and ends the span when the stream ends.
* OpenInference adds ``First Token Stream Event`` when the first chunk arrives.
* The GenAI semantic conventions (up to v1.36, where events were per message) record
  ``gen_ai.choice`` when a choice is complete: for a stream, when its last chunk has arrived. They
  define no chunk or first-token event.

First content = the first chunk (or first-token) event; last chunk = the last chunk event, else the
last ``gen_ai.choice`` event. Chunk events carry no content, so a first chunk that only says
``role: assistant`` counts as content (providers send it together with the first token).
OpenTelemetry SDKs keep only the latest events of a span (128 by default) and report how many
they dropped: then the first chunk event is not the stream's first, and no first content is read.

The collector reads this when it decodes a span and writes it as :data:`FIRST_CONTENT_NS` /
:data:`LAST_CHUNK_NS` on the span; :func:`.reading.canonical_attributes` uses them when the span
has no stream record of our SDK.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

OPENLLMETRY_CHUNK: Final = "gen_ai.content.completion.chunk"
"""OpenLLMetry: one event per chunk received."""
OPENLLMETRY_CHUNK_OLD: Final = "llm.content.completion.chunk"
"""OpenLLMetry before semantic-conventions-ai 0.5."""
OPENINFERENCE_FIRST_TOKEN: Final = "First Token Stream Event"
"""OpenInference: the first chunk arrived."""
GENAI_CHOICE: Final = "gen_ai.choice"
"""GenAI semconv (≤ v1.36): a complete choice (the end of a stream)."""

CHUNK_EVENTS: Final = frozenset({OPENLLMETRY_CHUNK, OPENLLMETRY_CHUNK_OLD})
FIRST_CONTENT_EVENTS: Final = frozenset({*CHUNK_EVENTS, OPENINFERENCE_FIRST_TOKEN})
STREAM_END_EVENTS: Final = frozenset({GENAI_CHOICE})
STREAM_EVENTS: Final = FIRST_CONTENT_EVENTS | STREAM_END_EVENTS

# What the collector writes on the span (offsets from the span's start, integer ns).
FIRST_CONTENT_NS: Final = "latencylens.events.first_content_ns"
"""ns from the span's start to its first chunk event (written by the collector)."""
LAST_CHUNK_NS: Final = "latencylens.events.last_chunk_ns"
"""ns from the span's start to its last chunk event, else its last ``gen_ai.choice`` event."""


def stream_attributes(
    events: Iterable[tuple[str, int, Any]], start_ns: int, end_ns: int, dropped_events_count: int = 0
) -> dict[str, str]:
    """:data:`FIRST_CONTENT_NS` and :data:`LAST_CHUNK_NS` from a span's events, given as ``(name,
    time_ns, attributes)`` (absent when the events do not say). Events outside the span's window
    are ignored: they are not its chunks."""
    first = last_chunk = last_end = None
    for name, time_ns, _ in events:
        if name not in STREAM_EVENTS or not start_ns <= time_ns <= end_ns:
            continue
        if name in FIRST_CONTENT_EVENTS and (first is None or time_ns < first):
            first = time_ns
        if name in CHUNK_EVENTS:
            if last_chunk is None or time_ns > last_chunk:
                last_chunk = time_ns
        elif name in STREAM_END_EVENTS and (last_end is None or time_ns > last_end):
            last_end = time_ns
    found = {}
    if first is not None and not dropped_events_count:  # else the first chunk's event is gone
        found[FIRST_CONTENT_NS] = str(first - start_ns)
    last = last_chunk if last_chunk is not None else last_end
    if last is not None:
        found[LAST_CHUNK_NS] = str(last - start_ns)
    return found
