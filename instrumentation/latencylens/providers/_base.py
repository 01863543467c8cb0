"""The one interface every provider adapter implements.

An adapter turns what a provider sent back (an SDK object, a plain dict, or the chunks of a stream)
into a :class:`Usage`: token counts and the server time the provider reported, in integer
nanoseconds. The generic wrapping code in ``latencylens._wrap`` is written once and calls only this
interface, so adding a provider means adding one module here and registering it in
``latencylens.providers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from latencylens import semconv


@dataclass
class Usage:
    """Token counts and provider-reported server time for one model call.

    ``None`` means "not reported"; zero means "reported as zero". Server times are integer ns.
    ``server_total_ns`` is all server-side time including queue: for Groq it is
    ``queue_time + total_time``, for Cerebras ``time_info.total_time`` itself.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    reasoning_output_tokens: int | None = None
    queue_ns: int | None = None
    prefill_ns: int | None = None
    decode_ns: int | None = None
    server_total_ns: int | None = None
    response_model: str | None = None
    response_id: str | None = None
    finish_reasons: list[str] = field(default_factory=list)
    fields_reported: list[str] = field(default_factory=list)
    """Provider field paths that were present, e.g. ``usage.queue_time``."""
    fields_missing: list[str] = field(default_factory=list)
    """Field paths the adapter expected and did not find."""

    def to_attributes(self) -> dict[str, Any]:
        """Span attributes for the fields that were reported (nothing for ``None``)."""
        pairs: list[tuple[str, Any]] = [
            (semconv.GEN_AI_USAGE_INPUT_TOKENS, self.input_tokens),
            (semconv.GEN_AI_USAGE_OUTPUT_TOKENS, self.output_tokens),
            (semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, self.cache_read_input_tokens),
            (semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, self.cache_creation_input_tokens),
            (semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, self.reasoning_output_tokens),
            (semconv.PROVIDER_QUEUE_NS, self.queue_ns),
            (semconv.PROVIDER_PREFILL_NS, self.prefill_ns),
            (semconv.PROVIDER_DECODE_NS, self.decode_ns),
            (semconv.PROVIDER_SERVER_TOTAL_NS, self.server_total_ns),
            (semconv.GEN_AI_RESPONSE_MODEL, self.response_model),
            (semconv.GEN_AI_RESPONSE_ID, self.response_id),
        ]
        attributes = {key: value for key, value in pairs if value is not None}
        if self.finish_reasons:
            attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = list(self.finish_reasons)
        if self.fields_reported:
            attributes[semconv.PROVIDER_FIELDS_REPORTED] = list(self.fields_reported)
        if self.fields_missing:
            attributes[semconv.PROVIDER_FIELDS_MISSING] = list(self.fields_missing)
        return attributes


class StreamState(Protocol):
    """Per-stream state: sees every chunk once, in order, and yields the final :class:`Usage`."""

    def record_chunk(self, chunk: Any) -> bool:
        """Note one chunk; return True when it carries non-empty content (for TTFT)."""
        ...

    def usage(self) -> Usage:
        """What the chunks seen so far reported (usage usually arrives in the final chunk)."""
        ...


class ProviderAdapter(Protocol):
    """What the generic model-call wrapper needs from a provider module."""

    name: str
    """Value for ``gen_ai.provider.name``."""

    def extract(self, response: Any, headers: Mapping[str, str] | None = None) -> Usage:
        """Read a complete (non-streamed) response: SDK object or plain dict."""
        ...

    def new_stream_state(self) -> StreamState:
        """A fresh state for one streamed response."""
        ...


def field_of(obj: Any, name: str) -> Any:
    """``obj[name]`` for mappings, ``obj.name`` for SDK objects, including pydantic extras.

    Provider SDKs built on pydantic keep fields they do not declare (``x_groq`` on an OpenAI
    client's object, say) in ``model_extra``; plain attribute access finds those too.
    """
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None)
        if isinstance(extra, Mapping):
            value = extra.get(name)
    return value


def seconds_to_ns(value: Any) -> int | None:
    """Provider seconds (float) to integer ns, rounded; ``None`` when absent or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return round(value * 1_000_000_000)
