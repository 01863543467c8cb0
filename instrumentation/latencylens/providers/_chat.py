"""Readers for the OpenAI Chat Completions shape, shared by every OpenAI-compatible adapter.

A response (or a final stream chunk) carries ``id``, ``model``, ``choices[].finish_reason`` and a
``usage`` object; adapters differ only in where usage and timings live, which they say by
overriding :meth:`ChatCompletionsAdapter.read_usage` and :meth:`ChatCompletionsAdapter.carries_usage`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from latencylens.providers._base import Usage, field_of, seconds_to_ns


def as_int(value: Any) -> int | None:
    """An integer token count, or ``None`` for anything else (bools included)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def take_int(obj: Any, name: str, path: str, out: Usage, *, expected: bool) -> int | None:
    """Read ``obj.name`` as a count and note ``path.name`` as reported, or missing if expected."""
    value = as_int(field_of(obj, name))
    if value is not None:
        out.fields_reported.append(f"{path}.{name}")
    elif expected:
        out.fields_missing.append(f"{path}.{name}")
    return value


def take_seconds(obj: Any, name: str, path: str, out: Usage, *, expected: bool) -> int | None:
    """Read ``obj.name`` in seconds as integer ns, noting it as reported or missing."""
    value = seconds_to_ns(field_of(obj, name))
    if value is not None:
        out.fields_reported.append(f"{path}.{name}")
    elif expected:
        out.fields_missing.append(f"{path}.{name}")
    return value


def read_token_usage(usage: Any, path: str, out: Usage) -> None:
    """Token counts of a Chat Completions ``usage`` object found at ``path``."""
    out.input_tokens = take_int(usage, "prompt_tokens", path, out, expected=True)
    out.output_tokens = take_int(usage, "completion_tokens", path, out, expected=True)
    prompt_details = field_of(usage, "prompt_tokens_details")
    details_path = f"{path}.prompt_tokens_details"
    out.cache_read_input_tokens = take_int(prompt_details, "cached_tokens", details_path, out, expected=False)
    out.cache_creation_input_tokens = take_int(
        prompt_details, "cache_write_tokens", details_path, out, expected=False
    )
    out.reasoning_output_tokens = take_int(
        field_of(usage, "completion_tokens_details"),
        "reasoning_tokens",
        f"{path}.completion_tokens_details",
        out,
        expected=False,
    )


def read_meta(obj: Any, out: Usage) -> None:
    """Response id, model and the finish reason of every choice that has one."""
    response_id = field_of(obj, "id")
    if isinstance(response_id, str):
        out.response_id = response_id
    model = field_of(obj, "model")
    if isinstance(model, str):
        out.response_model = model
    out.finish_reasons.extend(_finish_reasons(obj))


def _finish_reasons(obj: Any) -> list[str]:
    choices = field_of(obj, "choices")
    if not isinstance(choices, (list, tuple)):
        return []
    return [str(reason) for choice in choices if (reason := field_of(choice, "finish_reason"))]


def has_content(chunk: Any) -> bool:
    """True when any choice's ``delta.content`` is a non-empty string (role-only chunks are not)."""
    choices = field_of(chunk, "choices")
    if not choices or isinstance(choices, (str, Mapping)):
        return False
    for choice in choices:
        text = field_of(field_of(choice, "delta"), "content")
        if isinstance(text, str) and text:
            return True
    return False


class ChatCompletionsAdapter:
    """Adapter for an OpenAI-compatible Chat Completions API; reports token counts only."""

    def __init__(self, name: str) -> None:
        self.name = name

    def read_usage(self, holder: Any, out: Usage) -> None:
        """Fill ``out`` from the response or chunk ``holder`` (``None`` if usage never came)."""
        read_token_usage(field_of(holder, "usage"), "usage", out)

    def carries_usage(self, chunk: Any) -> bool:
        """Whether this stream chunk holds the whole request's usage."""
        return field_of(chunk, "usage") is not None

    def extract(self, response: Any, headers: Mapping[str, str] | None = None) -> Usage:
        out = Usage()
        read_meta(response, out)
        self.read_usage(response, out)
        return out

    def new_stream_state(self) -> ChatStreamState:
        return ChatStreamState(self)


class ChatStreamState:
    """Sees each Chat Completions chunk once; usage comes from the last chunk that carried it."""

    def __init__(self, adapter: ChatCompletionsAdapter) -> None:
        self._adapter = adapter
        self._meta = Usage()
        self._usage_chunk: Any = None

    def record_chunk(self, chunk: Any) -> bool:
        meta = self._meta
        if meta.response_id is None or meta.response_model is None:
            read_meta(chunk, meta)
        else:
            meta.finish_reasons.extend(_finish_reasons(chunk))
        if self._adapter.carries_usage(chunk):
            self._usage_chunk = chunk
        return has_content(chunk)

    def usage(self) -> Usage:
        out = Usage(
            response_model=self._meta.response_model,
            response_id=self._meta.response_id,
            finish_reasons=list(self._meta.finish_reasons),
        )
        self._adapter.read_usage(self._usage_chunk, out)
        return out
