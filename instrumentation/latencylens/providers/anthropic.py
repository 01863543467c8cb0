"""Anthropic Messages API: token counts with cache accounting; no server timing exists.

Anthropic's ``input_tokens`` excludes cache reads and writes, so the GenAI ``input_tokens`` (which
includes cached ones) is ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``.
``output_tokens_details.thinking_tokens`` is a subset of ``output_tokens``. A stream is a sequence of
typed events: ``message_start`` (id, model, initial usage), ``content_block_delta`` (content),
``message_delta`` (stop reason and *cumulative* usage: the last one wins, never summed), ``message_stop``.
Generation is over at the last ``content_block_delta``; the events after it are bookkeeping, so the
stream's decode is measured to that delta, not to ``message_stop``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from latencylens.providers._base import BaseAdapter, StreamStateBase, Usage, field_of, nonempty_text, take_int

_INPUT = "usage.input_tokens"
_OUTPUT = "usage.output_tokens"
_CACHE_READ = "usage.cache_read_input_tokens"
_CACHE_WRITE = "usage.cache_creation_input_tokens"
_THINKING = "usage.output_tokens_details.thinking_tokens"
_DELTA_TEXT_FIELDS = ("text", "thinking", "partial_json")


def _read_usage(usage: Any, out: Usage) -> None:
    """Fill ``out``'s token counts from one (possibly merged) Anthropic usage object."""
    raw_input = take_int(usage, "input_tokens", _INPUT, out, expected=True)
    out.output_tokens = take_int(usage, "output_tokens", _OUTPUT, out, expected=True)
    if usage is None:
        return
    read = take_int(usage, "cache_read_input_tokens", _CACHE_READ, out, expected=False)
    write = take_int(usage, "cache_creation_input_tokens", _CACHE_WRITE, out, expected=False)
    out.cache_read_input_tokens, out.cache_creation_input_tokens = read, write
    if raw_input is not None:
        out.input_tokens = raw_input + (read or 0) + (write or 0)
    details = field_of(usage, "output_tokens_details")
    if details is not None:
        out.reasoning_output_tokens = take_int(details, "thinking_tokens", _THINKING, out, expected=False)


def _meta(message: Any, out: Usage) -> None:
    response_id = field_of(message, "id")
    if isinstance(response_id, str):
        out.response_id = response_id
    model = field_of(message, "model")
    if isinstance(model, str):
        out.response_model = model


class AnthropicAdapter(BaseAdapter):
    """Messages API responses and stream events."""

    def __init__(self, name: str = "anthropic") -> None:
        super().__init__(name)

    def extract(self, response: Any, headers: Mapping[str, str] | None = None) -> Usage:
        out = Usage()
        _meta(response, out)
        stop = field_of(response, "stop_reason")
        if isinstance(stop, str):
            out.finish_reasons.append(stop)
        _read_usage(field_of(response, "usage"), out)
        return out

    def new_stream_state(self) -> AnthropicStreamState:
        return AnthropicStreamState()


class AnthropicStreamState(StreamStateBase):
    """Keeps ``message_start``'s message and the usage of the last ``message_delta``."""

    decode_ends_at_last_content = True
    """``content_block_stop``, ``message_delta`` and ``message_stop`` follow the last delta: decode
    ends at the last ``content_block_delta``, not at ``message_stop``."""

    __slots__ = ("_delta_usage", "_message", "_stop")

    def __init__(self) -> None:
        self._message: Any = None
        self._delta_usage: Any = None
        self._stop: str | None = None

    def record_chunk(self, chunk: Any) -> bool:
        event_type = field_of(chunk, "type")
        if event_type == "content_block_delta":
            delta = field_of(chunk, "delta")
            if type(delta) is dict:
                return any(nonempty_text(delta.get(name)) for name in _DELTA_TEXT_FIELDS)
            for name in _DELTA_TEXT_FIELDS:
                if nonempty_text(getattr(delta, name, None)):
                    return True
            return False
        if event_type == "message_delta":
            self._delta_usage = field_of(chunk, "usage")
            stop = field_of(field_of(chunk, "delta"), "stop_reason")
            if isinstance(stop, str):
                self._stop = stop
        elif event_type == "message_start":
            self._message = field_of(chunk, "message")
        return False

    def usage(self) -> Usage:
        out = Usage()
        message = self._message
        _meta(message, out)
        if self._stop is not None:
            out.finish_reasons.append(self._stop)
        start_usage = field_of(message, "usage")
        _read_usage(_merge(start_usage, self._delta_usage), out)
        return out


_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "output_tokens_details",
)


def _merge(start: Any, delta: Any) -> Any:
    """``message_start`` usage overlaid with the cumulative ``message_delta`` usage (delta wins)."""
    if delta is None:
        return start
    if start is None:
        return delta
    merged: dict[str, Any] = {}
    for key in _USAGE_KEYS:
        value = field_of(delta, key)
        merged[key] = value if value is not None else field_of(start, key)
    return merged
