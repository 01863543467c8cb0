"""Ollama's native API (``/api/chat``, ``/api/generate``): durations in integer nanoseconds.

The final object (``done: true``) carries ``total_duration`` (server total), ``load_duration``
(model load plus waiting for the scheduler: our queue), ``prompt_eval_duration`` (prefill, uncached
tokens only), ``eval_duration`` (decode) and the counts ``prompt_eval_count`` (prompt tokens, cache
hits included, so it is the GenAI input count) and ``eval_count``. Ollama omits zero-valued metrics,
so a final object with ``total_duration`` but no ``load_duration`` means a hot model: queue 0 (derived).
The SDK's ``ChatResponse`` / ``GenerateResponse`` and plain dicts read the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from latencylens.providers._base import (
    BaseAdapter,
    StreamStateBase,
    Usage,
    field_of,
    nonempty_text,
    take_int,
    take_ns,
)

_QUEUE_DERIVED = frozenset({"queue"})


def _read_final(final: Any, out: Usage) -> None:
    model = field_of(final, "model")
    if isinstance(model, str):
        out.response_model = model
    reason = field_of(final, "done_reason")
    if isinstance(reason, str):
        out.finish_reasons.append(reason)
    out.input_tokens = take_int(final, "prompt_eval_count", "prompt_eval_count", out, expected=True)
    out.output_tokens = take_int(final, "eval_count", "eval_count", out, expected=True)
    out.server_total_ns = take_ns(final, "total_duration", "total_duration", out, expected=True)
    out.queue_ns = take_ns(final, "load_duration", "load_duration", out, expected=False)
    if out.queue_ns is None and out.server_total_ns is not None:
        out.queue_ns = 0
        out.derived = _QUEUE_DERIVED
    out.prefill_ns = take_ns(final, "prompt_eval_duration", "prompt_eval_duration", out, expected=True)
    out.decode_ns = take_ns(final, "eval_duration", "eval_duration", out, expected=True)


class OllamaAdapter(BaseAdapter):
    """Counts and durations from the final (``done``) object."""

    def __init__(self, name: str = "ollama") -> None:
        super().__init__(name)

    def extract(self, response: Any, headers: Mapping[str, str] | None = None) -> Usage:
        out = Usage()
        _read_final(response, out)
        return out

    def new_stream_state(self) -> OllamaStreamState:
        return OllamaStreamState()


class OllamaStreamState(StreamStateBase):
    """Content is ``message.content`` / ``message.thinking`` (chat) or ``response`` (generate)."""

    __slots__ = ("_final",)

    def __init__(self) -> None:
        self._final: Any = None

    def record_chunk(self, chunk: Any) -> bool:
        if field_of(chunk, "done"):
            self._final = chunk
        message = field_of(chunk, "message")
        if message is not None:
            return nonempty_text(field_of(message, "content")) or nonempty_text(field_of(message, "thinking"))
        return nonempty_text(field_of(chunk, "response")) or nonempty_text(field_of(chunk, "thinking"))

    def usage(self) -> Usage:
        out = Usage()
        _read_final(self._final, out)
        return out
