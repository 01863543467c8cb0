"""Google Gemini ``generateContent`` / ``streamGenerateContent`` (REST camelCase or google-genai types).

``usageMetadata`` gives ``promptTokenCount`` (cached content included), ``cachedContentTokenCount``,
``candidatesTokenCount`` and ``thoughtsTokenCount``. Thoughts are counted apart from candidates, so
the GenAI output count is candidates + thoughts and thoughts are the reasoning tokens. There are no
server timings. Every streamed chunk is a full response that may carry ``usageMetadata``; the last
one wins. The google-genai SDK spells fields in snake_case (``usage_metadata``), REST in camelCase.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from latencylens.providers._base import BaseAdapter, StreamStateBase, Usage, field_of, nonempty_text, take_int


def _either(obj: Any, snake: str, camel: str) -> Any:
    value = field_of(obj, snake)
    return value if value is not None else field_of(obj, camel)


def _read(response: Any, out: Usage) -> None:
    response_id = _either(response, "response_id", "responseId")
    if isinstance(response_id, str):
        out.response_id = response_id
    model = _either(response, "model_version", "modelVersion")
    if isinstance(model, str):
        out.response_model = model
    candidates = field_of(response, "candidates")
    if isinstance(candidates, (list, tuple)):
        for candidate in candidates:
            reason = _either(candidate, "finish_reason", "finishReason")
            if reason is not None:
                out.finish_reasons.append(str(getattr(reason, "value", reason)))
    meta = _either(response, "usage_metadata", "usageMetadata")
    snake = meta is not None and type(meta) is not dict
    names = (
        ("prompt_token_count", "candidates_token_count", "cached_content_token_count", "thoughts_token_count")
        if snake
        else ("promptTokenCount", "candidatesTokenCount", "cachedContentTokenCount", "thoughtsTokenCount")
    )
    prefix = "usage_metadata." if snake else "usageMetadata."
    out.input_tokens = take_int(meta, names[0], prefix + names[0], out, expected=True)
    candidates_tokens = take_int(meta, names[1], prefix + names[1], out, expected=True)
    out.cache_read_input_tokens = take_int(meta, names[2], prefix + names[2], out, expected=False)
    thoughts = take_int(meta, names[3], prefix + names[3], out, expected=False)
    out.reasoning_output_tokens = thoughts
    if candidates_tokens is not None:
        out.output_tokens = candidates_tokens + (thoughts or 0)


def _has_text(chunk: Any) -> bool:
    candidates = field_of(chunk, "candidates")
    if not isinstance(candidates, (list, tuple)):
        return False
    for candidate in candidates:
        parts = field_of(field_of(candidate, "content"), "parts")
        if isinstance(parts, (list, tuple)):
            for part in parts:
                if nonempty_text(field_of(part, "text")):
                    return True
    return False


class GeminiAdapter(BaseAdapter):
    """Token counts from ``usageMetadata``; no server timing exists."""

    def __init__(self, name: str = "gcp.gemini") -> None:
        super().__init__(name)

    def extract(self, response: Any, headers: Mapping[str, str] | None = None) -> Usage:
        out = Usage()
        _read(response, out)
        return out

    def new_stream_state(self) -> GeminiStreamState:
        return GeminiStreamState()


class GeminiStreamState(StreamStateBase):
    """Keeps the last chunk that carried usage metadata."""

    __slots__ = ("_last", "_usage_chunk")

    def __init__(self) -> None:
        self._usage_chunk: Any = None
        self._last: Any = None

    def record_chunk(self, chunk: Any) -> bool:
        self._last = chunk
        if _either(chunk, "usage_metadata", "usageMetadata") is not None:
            self._usage_chunk = chunk
        return _has_text(chunk)

    def usage(self) -> Usage:
        out = Usage()
        _read(self._usage_chunk if self._usage_chunk is not None else self._last, out)
        return out
